"""Random request bodies of every dialect, junk included, for property tests.

Small vocabularies on purpose: tool names, arguments and answers repeat often, so
random conversations loop, and some Responses turns are reasoning alone (two requests
of one conversation with the same intent).
"""

from __future__ import annotations

from hypothesis import strategies as st

NAMES = st.sampled_from(["ls", "bash", "edit", ""])
TEXT = st.sampled_from(["", "hi", "a.py", "error: no such file"])
IDS = st.sampled_from(["c1", "c2", None, 7])

chat_item = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "developer"]), "content": TEXT}),
    st.fixed_dictionaries({"role": st.just("user"), "content": TEXT}),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.one_of(st.none(), TEXT),
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {
                        "id": IDS,
                        "function": st.fixed_dictionaries(
                            {"name": NAMES, "arguments": st.sampled_from(["{}", '{"a": 1}', "x"])}
                        ),
                    }
                ),
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": IDS, "content": TEXT}),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.lists(
                st.one_of(
                    st.fixed_dictionaries(
                        {
                            "type": st.just("tool_use"),
                            "id": IDS,
                            "name": NAMES,
                            "input": st.just({}),
                        }
                    ),
                    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
                    st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": TEXT}),
                ),
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("user"),
            "content": st.lists(
                st.one_of(
                    st.fixed_dictionaries(
                        {"type": st.just("tool_result"), "tool_use_id": IDS, "content": TEXT}
                    ),
                    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
                ),
                max_size=3,
            ),
        }
    ),
    st.fixed_dictionaries({"role": st.sampled_from(["function", "odd", 5]), "content": TEXT}),
    st.sampled_from([None, 3, "junk", []]),
)

gemini_item = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "model", "function", "tool", "odd"]),
            "parts": st.lists(
                st.one_of(
                    st.fixed_dictionaries({"text": TEXT}),
                    st.fixed_dictionaries({"text": TEXT, "thought": st.just(True)}),
                    st.fixed_dictionaries(
                        {
                            "functionCall": st.fixed_dictionaries(
                                {"name": NAMES, "args": st.just({})}
                            )
                        }
                    ),
                    st.fixed_dictionaries(
                        {
                            "functionResponse": st.fixed_dictionaries(
                                {"name": NAMES, "response": st.just({"r": 1})}
                            )
                        }
                    ),
                    st.fixed_dictionaries({"thoughtSignature": TEXT}),
                ),
                max_size=3,
            ),
        }
    ),
    st.sampled_from([None, "junk", {"parts": []}]),
)

responses_item = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "developer"]), "content": TEXT}
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("message"),
            "role": st.sampled_from(["user", "assistant"]),
            "content": TEXT,
        }
    ),
    st.fixed_dictionaries({"type": st.just("reasoning"), "encrypted_content": TEXT}),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function_call", "custom_tool_call"]),
            "call_id": IDS,
            "name": NAMES,
            "arguments": st.sampled_from(["{}", '{"a": 1}']),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function_call_output", "custom_tool_call_output"]),
            "call_id": IDS,
            "output": TEXT,
        }
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["web_search_call", "item_reference"])}),
    st.sampled_from([None, "junk"]),
)

bodies = st.one_of(
    st.builds(lambda items: {"model": "m", "messages": items}, st.lists(chat_item, max_size=14)),
    st.builds(
        lambda items: {"system": "s", "tools": [{"name": "ls"}], "messages": items},
        st.lists(chat_item, max_size=14),
    ),
    st.builds(
        lambda items: {"model": "m", "keep_alive": "5m", "messages": items},
        st.lists(chat_item, max_size=10),
    ),
    st.builds(
        lambda items: {"contents": items, "systemInstruction": {"parts": [{"text": "be nice"}]}},
        st.lists(gemini_item, max_size=14),
    ),
    st.builds(
        lambda items: {"model": "m", "instructions": "be brief", "input": items},
        st.lists(responses_item, max_size=14),
    ),
    st.builds(lambda items: {"model": "m", "input": items}, st.lists(responses_item, max_size=14)),
)


# --- scripted conversations: mostly well-formed, and they loop ----------------------------

script_step = st.one_of(
    st.tuples(
        st.just("call"),
        st.sampled_from(["bash", "ls"]),
        st.sampled_from(['{"command": "make"}', "{}"]),
        st.sampled_from(["ok", "error: no such file", "error: no such file "]),
    ),
    st.tuples(st.just("user"), TEXT),
    st.tuples(st.just("prose"), st.sampled_from(["thinking", "I give up"])),
    st.tuples(st.just("reasoning")),
    st.tuples(st.just("junk")),
)


def _render(dialect: str, script: list[tuple[str, ...]]) -> dict[str, object]:
    items: list[object] = []
    for number, step in enumerate(script):
        kind = step[0]
        if kind == "call":
            _, name, arguments, answer = step
            items += _call(dialect, number, name, arguments, answer)
        elif kind == "user":
            items.append(_text(dialect, "user", step[1]))
        elif kind == "prose":
            items.append(_text(dialect, "assistant", step[1]))
        elif kind == "reasoning" and dialect == "openai_responses":
            items.append({"type": "reasoning", "encrypted_content": str(number)})
        elif kind == "junk":
            items.append(None)
    if dialect == "gemini":
        return {"contents": items}
    if dialect == "openai_responses":
        return {"model": "m", "input": items}
    if dialect == "anthropic":
        return {"model": "c", "system": "s", "messages": items}
    return {"model": "m", "messages": items}


def _text(dialect: str, role: str, text: str) -> dict[str, object]:
    if dialect == "gemini":
        return {"role": "model" if role == "assistant" else role, "parts": [{"text": text}]}
    return {"role": role, "content": text}


def _call(dialect: str, n: int, name: str, arguments: str, answer: str) -> list[object]:
    if dialect == "gemini":
        call = {"functionCall": {"name": name, "args": {"a": arguments}}}
        result = {"functionResponse": {"name": name, "response": {"out": answer}}}
        return [{"role": "model", "parts": [call]}, {"role": "user", "parts": [result]}]
    if dialect == "openai_responses":
        return [
            {"type": "function_call", "call_id": f"c{n}", "name": name, "arguments": arguments},
            {"type": "function_call_output", "call_id": f"c{n}", "output": answer},
        ]
    if dialect == "anthropic":
        use = {"type": "tool_use", "id": f"t{n}", "name": name, "input": {"a": arguments}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": answer}
        return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    function = {"name": name, "arguments": arguments}
    return [
        {"role": "assistant", "tool_calls": [{"id": f"c{n}", "function": function}]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": answer},
    ]


def _looping(
    lap: list[tuple[str, ...]], laps: int, noise: list[tuple[int, tuple[str, ...]]]
) -> list[tuple[str, ...]]:
    script = lap * laps
    for position, step in noise:
        script.insert(position % (len(script) + 1), step)
    return script


scripted = st.builds(
    _render,
    st.sampled_from(["openai_chat", "anthropic", "gemini", "openai_responses"]),
    st.builds(
        _looping,
        st.lists(script_step, min_size=1, max_size=3),
        st.integers(1, 8),
        st.lists(st.tuples(st.integers(0, 30), script_step), max_size=3),
    ),
)
"""Conversations scripted from a few calls and answers: they often loop."""

conversations = st.one_of(bodies, scripted, scripted)
