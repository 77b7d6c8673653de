"""Observation and costly tools: matching on prefixed names and whole name words."""

from __future__ import annotations

import pytest

from loopfuse.detector import (
    DEFAULT_COSTLY_TOOLS,
    DEFAULT_OBSERVATION_TOOLS,
    ToolCall,
    is_costly_batch,
    is_observation_batch,
)
from loopfuse.detector.tools import (
    ToolClassifier,
    is_costly_tool,
    is_observation_tool,
    name_words,
)
from loopfuse.errors import ConfigError


@pytest.mark.parametrize(
    "name",
    [
        "read_file",
        "READ_FILE",
        "ReadFile",
        "mcp__fs__read_file",
        "2:read_file",
        "fs.readFile",
        "functions/grep",
        "get_user_details",
        "search_direct_flight",
        "job_status",
        "get_terminal_output",
        "browser_snapshot",
        "find_file",
        "scroll_down",
        "list_all_airports",
        "cat",
        "Glob",
        "think",
    ],
)
def test_observation_tools(name: str) -> None:
    assert is_observation_tool(name)


@pytest.mark.parametrize(
    "name",
    [
        "write_file",
        "edit",
        "bash",
        "python",
        "update_status",  # ends like a status tool, but updates
        "set_job_status",
        "thread_create",  # "read" inside a word is not a match
        "bread",
        "open_pull_request",
        "book_reservation",
        "cd",
        "",
    ],
)
def test_not_observation_tools(name: str) -> None:
    assert not is_observation_tool(name)


@pytest.mark.parametrize(
    "name",
    ["web_fetch", "WebFetch", "mcp__playwright__browser_navigate", "browser_click", "fetch_url"],
)
def test_costly_tools(name: str) -> None:
    assert is_costly_tool(name)


@pytest.mark.parametrize("name", ["clickhouse_query", "read_file", "fetcher_stats", "urllib_doc"])
def test_costly_matching_is_on_whole_words(name: str) -> None:
    assert not is_costly_tool(name)


def test_custom_patterns() -> None:
    assert is_observation_tool("mcp__db__describe_table", ["describe_table"])
    assert not is_observation_tool("read_file", ["describe_table"])
    assert is_costly_tool("mcp__db__run_query", ["run_query"])
    assert not is_costly_tool("web_fetch", ["run_query"])


def test_batches() -> None:
    read, write = ToolCall("read_file", {}), ToolCall("write_file", {})
    fetch = ToolCall("web_fetch", {"url": "u"})
    assert is_observation_batch([read, ToolCall("grep", {})])
    assert not is_observation_batch([read, write])
    assert not is_observation_batch([])
    assert is_costly_batch([read, fetch])
    assert not is_costly_batch([read, write])
    assert is_observation_batch([fetch])  # read-only, but costly


def test_name_words() -> None:
    assert name_words("mcp__github__getPullRequest") == (
        ("mcp", "github", "get", "pull", "request"),
        ("get", "pull", "request"),
    )
    assert name_words("") == ((), ())


@pytest.mark.parametrize(
    ("observation", "costly"),
    [("read_file", ()), ((), "fetch"), ([1], ()), ((), [None]), (["--"], ())],
)
def test_bad_patterns_raise_config_error(observation: object, costly: object) -> None:
    with pytest.raises(ConfigError):
        ToolClassifier(observation, costly)  # type: ignore[arg-type]


def test_defaults_are_tuples_of_lowercase_words() -> None:
    for pattern in DEFAULT_OBSERVATION_TOOLS + DEFAULT_COSTLY_TOOLS:
        assert pattern == pattern.lower()
        assert pattern.strip("_") == pattern
