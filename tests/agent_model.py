"""A fake model server for the end-to-end tests of the coding-agent CLIs.

It listens on a free loopback port, in a thread of the test process, and speaks what each
CLI calls when pointed at it: Anthropic Messages (``POST /v1/messages``, Claude Code),
OpenAI Responses (``POST /v1/responses``, Codex's custom provider), Gemini
``generateContent`` / ``streamGenerateContent?alt=sse`` (Gemini CLI) and OpenAI Chat
Completions (``POST /v1/chat/completions``, streamed: Qwen Code). Each answer of the
agent's main turn is played from a script: ``play(turn)`` says which shell commands the
model asks for in that turn (several at once are parallel calls), or the text that ends the
run. Requests that are not the agent's turn (Claude's title, Gemini's routing) get a short
answer that does not advance the script.

The server is bounded: after ``most_turns`` turns it answers with text (which ends every
CLI's run), and after ``deadline`` seconds it stops serving. It records every request, so a
test can read what the model saw.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# The shell tool each CLI offers its model, and the argument that holds the command line.
SHELL_TOOLS = {"claude": ("Bash", "command"), "codex": ("exec_command", "cmd")}
GEMINI_SHELL = ("run_shell_command", "command")
FINAL_TEXT = "Done: nothing more to run."


@dataclass(frozen=True)
class Reply:
    """What the model answers in one turn: shell commands to run (parallel when several),
    or, with none, the text that ends the run."""

    commands: tuple[str, ...] = ()
    text: str = FINAL_TEXT
    arguments: tuple[tuple[str, Any], ...] = ()
    """More arguments of each shell call (Codex: ``yield_time_ms``)."""
    poll: bool = False
    """Codex only: poll the process the last answer says is still running
    (``write_stdin`` with empty ``chars``) instead of running a command."""


Script = Callable[[int], Reply]


def same_command(command: str, turns: int) -> Script:
    """A looping model: ``command`` every turn, ``turns`` times, then an answer."""
    return lambda turn: Reply((command,)) if turn < turns else Reply()


def commands_then_answer(*commands: str) -> Script:
    """A healthy model: each command once, in order, then an answer."""
    return lambda turn: Reply((commands[turn],)) if turn < len(commands) else Reply()


def parallel(commands: tuple[str, ...], turns: int) -> Script:
    """The same ``commands``, all in one turn (parallel calls), ``turns`` times."""
    return lambda turn: Reply(commands) if turn < turns else Reply()


def start_then_poll(command: str, polls: int) -> Script:
    """Codex: start ``command`` with a short yield (it is still running when the answer
    comes back), then poll it ``polls`` times, then an answer."""

    def play(turn: int) -> Reply:
        if turn == 0:
            return Reply((command,), arguments=(("yield_time_ms", 500),))
        return Reply(poll=True) if turn <= polls else Reply()

    return play


def poll_moving_log(log: Path, polls: int) -> Script:
    """A healthy poll: ``tail -5 build.log`` every turn while a line is appended to
    ``log`` before each turn (the build makes progress), ``polls`` times, then an answer."""

    def play(turn: int) -> Reply:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"step {turn}: compiled module_{turn}.c\n")
        return Reply((f"tail -5 {log.name}",)) if turn < polls else Reply()

    return play


@dataclass
class Request:
    """One request the server received."""

    path: str
    body: Any
    turn: int | None  # the script's turn it was answered with; None: not the agent's turn


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value (keys left out), depth first: what the model reads."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def offers_tool(body: Any, name: str) -> bool:
    """Whether a request body offers the model a tool called ``name`` (any dialect)."""
    if not isinstance(body, dict):
        return False
    for tool in body.get("tools") or ():
        if not isinstance(tool, dict):
            continue
        if tool.get("name") == name:
            return True
        function = tool.get("function")  # Chat Completions: {"type": "function", "function": …}
        if isinstance(function, dict) and function.get("name") == name:
            return True
        if any(d.get("name") == name for d in tool.get("functionDeclarations") or ()):
            return True
    return False


@dataclass
class FakeModel:
    """The server: ``with FakeModel(script) as model:`` serves on ``model.url``."""

    script: Script
    most_turns: int = 40
    deadline: float = 150.0
    requests: list[Request] = field(default_factory=list)
    _turns: int = 0
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> FakeModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test reads model.requests, not a log on stderr

            def do_GET(self) -> None:
                model.record(self.path, None, None)
                self.send_error(404)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                status, content_type, payload = model.answer(self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._stop_at = time.monotonic() + self.deadline
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        # Bounded in time: serve until the deadline, polling so shutdown is prompt.
        self._server.timeout = 0.2
        while time.monotonic() < self._stop_at and not getattr(self, "_stopped", False):
            self._server.handle_request()
        self._server.server_close()

    def __exit__(self, *exc: object) -> None:
        self._stopped = True
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def turns(self) -> list[Request]:
        """The requests of the agent's turns, in order."""
        with self._lock:
            return [r for r in self.requests if r.turn is not None]

    def record(self, path: str, body: Any, turn: int | None) -> None:
        with self._lock:
            self.requests.append(Request(path, body, turn))

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def play(self, path: str, body: Any, shell_tool: str) -> Reply | None:
        """The script's reply when the request is the agent's turn (it offers the shell
        tool), else None; the request is recorded either way."""
        if not offers_tool(body, shell_tool):
            self.record(path, body, None)
            return None
        with self._lock:
            turn = self._turns
            self._turns += 1
        reply = self.script(turn) if turn < self.most_turns else Reply()
        self.record(path, body, turn)
        return reply

    def answer(self, path: str, body: Any) -> tuple[int, str, bytes]:
        """Status, content type and payload for one POST."""
        route = urlsplit(path)
        if route.path.endswith("/messages"):
            return self.anthropic(route.path, body)
        if route.path.endswith("/responses"):
            return self.responses(route.path, body)
        if ":generateContent" in route.path or ":streamGenerateContent" in route.path:
            return self.gemini(path, body)
        if route.path.endswith("/chat/completions"):
            return self.chat(route.path, body)
        self.record(path, body, None)
        return 404, "application/json", b'{"error": "not served by the fake model"}'

    # --- Anthropic Messages (Claude Code) -------------------------------------------

    def anthropic(self, path: str, body: Any) -> tuple[int, str, bytes]:
        name, argument = SHELL_TOOLS["claude"]
        reply = self.play(path, body, name) or Reply(text="OK")
        blocks: list[dict[str, Any]] = [
            {
                "type": "tool_use",
                "id": f"toolu_{self.next_id():024d}",
                "name": name,
                "input": {argument: command, "description": "Run a command"},
            }
            for command in reply.commands
        ] or [{"type": "text", "text": reply.text}]
        stop = "tool_use" if reply.commands else "end_turn"
        model = body.get("model", "claude") if isinstance(body, dict) else "claude"
        message = {
            "id": f"msg_{self.next_id():024d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }
        if not (isinstance(body, dict) and body.get("stream")):
            return 200, "application/json", json.dumps(message).encode()
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "tool_use":
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            events += [
                ("content_block_start", {"index": index, "content_block": start}),
                ("content_block_delta", {"index": index, "delta": delta}),
                ("content_block_stop", {"index": index}),
            ]
        events += [
            (
                "message_delta",
                {
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            ("message_stop", {}),
        ]
        stream = "".join(
            f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"
            for kind, data in events
        )
        return 200, "text/event-stream", stream.encode()

    # --- OpenAI Responses (Codex) -----------------------------------------------------

    def responses(self, path: str, body: Any) -> tuple[int, str, bytes]:
        name, argument = SHELL_TOOLS["codex"]
        reply = self.play(path, body, name) or Reply(text="OK")
        calls = [(name, {argument: command, **dict(reply.arguments)}) for command in reply.commands]
        running = re.findall(r"Process running with session ID (\d+)", " ".join(strings(body)))
        if reply.poll and running:
            poll = {"session_id": int(running[-1]), "chars": "", "yield_time_ms": 1000}
            calls.append(("write_stdin", poll))
        items: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": f"fc_{self.next_id()}",
                "call_id": f"call_{self.next_id():020d}",
                "name": tool,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
            for tool, arguments in calls
        ] or [
            {
                "type": "message",
                "id": f"msg_{self.next_id()}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        ]
        response_id = f"resp_{self.next_id()}"
        usage = {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 120,
        }
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}
        ]
        for index, item in enumerate(items):
            events += [
                {"type": "response.output_item.added", "output_index": index, "item": item},
                {"type": "response.output_item.done", "output_index": index, "item": item},
            ]
        events.append(
            {
                "type": "response.completed",
                "response": {
                    "id": response_id,
                    "status": "completed",
                    "output": items,
                    "usage": usage,
                },
            }
        )
        stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return 200, "text/event-stream", stream.encode()

    # --- Gemini generateContent (Gemini CLI) --------------------------------------------

    def gemini(self, path: str, body: Any) -> tuple[int, str, bytes]:
        name, argument = GEMINI_SHELL
        reply = self.play(path, body, name)
        if reply is None:
            parts: list[dict[str, Any]] = [{"text": self.gemini_side_answer(body)}]
        else:
            parts = [
                {
                    "functionCall": {
                        "name": name,
                        "args": {argument: command, "description": "Run a command"},
                    }
                }
                for command in reply.commands
            ] or [{"text": reply.text}]
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 100,
                "candidatesTokenCount": 20,
                "totalTokenCount": 120,
            },
            "modelVersion": "gemini-2.5-flash",
        }
        if ":streamGenerateContent" in path:
            return 200, "text/event-stream", f"data: {json.dumps(chunk)}\r\n\r\n".encode()
        return 200, "application/json", json.dumps(chunk).encode()

    # --- OpenAI Chat Completions (Qwen Code) ---------------------------------------------

    def chat(self, path: str, body: Any) -> tuple[int, str, bytes]:
        """A Chat Completions answer: the turn's shell calls (Gemini CLI's tool, which Qwen
        Code kept), or text; streamed as chunks when asked."""
        name, argument = GEMINI_SHELL
        reply = self.play(path, body, name) or Reply(text="OK")
        calls = [
            {
                "index": index,
                "id": f"call_{self.next_id():020d}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": json.dumps({argument: command, "description": "Run a command"}),
                },
            }
            for index, command in enumerate(reply.commands)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else reply.text}
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else "stop"
        answer_id = f"chatcmpl-{self.next_id()}"
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        if not (isinstance(body, dict) and body.get("stream")):
            whole = {
                "id": answer_id,
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            return 200, "application/json", json.dumps(whole).encode()
        head = {"id": answer_id, "object": "chat.completion.chunk", "created": 0, "model": model}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**head, "choices": [], "usage": usage},
        ]
        stream = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return 200, "text/event-stream", stream.encode()

    @staticmethod
    def gemini_side_answer(body: Any) -> str:
        """The answer to a request that is not the agent's turn: Gemini CLI's model router
        asks for JSON of a given schema (its rating of the task); anything else gets a short
        text."""
        config = body.get("generationConfig") if isinstance(body, dict) else None
        if isinstance(config, dict) and config.get("responseMimeType") == "application/json":
            return json.dumps(example_of(config.get("responseJsonSchema") or {}))
        return "OK"


