"""The generic harness: the names the detector knows out of the box, for tools no harness
declared: read-only and costly tool names, shell
tools, the command lines that only read, the commands that wait, the editor tools of the
text editor protocol, and the plain answers to a call of a tool that does not exist.

They are the defaults of :class:`~loopfuse.detector.DetectorSettings`'s
``observation_tools``, ``costly_tools``, ``shell_tools`` and ``read_only_commands``, kept
here, apart from the code that reads them (:mod:`loopfuse.detector.tools`,
:mod:`loopfuse.detector.shell`), so that the settings' declaration costs nothing to read
(``loopfuse hook`` reads it in every process that is given a detector setting).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_COSTLY_TOOLS",
    "DEFAULT_FILE_TOOLS",
    "DEFAULT_NOT_RUN_PATTERN",
    "DEFAULT_NOT_RUN_STARTS",
    "DEFAULT_OBSERVATION_TOOLS",
    "DEFAULT_READ_ONLY_COMMANDS",
    "DEFAULT_SHELL_TOOLS",
    "DEFAULT_WAITING_COMMANDS",
    "DEFAULT_WAIT_BOUND_PHRASES",
    "QUOTED_TOOL_NAME",
    "TEXT_EDITOR_EDITS",
    "TEXT_EDITOR_READS",
    "TOOL_NAME",
]

DEFAULT_OBSERVATION_TOOLS: Final[tuple[str, ...]] = (
    # verbs that read: the first word(s) of a tool's own name
    "read", "get", "list", "ls", "cat", "head", "tail", "nl", "wc", "grep", "rg", "glob",
    "find", "search", "view", "show", "describe", "inspect", "lookup", "look", "stat",
    "status", "poll", "peek", "scroll", "goto", "count", "tree", "pwd", "which", "whoami",
    "open_file", "explain", "think", "wait", "sleep",
    # reading the web: read-only, but also costly (see DEFAULT_COSTLY_TOOLS)
    "fetch", "web", "browse", "browser", "navigate", "click", "scrape", "crawl",
    # nouns that end the name of a status or output tool
    "job_status", "task_status", "terminal_output", "output", "logs", "snapshot",
    "screenshot", "info", "details",
)  # fmt: skip
"""Patterns for read-only tools, which get ``max_observation_steps``.

Chosen from the tool vocabularies of coding agents (Claude Code, OpenHands, SWE-agent,
mini-swe-agent, gemini-cli, Cline, Roo Code), MCP servers and tau-bench, and checked on
the corpus (docs/detector.md). ``open`` is deliberately absent (``open_pull_request``).
"""

DEFAULT_COSTLY_TOOLS: Final[tuple[str, ...]] = (
    "fetch", "web", "http", "https", "url", "curl", "wget", "download", "browse", "browser",
    "navigate", "click", "scrape", "crawl", "google", "bing", "tavily", "serp", "playwright",
    "puppeteer",
)  # fmt: skip
"""Patterns for read-only tools whose answers always move (the web, a browser).

