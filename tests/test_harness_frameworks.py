"""The agent frameworks' built-in tools: smolagents, LangChain / LangGraph, the OpenAI
Agents SDK, Pydantic AI (issue 27 §1)."""

from __future__ import annotations

from loopfuse.harness import ToolKind, harness_named


def test_smolagents_web_tools_are_costly() -> None:
    h = harness_named("smolagents")
    assert h.kind("visit_webpage", {"url": "u"}) is ToolKind.COSTLY
    assert h.kind("python_interpreter", {"code": "1"}) is ToolKind.OTHER
    assert h.kind("my_own_tool", {}) is None


def test_langchain_shell_and_requests() -> None:
    h = harness_named("langchain")
    assert h.kind("terminal", {"commands": ["ls"]}) is ToolKind.SHELL
    assert h.kind("requests_post", {}) is ToolKind.OTHER
    assert h.failure_fields == ("status",)


def test_openai_agents_hosted_tools() -> None:
    h = harness_named("openai_agents")
    assert h.kind("file_search", {}) is ToolKind.READ
    assert h.kind("computer", {}) is ToolKind.OTHER


def test_pydantic_ai_builtins() -> None:
    h = harness_named("pydantic_ai")
    assert h.kind("web_fetch", {}) is ToolKind.COSTLY
    assert h.kind("code_execution", {}) is ToolKind.OTHER