def example_of(schema: Any) -> Any:
    """A small value that fits a JSON schema (Gemini's upper-case type names or JSON
    Schema's): what a model asked for structured output would answer."""
    kind = str(schema.get("type", "OBJECT")).upper() if isinstance(schema, dict) else "STRING"
    if kind == "OBJECT":
        properties = schema.get("properties") or {}
        return {name: example_of(sub) for name, sub in properties.items()}
    if kind == "ARRAY":
        return []
    if kind in ("INTEGER", "NUMBER"):
        return 10
    if kind == "BOOLEAN":
        return False
    return "A simple request."


# --- Claude Code calling any tool (issue 27 §2: its background commands and their polls) ----

ClaudeCalls = Callable[[int, Any], list[tuple[str, dict[str, Any]]]]
"""The tool calls Claude Code's model makes in a turn, given the turn and the request's
body: ``(tool name, input)`` each (parallel when several); none ends the run."""

OUTPUT_FILE = re.compile(r"Output is being written to: (\S+?\.output)")


def start_then_read_output(command: str, polls: int) -> ClaudeCalls:
    """Claude Code 2.1.3xx: start ``command`` in the background (``Bash`` with
    ``run_in_background``), then read its output file ``polls`` times (``Read`` of the
    path the start's answer names, as Claude Code tells the model to), then answer."""

    def calls(turn: int, body: Any) -> list[tuple[str, dict[str, Any]]]:
        if turn == 0:
            start = {"command": command, "description": "Build", "run_in_background": True}
            return [("Bash", start)]
        found = OUTPUT_FILE.findall(" ".join(strings(body)))
        if found and turn <= polls:
            return [("Read", {"file_path": found[-1]})]
        return []

    return calls


