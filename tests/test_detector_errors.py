"""Errors that don't say "error": the flags results carry (MCP ``isError``, the canonical
``is_error``) and the frameworks' answers to a call they could not run, read by a live
detector and by ``scan``; each with its off switch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopfuse import ConfigError
from loopfuse.cli.main import main
from loopfuse.detector import (
    DetectorSettings,
    LoopDetected,
    LoopDetector,
    ToolCall,
    looks_like_error,
    normalize_answer,
    results_digest,
    scan,
)
from loopfuse.detector.digests import digest_facts
from loopfuse.detector.errors import flagged_error, framework_error

# What each framework writes, word for word (the installed packages' own templates are
# checked against these in test_the_installed_frameworks_write_these_answers). ``{n}`` is
# the invented tool name, ``{a}`` the arguments the model sent.
UNKNOWN_TOOL = {
    "langgraph": "Error: {n} is not a valid tool, try one of [bash, read_file].",
    "openai_agents": "Tool '{n}' not found.",
    # Pydantic AI: the retried tool return, as sent where the provider has an error flag
    # (Anthropic), wrapped in {"error": ...} where it has none (OpenAI), and as 1.x sent it
    "pydantic_ai": "Unknown tool name: '{n}'. Available tools: 'bash', 'read_file'",
    "pydantic_ai_wrapped": '{{"error":"Unknown tool name: \'{n}\'. Available tools: '
    "'bash', 'read_file'\"}}",
    "pydantic_ai_1": "Unknown tool name: '{n}'. Available tools: 'bash', 'read_file'\n\n"
    "Fix the errors and try again.",
    "smolagents": "Unknown tool {n}, should be one of: bash, read_file, final_answer.",
    "smolagents_written": "Call id: call_7\nError:\nUnknown tool {n}, should be one of: bash.\n"
    "Now let's retry: take care not to repeat previous errors! If you have retried several "
    "times, try a completely different approach.\n",
    # CrewAI: src/crewai/translations/en.json "wrong_tool_name" (read from its repository)
    "crewai": "You tried to use the tool {n}, but it doesn't exist. You must use one of the "
    "following tools, use one at time: bash, read_file.",
    # OpenHands: FunctionCallNotExistsError in its function_calling.py
    "openhands": "Tool {n} is not registered. (arguments: {a}). Please check the tool name "
    "and retry with an existing tool.",
    "mcp": "Unknown tool: {n}",
    "plain": "Tool '{n}' not found",
    "plain_double_quotes": 'Tool "{n}" was not found.',
}
INVALID_ARGUMENTS = {
    "langgraph_invocation": "Error invoking tool 'bash' with kwargs {a} with error:\n"
    " command: Field required\n Please fix the error and try again.",
    "langgraph_execution": "Error executing tool 'bash' with kwargs {a} with error:\n"
    " quota spent\n Please fix the error and try again.",
    "langchain_malformed": "Tool call bash with id {i} could not be executed - arguments were "
    "malformed or truncated.",
    "openai_agents": "An error occurred while running the tool. Please try again.",
    "openai_agents_json": "Invalid JSON input for tool bash: {a}",
    "pydantic_ai_validation": '1 validation error:\n```json\n[\n  {{\n    "type": "missing",\n'
    '    "loc": ["command"],\n    "msg": "Field required",\n    "input": {a}\n  }}\n]\n```'
    "\n\nFix the errors and try again.",
    "smolagents_schema": "Argument cmd is not in the tool's input schema",
    "smolagents_execution": "Error executing tool 'bash' with arguments {a}: TypeError: bad",
    "crewai_input": "Error: the Action Input is not a valid key, value dictionary.",
    "crewai_usage": "I encountered an error while trying to use the tool. This was the error: "
    "quota.\n Tool bash accepts these inputs: command",
    "crewai_coworker": "\nError executing tool. coworker mentioned not found, it must be one "
    "of the following options:\n- researcher\n",
    "openhands_missing": 'Missing required argument "command" in tool call execute_bash',
    "openhands_parse": "Failed to parse tool call arguments: {a}",
    "openhands_parameter": "Parameter 'old_text' is not allowed for function "
    "'str_replace_editor'. Allowed parameters: {{'old_str', 'new_str'}}\n"
    "[Error occurred in processing last action]",
}

# Answers that echo the call's arguments (or id) back, which the normal form leaves out.
ECHOED = {
    INVALID_ARGUMENTS[name]
    for name in (
        "langgraph_invocation",
        "langgraph_execution",
        "langchain_malformed",
        "smolagents_execution",
        "openhands_parse",
    )
}


def _fill(template: str, k: int) -> str:
    args = repr({"value": k, "path": f"/tmp/{k}"})
    return template.format(n=f"hex_{k}", a=args, i=f"call_{k}xyz")


@pytest.mark.parametrize("template", list(UNKNOWN_TOOL.values()), ids=list(UNKNOWN_TOOL))
def test_an_unknown_tool_answer_is_the_same_error_whatever_name_the_model_invents(
    template: str,
) -> None:
    answers = [_fill(template, k) for k in (1, 22)]
    assert all(looks_like_error(answer) for answer in answers)
    assert normalize_answer(answers[0]) == normalize_answer(answers[1])
    # the placeholder for the invented name is what makes them one error
    assert normalize_answer(answers[0], frameworks=False) != normalize_answer(
        answers[1], frameworks=False
    )


@pytest.mark.parametrize("template", list(INVALID_ARGUMENTS.values()), ids=list(INVALID_ARGUMENTS))
def test_an_invalid_arguments_answer_is_an_error(template: str) -> None:
    answers = [_fill(template, k) for k in (1, 22)]
    assert all(framework_error(answer) for answer in answers)
    assert all(looks_like_error(answer) for answer in answers)
    if template in ECHOED:
        # the arguments (or the call id) echoed back: the same error whatever they were
        assert normalize_answer(answers[0]) == normalize_answer(answers[1])


@pytest.mark.parametrize(
    "text",
    [
        "Tool not found in the index, try another query",
        "src/agents/run.py:276:    return f\"Tool '{tool_name}' not found.\"",  # a grep hit
        "Build log:\nTool 'javac' not found\nfalling back to ecj\nBUILD SUCCESSFUL",
        "Unknown tool versions are ignored.",
        "Argument parsing finished: 3 options",
        "Parameters saved.",
        "I encountered a bug report in the tracker that matches.",
        "Please check the docs and try again later if you like: all tests passed.",
        "",
    ],
)
def test_text_that_only_quotes_such_a_sentence_is_not_a_framework_answer(text: str) -> None:
    assert not framework_error(text)
    assert normalize_answer(text) == normalize_answer(text, frameworks=False)


def test_the_installed_frameworks_write_these_answers() -> None:
    """The templates above are the installed packages' own (each one present is read)."""
    checked = 0
    try:
        from langgraph.prebuilt import tool_node
    except ImportError:
        pass
    else:
        assert (
            tool_node.INVALID_TOOL_NAME_ERROR_TEMPLATE.format(
                requested_tool="{n}", available_tools="bash, read_file"
            )
            == UNKNOWN_TOOL["langgraph"]
        )
        invocation = tool_node.TOOL_INVOCATION_ERROR_TEMPLATE.format(
            tool_name="bash", tool_kwargs="{a}", error="command: Field required"
        )
        assert invocation == INVALID_ARGUMENTS["langgraph_invocation"]
        checked += 1
    try:
        from agents.run_internal.turn_resolution import _default_tool_not_found_message
        from agents.tool import default_tool_error_function
    except ImportError:
        pass
    else:
        assert _default_tool_not_found_message("{n}") == UNKNOWN_TOOL["openai_agents"]
        failed = default_tool_error_function(None, RuntimeError("boom"))  # type: ignore[arg-type]
        assert failed == INVALID_ARGUMENTS["openai_agents"]
        checked += 1
    try:
        from pydantic_ai.messages import ToolReturnPart
    except ImportError:
        pass
    else:
        unknown = UNKNOWN_TOOL["pydantic_ai"]
        part = ToolReturnPart(tool_name="x", content=unknown, tool_call_id="c", outcome="retried")
        assert part.model_response_str(wrap_if_error=False) == unknown
        wrapped = UNKNOWN_TOOL["pydantic_ai_wrapped"].format(n="{n}")
        assert part.model_response_str() == wrapped
        checked += 1
    try:
        import smolagents.agents
    except ImportError:
        pass
    else:
        import inspect

        source = inspect.getsource(smolagents.agents)
        assert 'f"Unknown tool {tool_name}, should be one of: ' in source
        checked += 1
    if not checked:  # the core suites run without the integration extras (.ci/run)
        pytest.skip("none of the frameworks is installed")


