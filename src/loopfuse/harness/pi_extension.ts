// loopfuse: the loop guard of pi's tool calls (https://github.com/loopfuse/loopfuse, docs/agents.md).
// Written by `loopfuse init --agent pi`; `loopfuse init --agent pi --remove` deletes it.
//
// When the user sends a prompt, before each tool call and after it, this runs COMMAND with
// the event as one JSON object on stdin, and does what the JSON object on its stdout says:
// {"block": true, "reason": R} refuses the call (the model reads R as its result),
// {"note": T} adds T to the call's result, {"end": true} ends the run, {"message": M}
// shows M to the user. Nothing on stdout: the call goes on.
// Whatever goes wrong (the command missing, failing, slow, or answering anything else),
// the call goes on, unguarded, and the user is told once. This file never throws into
// pi: pi refuses a tool call whose extension throws.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";

const COMMAND = "loopfuse hook --agent pi";
const TIMEOUT_MS = 60000; // a hook this slow is given up: the call goes on
const MAX_OUTPUT = 1 << 20; // characters of the command's stdout read at most
const told = new Set<string>();

function tell(ctx: any, text: string): void {
  if (told.has(text) || told.size > 100) return;
  told.add(text);
  try {
    if (ctx?.hasUI) ctx.ui.notify(text, "warning");
    else process.stderr.write(`${text}\n`);
  } catch {
    // nowhere to say it: the call goes on anyway
  }
}

function unguarded(ctx: any, why: string): null {
  tell(ctx, `[loopfuse] the loop guard did not run (${why}): this call goes on unguarded.`);
  return null;
}

// Runs COMMAND with `payload` on stdin; its answer, or null (allow) whatever went wrong.
function ask(ctx: any, payload: object): Promise<any> {
  return new Promise((resolve) => {
    let settled = false;
    let out = "";
    let err = "";
    let timer: any;
    const done = (answer: any) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    try {
      const child = spawn(COMMAND, { shell: true, stdio: ["pipe", "pipe", "pipe"] });
      timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {}
        done(unguarded(ctx, `no answer in ${TIMEOUT_MS / 1000} s`));
      }, TIMEOUT_MS);
      child.on("error", (e: any) => done(unguarded(ctx, String(e?.message ?? e))));
      child.stdout.on("data", (d: any) => {
        if (out.length < MAX_OUTPUT) out += d;
      });
      child.stderr.on("data", (d: any) => {
        if (err.length < 2000) err += d;
      });
      child.on("close", (code: any, killed: any) => {
        const said = err.trim().slice(0, 2000);
        if (code !== 0) {
          const status = killed ? `killed by ${killed}` : `exit status ${code}`;
          return done(unguarded(ctx, `${COMMAND}: ${status}${said ? `: ${said}` : ""}`));
        }
        if (said) tell(ctx, said); // the hook allows and says why (a state folder it will not use)
        if (!out.trim()) return done(null);
        try {
          const answer = JSON.parse(out);
          done(answer && typeof answer === "object" ? answer : unguarded(ctx, "not an answer"));
        } catch {
          done(unguarded(ctx, "not an answer"));
        }
      });
      // A command that exits without reading stdin: EPIPE here must not end pi.
      child.stdin.on("error", () => {});
      child.stdin.end(JSON.stringify(payload));
    } catch (e: any) {
      done(unguarded(ctx, String(e?.message ?? e)));
    }
  });
}

function session(ctx: any): object {
  let id: any;
  let file: any;
  try {
    id = ctx.sessionManager.getSessionId();
    file = ctx.sessionManager.getSessionFile();
  } catch {}
  return {
    session_id: typeof id === "string" && id ? id : `pi-process-${process.pid}`,
    transcript_path: typeof file === "string" ? file : null,
    cwd: ctx?.cwd ?? null,
  };
}

// The result's parts as the hook reads them: an image as its type, size and hash.
function parts(content: any): any[] {
  if (!Array.isArray(content)) return [];
  return content.map((part: any) => {
    if (part?.type !== "image" || typeof part.data !== "string") return part;
    const sha256 = createHash("sha256").update(part.data).digest("hex");
    return { type: "image", mimeType: part.mimeType, size: part.data.length, sha256 };
  });
}

function act(ctx: any, answer: any): void {
  if (typeof answer?.message === "string" && answer.message) tell(ctx, answer.message);
  if (answer?.end === true) {
    try {
      ctx.abort();
    } catch {}
  }
}

export default function (pi: any) {
  pi.on("before_agent_start", async (event: any, ctx: any) => {
    try {
      const prompt = typeof event?.prompt === "string" ? event.prompt : "";
      act(ctx, await ask(ctx, { hook_event_name: "before_agent_start", ...session(ctx), prompt }));
    } catch {}
    return undefined;
  });
  pi.on("tool_call", async (event: any, ctx: any) => {
    try {
      const answer = await ask(ctx, {
        hook_event_name: "tool_call",
        ...session(ctx),
        tool_name: event.toolName,
        tool_call_id: event.toolCallId,
        tool_input: event.input,
      });
      act(ctx, answer);
      if (answer?.block === true && typeof answer.reason === "string") {
        return { block: true, reason: answer.reason };
      }
    } catch {}
    return undefined;
  });
  pi.on("tool_result", async (event: any, ctx: any) => {
    try {
      const answer = await ask(ctx, {
        hook_event_name: "tool_result",
        ...session(ctx),
        tool_name: event.toolName,
        tool_call_id: event.toolCallId,
        tool_input: event.input,
        tool_response: parts(event.content),
        is_error: event.isError === true,
      });
      act(ctx, answer);
      if (typeof answer?.note === "string" && answer.note) {
        const content = Array.isArray(event.content) ? event.content : [];
        return { content: [...content, { type: "text", text: answer.note }] };
      }
    } catch {}
    return undefined;
  });
}
