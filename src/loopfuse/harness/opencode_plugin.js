// loopfuse's loop guard for OpenCode: this file is written by `loopfuse init --agent
// opencode` and removed by `loopfuse init --agent opencode --remove` (which refuse to
// touch it once changed). At each tool call it runs `loopfuse hook` with one JSON event
// on stdin and does what the hook answers: let the call run, add a note to its answer
// for the model, refuse it (the model reads the reason as the call's answer), or end the
// session. Whatever goes wrong here (loopfuse missing, a crash, no answer in time), the
// call runs: a guard must never break the agent. See loopfuse's docs/agents.md.
import { spawn } from "node:child_process"

const COMMAND = @LOOPFUSE_ARGV@
const TIMEOUT_MS = 30000 // a hook that has not answered by then is left; the call runs
const KEPT = 4096 // call ids remembered (see `reported` and `notes`)

// Run the hook with `event`: its answer, {} when it failed or said nothing. Never rejects.
function ask(event) {
  return new Promise((resolve) => {
    let out = ""
    let err = ""
    let timer
    const done = (answer) => {
      clearTimeout(timer)
      resolve(answer)
    }
    try {
      const input = JSON.stringify({ loopfuse: 1, ...event })
      const child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ["pipe", "pipe", "pipe"] })
      timer = setTimeout(() => {
        child.kill("SIGKILL")
        done({})
      }, TIMEOUT_MS)
      child.stdout.setEncoding("utf8").on("data", (data) => (out += data))
      child.stderr.setEncoding("utf8").on("data", (data) => (err += data))
      child.on("error", () => done({})) // not found, not runnable
      child.on("close", (code) => done(answerOf(code, out, err)))
      child.stdin.on("error", () => {}) // EPIPE: the hook exited without reading it all
      child.stdin.end(input)
    } catch {
      done({})
    }
  })
}

// The hook's answer: its stdout's JSON object when it exited 0, and what it wrote on
// stderr (a problem the user must see) as `user`.
function answerOf(code, out, err) {
  let answer = {}
  try {
    const read = code === 0 && out.trim() ? JSON.parse(out) : {}
    if (read && typeof read === "object" && !Array.isArray(read)) answer = read
  } catch {}
  if (err.trim() && typeof answer.user !== "string") answer = { ...answer, user: err.trim() }
  return answer
}

export const LoopfusePlugin = async ({ client }) => {
  // Installed twice (the user's and a project's plugin folder): one of them guards.
  const loaded = (globalThis[Symbol.for("loopfuse.opencode")] ??= new WeakSet())
  if (loaded.has(client)) return {}
  loaded.add(client)

  const reported = new Set() // calls refused here or reported failed: reported once
  const notes = new Map() // failed calls' notes, by call: added to their answers (below)
  let failures = Promise.resolve() // failed calls' reports, awaited before the next call

  // What the user must know (the guard is off: its settings are refused): a toast in the
  // terminal UI, OpenCode's log, and stderr under `opencode run` (never in the UI's screen).
  function tell(text) {
    try {
      const message = /^\[?loopfuse\b/.test(text) ? text : `[loopfuse] ${text}`
      client.tui.showToast({ body: { title: "loopfuse", message, variant: "warning" } }).catch(() => {})
      client.app.log({ body: { service: "loopfuse", level: "warn", message } }).catch(() => {})
      if (process.argv[2] === "run") process.stderr.write(`${message}\n`)
    } catch {}
  }

  function remember(table, callID, value) {
    if (table.size >= KEPT) table.clear()
    if (table instanceof Map) table.set(callID, value)
    else table.add(callID)
  }

  return {
    "chat.message": async (input, output) => {
      try {
        const parts = (output.parts ?? []).map((p) => ({ type: p.type, synthetic: p.synthetic === true }))
        const answer = await ask({ hook_event_name: "chat.message", sessionID: input.sessionID, parts })
        if (answer.user) tell(String(answer.user))
      } catch {}
    },
    "tool.execute.before": async (input, output) => {
      let answer = {}
      try {
        await failures
        answer = await ask({
          hook_event_name: "tool.execute.before",
          sessionID: input.sessionID,
          callID: input.callID,
          tool: input.tool,
          args: output.args,
        })
        if (answer.user) tell(String(answer.user))
        if (answer.action !== "deny" && answer.action !== "end") return
        remember(reported, input.callID)
        if (answer.action === "end") await client.session.abort({ path: { id: input.sessionID } })
      } catch {
        if (answer.action !== "deny" && answer.action !== "end") return
      }
      throw new Error(String(answer.reason)) // the refusal: the model reads it as the answer
    },
    "tool.execute.after": async (input, output) => {
      try {
        const exit = output.metadata?.exit
        const answer = await ask({
          hook_event_name: "tool.execute.after",
          sessionID: input.sessionID,
          callID: input.callID,
          tool: input.tool,
          args: input.args,
          output: output.output,
          metadata: { exit: typeof exit === "number" ? exit : null },
        })
        if (answer.user) tell(String(answer.user))
        if (answer.action === "note" && typeof output.output === "string") {
          output.output += `${output.output.endsWith("\n") ? "\n" : "\n\n"}${answer.reason}`
        }
      } catch {}
    },
    // A call that failed (its tool threw) has no tool.execute.after: its part says so.
    event: async ({ event }) => {
      try {
        const part = event.type === "message.part.updated" ? event.properties?.part : undefined
        if (part?.type !== "tool" || part.state?.status !== "error" || reported.has(part.callID)) return
        remember(reported, part.callID)
        const failed = {
          hook_event_name: "tool.execute.error",
          sessionID: part.sessionID,
          callID: part.callID,
          tool: part.tool,
          args: part.state.input,
          error: part.state.error,
        }
        failures = failures
          .then(() => ask(failed))
          .then((answer) => {
            if (answer.user) tell(String(answer.user))
            if (answer.action === "note") remember(notes, part.callID, String(answer.reason))
          })
          .catch(() => {})
      } catch {}
    },
    // A failed call's answer cannot be changed (its tool threw): its note is added to it
    // in the messages the model is sent, each time they are sent.
    "experimental.chat.messages.transform": async (input, output) => {
      try {
        await failures
        if (notes.size === 0) return
        for (const message of output.messages ?? []) {
          for (const part of message.parts ?? []) {
            const note = part.type === "tool" ? notes.get(part.callID) : undefined
            const error = part.state?.error
            if (note && typeof error === "string" && !error.endsWith(note)) {
              part.state = { ...part.state, error: `${error}\n\n${note}` }
            }
          }
        }
      } catch {}
    },
  }
}