def _live(answer_of: Any, laps: int = 8, **settings: Any) -> int | None:
    """The lap a live detector refuses when every lap calls a new invented tool with new
    arguments and gets ``answer_of(lap)``; ``None`` if never."""
    det = LoopDetector(**settings)
    for lap in range(1, laps + 1):
        calls = [ToolCall(f"hex_{lap}", {"value": lap, "path": f"/srv/{lap}"})]
        try:
            record = det.check(calls)
        except LoopDetected as loop:
            kind = loop.kind
            break
        det.record_results(record, answers=[answer_of(lap)])
    else:
        return None
    assert kind == "error_streak"
    return lap


@pytest.mark.parametrize("framework", list(UNKNOWN_TOOL))
def test_a_live_detector_stops_a_model_calling_tools_that_do_not_exist(framework: str) -> None:
    template = UNKNOWN_TOOL[framework]
    assert _live(lambda lap: _fill(template, lap)) == 5  # four failures ran, the 5th refused


def test_the_reported_case_tool_not_found_is_stopped_and_the_switch_turns_it_off() -> None:
    def answer(lap: int) -> str:
        return f"Tool 'hex_{lap}' not found."

    assert _live(answer) == 5
    assert _live(answer, framework_errors=False) is None


def _chat(tool_messages: list[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI Chat body: one invented tool call per lap, answered by each message."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "convert 255 to hex"}]
    for lap, answer in enumerate(tool_messages, 1):
        call = {
            "id": f"call_{lap}",
            "type": "function",
            "function": {"name": f"hex_{lap}", "arguments": json.dumps({"value": lap})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{lap}", **answer})
    return {"model": "gpt-4o", "messages": messages}


def test_scan_stops_the_fifth_lap_of_an_invented_tool() -> None:
    def body(laps: int) -> dict[str, Any]:
        return _chat([{"content": f"Tool 'hex_{k}' not found."} for k in range(1, laps + 1)])

    assert scan(body(3)).ok
    verdict = scan(body(4))
    assert (verdict.ok, verdict.kind, verdict.count) == (False, "error_streak", 4)
    quiet = LoopDetector(framework_errors=False)
    assert quiet.scan(body(8)).ok


def test_an_mcp_result_flagged_is_error_is_an_error_in_any_dialect() -> None:
    def mcp(lap: int) -> str:  # the same failure for whatever call
        return json.dumps(
            {"content": [{"type": "text", "text": "quota for today spent"}], "isError": True}
        )

    assert flagged_error(mcp(1))
    assert not looks_like_error(mcp(1))  # nothing in its text says so
    # as text in an OpenAI Chat tool message, and as JSON content
    as_text = _chat([{"content": mcp(k)} for k in range(1, 5)])
    as_json = _chat([{"content": [json.loads(mcp(k))]} for k in range(1, 5)])
    for body in (as_text, as_json):
        verdict = scan(body)
        assert (verdict.ok, verdict.kind) == (False, "error_streak"), body["messages"][-1]
    # a live detector given the results as JSON values
    assert digest_facts(results_digest([ToolCall("f")], [json.loads(mcp(1))]))[0]
    # an Anthropic tool_result whose content is the MCP result's text
    anthropic: dict[str, Any] = {"model": "claude", "system": "s", "messages": []}
    for lap in range(1, 5):
        anthropic["messages"] += [
            {"role": "user", "content": "go"} if lap == 1 else None,
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{lap}", "name": "q", "input": {"n": lap}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{lap}", "content": mcp(1)}],
            },
        ]
    anthropic["messages"] = [m for m in anthropic["messages"] if m is not None]
    verdict = scan(anthropic)
    assert (verdict.ok, verdict.kind) == (False, "error_streak")
    # not flagged: false, missing, or not the whole answer
    assert not flagged_error('{"content": [], "isError": false}')
    assert not flagged_error('log: {"isError": true}')
    assert not flagged_error('{"isError": true')  # not JSON


def test_a_canonical_is_error_flag_counts_and_its_switch_turns_it_off() -> None:
    answers = [{"content": "quota for today spent", "is_error": True} for _ in range(4)]
    body = _chat(answers)
    verdict = scan(body)
    assert (verdict.ok, verdict.kind) == (False, "error_streak")
    assert LoopDetector(error_flags=False).scan(body).ok
    mcp = json.dumps({"content": [], "isError": True})
    off = DetectorSettings(error_flags=False).error_reading
    assert digest_facts(results_digest([ToolCall("f")], [mcp]) or "")[0]
    assert not digest_facts(results_digest([ToolCall("f")], [mcp], reading=off) or "")[0]


@pytest.mark.parametrize("name", ["error_flags", "framework_errors"])
def test_the_switches_are_validated(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        LoopDetector(**{name: "yes"})
    assert getattr(DetectorSettings(), name) is True


@pytest.mark.parametrize(("flag", "found"), [([], True), (["--no-framework-errors"], False)])
def test_loopfuse_scan_reports_a_transcript_calling_tools_that_do_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str], found: bool
) -> None:
    run = _chat([{"content": f"Tool 'hex_{k}' not found."} for k in range(1, 9)])
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    code = main(["scan", str(path), "--format", "json", "--no-progress", *flag])
    report = json.loads(capsys.readouterr().out)
    kinds = [finding["kind"] for result in report["files"] for finding in result["findings"]]
    assert (code, "error_streak" in kinds) == ((1, True) if found else (0, False))


@pytest.mark.parametrize(
    "text",
    [
        "Error: " + "a" * 200_000,
        "Error invoking tool 'x' with kwargs " + "{" * 100_000,
        "Tool " + "'" * 50_000 + " not found",
        "{" + '"isError": true,' * 10_000,
        '{"isError": true, "x": "\ud800"}',
        "\n" * 100_000 + "Tool 'x' not found",
        "Call id: " + "x" * 100_000 + "\nError:\nUnknown tool x, should be one of: a",
        '{"error": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["long", "braces", "quotes", "flags", "surrogate", "newlines", "call-id", "deep"],
)
def test_hostile_answers_never_raise(text: str) -> None:
    """Attacker-controlled answers: a plain verdict, never an exception."""
    assert isinstance(framework_error(text), bool)
    assert isinstance(flagged_error(text), bool)
    assert isinstance(normalize_answer(text), str)
    assert isinstance(looks_like_error(text), bool)
