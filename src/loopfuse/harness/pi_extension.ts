// loopfuse: the loop guard of pi's tool calls (docs/agents.md of github.com/loopfuse/loopfuse).
// Written by `loopfuse init --agent pi`; `loopfuse init --agent pi --remove` deletes it.
//
// When the user sends a prompt, before each tool call and after it, this runs the hook
// (COMMAND) with the event as one JSON object on stdin, and does what the JSON object on
// its stdout says: {"block": true, "reason": R} refuses the call (the model reads R as its
// result), {"note": T} adds T to the call's result, {"end": true} ends the run,
// {"message": M} shows M to the user. Nothing on stdout: the call goes on.
// Whatever goes wrong (the command missing, failing, slow, or answering anything else),
// the call goes on, unguarded, and the user is told once. This file never throws into
// pi: pi refuses a tool call whose extension throws.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";

const COMMAND: string[] = @LOOPFUSE_ARGV@;
const TIMEOUT_MS = 60000; // a hook this slow is given up: the call goes on
const MAX_OUTPUT = 1 << 20; // characters of the command's stdout read at most
const told = new Set<string>();

function tell(ctx: any, text: string): void {
  if (told.has(text) || told.size > 100) return;
  told.add(text);
  try {
    if (ctx?.hasUI) ctx.ui.notify(text, "warning");
    else process.stderr.write(`${text}\n`);
  } catch {} // nowhere to say it: the call goes on anyway
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
    const fail = (why: string) => settled || done(unguarded(ctx, why));
    try {
      const child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
      timer = setTimeout(() => {
        try { child.kill("SIGKILL"); } catch {} // (a throw here would end pi)
        fail(`no answer in ${TIMEOUT_MS / 1000} s`);
      }, TIMEOUT_MS);
      child.on("error", (e: any) => fail(String(e?.message ?? e)));
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
          return fail(`${COMMAND[0]}: ${status}${said ? `: ${said}` : ""}`);
        }
        if (said) tell(ctx, said); // it allowed, saying why (a state folder it will not use)
        if (!out.trim()) return done(null);
        try {
          const answer = JSON.parse(out);
          if (answer && typeof answer === "object") done(answer);
          else fail("not an answer");
        } catch {
          fail("not an answer");
        }
      });
      // A command that exits without reading stdin: EPIPE here must not end pi.
      child.stdin.on("error", () => {});
      child.stdin.end(JSON.stringify(payload));
    } catch (e: any) {
      fail(String(e?.message ?? e));
    }
  });
}

// One event for the hook: its name, pi's session, and `fields`.
function event(ctx: any, name: string, fields: object): object {
  let id: any;
  let file: any;
  try {
    id = ctx.sessionManager.getSessionId();
    file = ctx.sessionManager.getSessionFile();
  } catch {}
  return {
    hook_event_name: name,
    session_id: typeof id === "string" && id ? id : `pi-process-${process.pid}`,
    transcript_path: typeof file === "string" ? file : null,
    cwd: ctx?.cwd ?? null,
    ...fields,
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

// The calls of the model's answer that holds call `id` (pi has written the answer when it
// asks about its first call).
function siblings(ctx: any, id: string): any[] {
  try {
    let entry = ctx.sessionManager.getLeafEntry();
    for (let steps = 0; entry && steps < 64; steps++) {
      const message = entry.type === "message" ? entry.message : undefined;
      if (message?.role === "assistant" && Array.isArray(message.content)) {
        const calls = message.content.filter((part: any) => part?.type === "toolCall");
        return calls.some((call: any) => call.id === id) ? calls : [];
      }
      entry = entry.parentId ? ctx.sessionManager.getEntry(entry.parentId) : undefined;
    }
  } catch {}
  return [];
}

function before(ctx: any, call: any): Promise<any> {
  const fields = { tool_name: call.name, tool_call_id: call.id, tool_input: call.arguments };
  return ask(ctx, event(ctx, "tool_call", fields));
}

export default function (pi: any) {
  // pi asks about the calls of one answer one after the other, then runs them together:
  // their hooks are started together (a hook tells the calls of one batch by that), and
  // each call waits for its own.
  const asked = new Map<string, Promise<any>>();
  pi.on("turn_end", async () => {
    asked.clear(); // calls pi did not run (the run ended): never waited for
    return undefined;
  });
  pi.on("before_agent_start", async (prompt: any, ctx: any) => {
    try {
      const text = typeof prompt?.prompt === "string" ? prompt.prompt : "";
      act(ctx, await ask(ctx, event(ctx, "before_agent_start", { prompt: text })));
    } catch {}
    return undefined;
  });
  pi.on("tool_call", async (call: any, ctx: any) => {
    try {
      let pending = asked.get(call.toolCallId);
      asked.delete(call.toolCallId);
      if (!pending) {
        // Each call as the model asked for it (its arguments in pi's session).
        const calls = siblings(ctx, call.toolCallId);
        const own = calls.find((c: any) => c.id === call.toolCallId);
        const fallback = { name: call.toolName, id: call.toolCallId, arguments: call.input };
        pending = before(ctx, own ?? fallback);
        for (const c of calls) if (c !== own) asked.set(c.id, before(ctx, c));
      }
      const answer = await pending;
      act(ctx, answer);
      if (answer?.block === true && typeof answer.reason === "string") {
        return { block: true, reason: answer.reason };
      }
    } catch {}
    return undefined;
  });
  pi.on("tool_result", async (result: any, ctx: any) => {
    try {
      const answer = await ask(
        ctx,
        event(ctx, "tool_result", {
          tool_name: result.toolName,
          tool_call_id: result.toolCallId,
          tool_input: result.input,
          tool_response: parts(result.content),
          is_error: result.isError === true,
        }),
      );
      act(ctx, answer);
      if (typeof answer?.note === "string" && answer.note) {
        const content = Array.isArray(result.content) ? result.content : [];
        return { content: [...content, { type: "text", text: answer.note }] };
      }
    } catch {}
    return undefined;
  });
}