@dataclass
class ClaudeToolModel(FakeModel):
    """:class:`FakeModel` whose Claude Code turns call any tool: ``calls(turn, body)``
    says which (the other CLIs are served as by :class:`FakeModel`)."""

    calls: ClaudeCalls = lambda turn, body: []

    def anthropic(self, path: str, body: Any) -> tuple[int, str, bytes]:
        if not offers_tool(body, SHELL_TOOLS["claude"][0]):
            return super().anthropic(path, body)  # not the agent's turn: recorded there
        with self._lock:
            turn = self._turns
            self._turns += 1
        self.record(path, body, turn)
        blocks: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{self.next_id():024d}", "name": n, "input": i}
            for n, i in (self.calls(turn, body) if turn < self.most_turns else [])
        ] or [{"type": "text", "text": FINAL_TEXT}]
        stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
        message = {
            "id": f"msg_{self.next_id():024d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude") if isinstance(body, dict) else "claude",
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }
        if not (isinstance(body, dict) and body.get("stream")):
            return 200, "application/json", json.dumps(message).encode()
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "tool_use":
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            events += [
                ("content_block_start", {"index": index, "content_block": start}),
                ("content_block_delta", {"index": index, "delta": delta}),
                ("content_block_stop", {"index": index}),
            ]
        events += [
            ("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}}),
            ("message_stop", {}),
        ]
        stream = "".join(
            f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"
            for kind, data in events
        )
        return 200, "text/event-stream", stream.encode()