They keep ``max_strikes`` and the ``max_observation_steps`` ceiling: a page that changes
on every fetch must not carry a fetch loop forever.
"""

DEFAULT_SHELL_TOOLS: Final[tuple[str, ...]] = (
    "bash",                 # Claude Code, SWE-agent 1.x, mini-swe-agent 2.x, OpenCode, computer use
    "sh",
    "shell",                # Codex CLI (argv list), Goose (developer__shell), OpenAI Agents SDK
    "shell_command",        # Codex CLI
    "exec_command",         # Codex CLI (unified exec, "cmd")
    "local_shell",          # Codex CLI / OpenAI local shell
    "exec",                 # Codex's older "container.exec"
    "execute_bash",         # OpenHands (before 1.0), Amazon Q CLI, Kiro (executeBash)
    "terminal",             # OpenHands SDK, Zed, LangChain's ShellTool ("commands")
    "execute_command",      # Cline, Roo Code, desktop-commander MCP
    "run_command",          # Windsurf ("CommandLine"), mcp-server-commands
    "run_shell_command",    # gemini-cli, Qwen Code
    "run_terminal_cmd",     # Cursor
    "run_terminal_command",  # Continue
    "run_in_terminal",      # VS Code Copilot agent
    "shell_exec",           # Manus-style agents
    "cmd",
)  # fmt: skip
"""Name patterns of shell tools, matched on the *whole* own name of a tool (after any
``mcp__server__`` or ``functions.`` namespace, in any case or ``camelCase``): ``Bash`` and
``mcp__x__bash`` are shells, ``BashOutput`` (Claude Code's reader of a background shell)
and ``shell_view`` are not."""

_CONTAINER_SUBS: Final = (
    "ps", "logs", "inspect", "images", "stats", "version", "info", "top", "port", "history",
    "container ls", "container list", "container ps", "container inspect", "container logs",
    "container top", "container port", "container stats", "image ls", "image list",
    "image inspect", "image history", "network ls", "network inspect", "volume ls",
    "volume inspect", "wait", "container wait",
)  # fmt: skip
_COMPOSE_SUBS: Final = ("ps", "logs", "config", "images", "ls", "top", "version", "wait")

DEFAULT_READ_ONLY_COMMANDS: Final[tuple[str, ...]] = (
    # reading files and text
    "cat", "head", "tail", "less", "more", "ls", "tree", "find", "grep", "egrep", "fgrep",
    "rg", "ag", "wc", "stat", "file", "du", "df", "nl", "cut", "tr", "sort", "uniq",
    "column", "diff", "cmp", "comm", "jq", "sed", "awk", "gawk", "mawk", "tac", "rev", "od",
    "hexdump", "strings", "paste", "join", "fold", "expand", "seq", "md5sum", "sha1sum",
    "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "realpath",
    "dirname", "basename", "readlink", "tee",
    # the shell itself and the machine
    "pwd", "cd", "pushd", "popd", "dirs", "echo", "printf", "true", "false", ":", "test",
    "[", "[[", "sleep", "wait", "jobs", "which", "type", "whereis", "printenv", "set", "ps",
    "pgrep", "top", "free", "uptime", "date", "whoami", "id", "uname", "hostname", "nproc",
    "lscpu", "lsof", "ss", "netstat", "nvidia-smi", "squeue", "sinfo", "sacct",
    # version control and CI
    "git status", "git log", "git diff", "git show", "git branch", "git tag", "git remote",
    "git rev-parse", "git ls-files", "git ls-tree", "git blame", "git shortlog",
    "git describe", "git grep", "git cat-file", "git rev-list", "git merge-base",
    "git name-rev", "git for-each-ref", "git show-ref", "git reflog", "git config",
    "git stash list", "git stash show", "git worktree list", "git submodule status",
    "git check-ignore", "git count-objects", "git version",
    "gh run view", "gh run list", "gh run watch", "gh pr checks", "gh pr view", "gh pr list",
    "gh pr diff", "gh pr status", "gh issue view", "gh issue list", "gh issue status",
    "gh repo view", "gh release view", "gh release list", "gh workflow view",
    "gh workflow list", "gh api", "gh status", "gh auth status",
    # clusters, containers, packages
    "kubectl get", "kubectl describe", "kubectl logs", "kubectl top", "kubectl explain",
    "kubectl events", "kubectl version", "kubectl api-resources", "kubectl api-versions",
    "kubectl config view", "kubectl config current-context", "kubectl config get-contexts",
    "kubectl rollout status", "kubectl rollout history", "kubectl auth can-i", "kubectl wait",
    *(f"{tool} {sub}" for tool in ("docker", "podman") for sub in _CONTAINER_SUBS),
    *(f"{tool} {sub}" for tool in ("docker compose", "docker-compose") for sub in _COMPOSE_SUBS),
    *(f"{pip} {sub}" for pip in ("pip", "pip3") for sub in ("list", "show", "freeze", "check")),
)  # fmt: skip
"""Programs and sub-commands that only read; see docs/shell.md for the argument rules."""

DEFAULT_WAITING_COMMANDS: Final[tuple[str, ...]] = (
    "kubectl wait",          # until a condition holds, or its --timeout (30 s) runs out
    "kubectl rollout status",  # until the rollout is done, or its --timeout
    "gh run watch",          # until the workflow run ends
    "gh pr checks --watch",  # until the checks end (with --watch only)
    "docker wait", "docker container wait", "podman wait", "podman container wait",
    "docker compose wait", "docker-compose wait",  # until the containers stop
)  # fmt: skip
"""Read-only commands whose own job is to wait until something happens (a condition, a
run, a container): a shell call of one is a **wait** (:mod:`loopfuse.detector._shell_waits`),
as is a line led by ``sleep`` and a ``while`` / ``until`` loop that sleeps. A word after
``--`` is a flag the command waits only with."""

DEFAULT_WAIT_BOUND_PHRASES: Final[tuple[str, ...]] = (
    "timed out waiting for the condition",  # kubectl wait / rollout status, its --timeout
)
"""Phrases a waiting command writes when its own bound ran out before the condition held
(besides ``timeout``'s exit status 124): the thing waited on is not over."""

TEXT_EDITOR_READS: Final = frozenset({"view"})
"""The ``command`` values of a text editor tool (``str_replace_editor``: OpenHands,
SWE-agent; Anthropic's ``str_replace_based_edit_tool``) that only read."""
TEXT_EDITOR_EDITS: Final = frozenset({"create", "str_replace", "insert", "undo_edit", "write"})
"""... and those that change the file its ``path`` names."""

DEFAULT_FILE_TOOLS: Final[tuple[tuple[str, str], ...]] = (
    ("str_replace_based_edit_tool", "command"),  # Anthropic's text editor tool
    ("text_editor", "command"),
)
"""Editor tools no harness declares (the API's own), by own name, with what their calls
do to files (a :class:`~loopfuse.harness.base.FileAccess` value); the harnesses declare
theirs (:attr:`~loopfuse.harness.base.Tool.files`)."""

TOOL_NAME: Final = r"[^\s'\"`,]{1,128}"
"""A pattern of a tool name in a framework's answer: one word."""
QUOTED_TOOL_NAME: Final = rf"'{TOOL_NAME}'|\"{TOOL_NAME}\"|`{TOOL_NAME}`"
"""... quoted."""

DEFAULT_NOT_RUN_PATTERN: Final = (
    # MCP servers (FastMCP), the OpenAI Agents SDK, the plain form
    rf"Tool (?P<u_plain>{QUOTED_TOOL_NAME}|{TOOL_NAME}) (?:was )?not found\b"
    rf"|Unknown tool: (?P<u_mcp>{QUOTED_TOOL_NAME}|{TOOL_NAME})$"
)
"""The answers to a call of a tool that does not exist that no one framework owns
(``Tool 'x' not found``, ``Unknown tool: x``), as a
:class:`~loopfuse.harness.base.NotRunAnswers` pattern."""
DEFAULT_NOT_RUN_STARTS: Final = ("Tool ", "Unknown tool")
"""... the literals they begin with."""
