"""Valid conversations of each dialect, generated step by step, for the note tests.

Each builder takes ``STEPS`` (what hypothesis draws) and returns a body its provider
accepts (tests/dialect_rules.py): it starts with the user's question and ends where a
request may be sent.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# One step of a conversation: "ask" (user text), "say" (assistant text), "call" with how
# many parallel tool calls, each with its results. Every generated conversation starts
# with "ask" and ends where a request may be sent (after "ask" or a call's results).
STEPS = st.lists(
    st.one_of(
        st.just(("ask", 0)), st.just(("say", 0)), st.tuples(st.just("call"), st.integers(1, 3))
    ),
    max_size=8,
)


def openai_chat(steps: list[tuple[str, int]], system: bool = True) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}] if system else []
    messages.append({"role": "user", "content": "Fix the build."})
    for n, (kind, calls) in enumerate(steps):
        if kind == "ask":
            messages.append({"role": "user", "content": [{"type": "text", "text": f"q{n}"}]})
        elif kind == "say":
            messages.append({"role": "assistant", "content": f"a{n}"})
        else:
            ids = [f"call_{n}_{i}" for i in range(calls)]
            function = {"name": "bash", "arguments": '{"command": "make"}'}
            tool_calls = [{"id": i, "type": "function", "function": function} for i in ids]
            messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
            messages += [{"role": "tool", "tool_call_id": i, "content": "Error 2"} for i in ids]
    if messages[-1]["role"] == "assistant":
        messages.append({"role": "user", "content": "go on"})
    return {"model": "gpt-4o", "messages": messages}


def ollama(steps: list[tuple[str, int]]) -> dict[str, Any]:
    body = openai_chat(steps)
    for message in body["messages"]:
        message.pop("tool_call_id", None)
        for call in message.get("tool_calls") or []:
            call.pop("id")
            call.pop("type")
            call["function"]["arguments"] = {"command": "make"}
    return {"model": "llama3", "messages": body["messages"], "stream": False}


def responses(steps: list[tuple[str, int]]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for n, (kind, calls) in enumerate(steps):
        if kind == "ask":
            items.append({"role": "user", "content": f"q{n}"})
        elif kind == "say":
            text = [{"type": "output_text", "text": f"a{n}"}]
            items.append({"type": "message", "role": "assistant", "content": text})
        else:
            ids = [f"call_{n}_{i}" for i in range(calls)]
            items += [
                {"type": "function_call", "call_id": i, "name": "bash", "arguments": "{}"}
                for i in ids
            ]
            items += [{"type": "function_call_output", "call_id": i, "output": "x"} for i in ids]
    return {"model": "gpt-4o", "instructions": "Be brief.", "input": items}


def anthropic(steps: list[tuple[str, int]], prefill: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]

    def user(blocks: list[dict[str, Any]]) -> None:
        if messages[-1]["role"] == "user":  # one user turn: results first, then text
            messages[-1] = {"role": "user", "content": [*_blocks(messages[-1]), *blocks]}
        else:
            messages.append({"role": "user", "content": blocks})

    for n, (kind, calls) in enumerate(steps):
        if kind == "ask":
            user([{"type": "text", "text": f"q{n}"}])
        elif messages[-1]["role"] == "assistant":
            continue  # Anthropic turns alternate: an assistant step needs a user turn first
        elif kind == "say":
            messages.append({"role": "assistant", "content": f"a{n}"})
        else:
            ids = [f"toolu_{n}_{i}" for i in range(calls)]
            uses = [{"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids]
            messages.append({"role": "assistant", "content": uses})
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": i, "content": "x"} for i in ids
                    ],
                }
            )
    if messages[-1]["role"] == "assistant":
        messages.append({"role": "user", "content": "go on"})
    if prefill:
        messages.append({"role": "assistant", "content": "{"})
    return {"model": "claude", "max_tokens": 64, "system": "Be brief.", "messages": messages}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def gemini(steps: list[tuple[str, int]]) -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Fix the build."}]}]
    for n, (kind, calls) in enumerate(steps):
        last = contents[-1]
        answered = any("functionResponse" in part for part in last["parts"])
        if kind == "ask":
            if last["role"] == "user" and not answered:
                last["parts"].append({"text": f"q{n}"})
            elif last["role"] == "model":
                contents.append({"role": "user", "parts": [{"text": f"q{n}"}]})
        elif last["role"] == "model":
            continue
        elif kind == "say":
            contents.append({"role": "model", "parts": [{"text": f"a{n}"}]})
        else:
            call = {"functionCall": {"name": "bash", "args": {"command": "make"}}}
            answer = {"functionResponse": {"name": "bash", "response": {"out": "Error 2"}}}
            contents.append({"role": "model", "parts": [call] * calls})
            contents.append({"role": "user", "parts": [answer] * calls})
    if contents[-1]["role"] == "model":
        contents.append({"role": "user", "parts": [{"text": "go on"}]})
    return {"contents": contents, "systemInstruction": {"parts": [{"text": "Be brief."}]}}
