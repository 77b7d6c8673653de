"""A coding-agent CLI as ``loopfuse hook``, ``init`` and ``doctor`` see it: the protocol
each CLI's harness module implements, and the registry that finds it by its ``--agent``
name.

Each CLI's module of :mod:`loopfuse.harness` (``claude_code``, ``codex``, ``gemini_cli``,
``qwen_code`` …) holds, beside its tools (``HARNESS``), its hook protocol: ``CLI``, an
:class:`AgentCli` saying which hook events it sends, how a payload reads
(:meth:`AgentCli.parse`), how the hook answers (:meth:`AgentCli.render`), which file
``loopfuse init`` writes (:meth:`AgentCli.settings_path`) and how
(:attr:`AgentCli.installer`). The command line names no CLI: it asks :func:`agent_cli`.
Adding a CLI is adding its module and one line to :data:`AGENT_CLIS`.

>>> cli = agent_cli("gemini")
>>> cli.title, cli.before_events, cli.can_end_session
('Gemini CLI', ('BeforeTool',), True)
>>> event = cli.parse(cli.probe_event("s"))
>>> event.agent, event.phase, event.tool_name
('gemini', 'before', 'loopfuse-doctor')
>>> agent_cli("nobody")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
loopfuse.errors.ConfigError: unknown agent 'nobody'; one of claude-code, codex, gemini, qwen...
"""

from __future__ import annotations

import abc
import importlib
import json
from collections.abc import Callable, Iterable, Mapping
from functools import cache, cached_property
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, Protocol

from loopfuse.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

    from loopfuse.harness.base import Harness
    from loopfuse.harness.installers import Ours
    from loopfuse.harness.transcripts import SessionFormat

__all__ = [
    "AGENT_CLIS",
    "DEFAULT_AGENT",
    "PROBE_TOOL",
    "TOLD_BY_PAYLOAD",
    "Action",
    "AgentCli",
    "HookEvent",
    "HookInstaller",
    "HookPayloadError",
    "NotAUserPrompt",
    "Phase",
    "agent_cli",
    "harness_module",
    "reader_names",
    "recognised",
]

Action = Literal["allow", "note", "deny", "end"]
"""What the hook answers: let the call run, let it run with a note for the model, refuse
it (before it runs), or refuse it and end the session (where the CLI can)."""
Phase = Literal["before", "after", "turn", "batch"]
"""Where an event is: before a tool call, after it (with its answer), at a prompt the
user sent (a new run), at the end of a batch of parallel calls."""

AGENT_CLIS: Final[dict[str, str]] = {
    "claude-code": "claude_code",
    "codex": "codex",
    "gemini": "gemini_cli",
    "qwen": "qwen_code",
    "copilot": "copilot_cli",
    "kimi": "kimi_code",
    "pi": "pi",
    "opencode": "opencode",
    "crush": "crush",
}
"""Each guarded CLI's ``--agent`` name and its module of :mod:`loopfuse.harness` (which
exports ``CLI``), in the order the command line lists them."""

TOLD_BY_PAYLOAD: Final[tuple[str, ...]] = ("gemini", "codex", "qwen")
"""The CLIs a payload read without ``--agent`` may be from, asked in this order
(:meth:`AgentCli.recognises`); a payload none recognises is :data:`DEFAULT_AGENT`'s. A
command ``loopfuse init`` writes always names its CLI: this serves hand-written ones."""
DEFAULT_AGENT: Final = "claude-code"
"""The CLI of a payload no CLI of :data:`TOLD_BY_PAYLOAD` recognises (the first CLI
loopfuse guarded, whose hook command did not name it)."""
PROBE_TOOL: Final = "loopfuse-doctor"
"""The tool of ``loopfuse doctor``'s test event: a name no CLI has, so no session's loop
is touched."""


class HookPayloadError(ValueError):
    """What a CLI sent is not a tool event this hook can read (the call is allowed)."""


class NotAUserPrompt(HookPayloadError):
    """The CLI's prompt event, fired when no user spoke (Qwen Code fires
    ``UserPromptSubmit`` with an empty ``prompt`` each time it sends the model the
    answers of its calls). Not a new run, and nothing wrong: the hook answers nothing
    and logs nothing."""


class HookEvent(NamedTuple):
    """One hook invocation, read: which CLI, before or after which tool call.

    ``answer`` and ``error`` are set after a call: the answer's text (or JSON value) with
    its volatile parts removed, and whether the call failed (``None``: not known). The
    end of a batch (phase ``"batch"``) has the CLI's ids of its calls in ``tool_input``.
    """

    agent: str
    phase: Phase
    event_name: str
    session: str
    tool_name: str
    tool_input: object
    call_id: str | None = None
    answer: object = None
    error: bool | None = None
    exit_code: int | None = None


class HookInstaller(Protocol):
    """How ``loopfuse hook`` goes into a CLI's file: pure text transforms (no I/O: the
    caller, ``loopfuse init``, reads and writes the file). ``text`` is the file's text,
    ``""`` when there is no file; ``ours`` says which command lines are loopfuse's.
    The kinds are in :mod:`loopfuse.harness.installers`."""

    def check(self, text: str) -> None:
        """Raise :class:`~loopfuse.harness.installers.InstallError` when ``text`` cannot
        be read as this file (the message says why, without the file's name)."""

    def install(self, text: str, command: str, ours: Ours) -> str:
        """``text`` with loopfuse's hook running ``command`` (in place of any of ours)."""

    def uninstall(self, text: str, ours: Ours) -> str:
        """``text`` without loopfuse's hook (``text`` itself when it has none); a blank
        result, or one :meth:`same_but_spacing` as ``""``, means "remove the file"."""

    def commands(self, text: str, ours: Ours) -> dict[str, list[str]]:
        """loopfuse's commands in ``text``, by the event each is installed for."""

    def same(self, text: str, other: str) -> bool:
        """Whether the CLI reads the two texts alike."""

    def same_but_spacing(self, text: str, other: str) -> bool:
        """Whether the two texts differ at most in spacing (and read alike)."""


class AgentCli(abc.ABC):
    """One coding-agent CLI as loopfuse's hook, init, doctor and scan see it.

    Subclasses set the class attributes and implement the abstract methods; the
    module exports one instance as ``CLI``.
    """

    name: str
    """Its ``--agent`` name."""
    title: str
    """Its name for people ("Qwen Code")."""
    harness: Harness
    """Its tools (the module's ``HARNESS``)."""
    before_events: tuple[str, ...]
    """Its hook events that come before a tool call."""
    after_events: tuple[str, ...]
    """Its hook events that come after a tool call (with its answer)."""
    turn_events: tuple[str, ...] = ()
    """Its hook events for a prompt the user sent: a new run starts."""
    batch_events: tuple[str, ...] = ()
    """Its hook events for the end of a batch of parallel calls, listing them."""
    can_end_session: bool = True
    """Whether a hook can end its session."""
    notes_reach_model: bool = True
    """Whether an after-call answer of the hook reaches the model (where it does not,
    ``warn`` mode refuses the first loop it finds: that refusal's reason is the note)."""
    waits_for_after_hooks: bool = True
    """Whether the CLI waits for its after-call hooks before it goes on (where it does
    not, the next call's before-hook may start while one runs: an after-hook then never
    keeps the open batch open)."""
    answers_reach_hook: bool = True
    """Whether the CLI runs the hook after each call, with the call's answer. Where it
    does not (Crush: only before a call), a session that never sent an answer is judged
    without answers (:meth:`loopfuse.detector.LoopDetector.check`'s ``answered=False``:
    a missing answer is not a repeated one), and :meth:`render` gives a loop's note
    before the call, for the CLI to show the model with the call's answer."""
    scopes: tuple[str, ...] = ("user", "project")
    """Where ``loopfuse init`` may install it (``"project"``: with ``--project``)."""
    installer: HookInstaller
    """How the hook goes into :meth:`settings_path`'s file."""
    after_install: str = ""
    """What ``loopfuse init`` tells the user to do once it has installed the hook, if the
    CLI needs more before it runs it (Codex: trust it)."""
    sessions_module: str | None = None
    """The module of :mod:`loopfuse.harness` that holds its transcript reader
    (``SESSIONS``), apart from the CLI's own: only ``scan`` reads transcripts, and the
    hook, which imports every CLI's module at every tool call, imports no reader (and the
    reader imports the CLI's module for its helpers). ``None``: ``scan --agent`` cannot
    read its transcripts."""
    sessions_unread: str = ""
    """Why ``scan --agent`` cannot read its transcripts (where :attr:`sessions` is
    ``None``), said with that error."""

    @cached_property
    def sessions(self) -> SessionFormat | None:
        """Where the CLI keeps its transcripts and how ``loopfuse scan`` reads them (a
        :class:`~loopfuse.harness.transcripts.SessionFormat`: ``SESSIONS`` of
        :attr:`sessions_module`, imported on first use); ``None``: none."""
        if self.sessions_module is None:
            return None
        reader: SessionFormat = harness_module(self.sessions_module).SESSIONS
        return reader

    @property
    def events(self) -> tuple[str, ...]:
        """Every hook event of the CLI loopfuse installs for: before, after, turn, batch."""
        return (*self.before_events, *self.after_events, *self.turn_events, *self.batch_events)

    def phase_of(self, event_name: str) -> Phase:
        """The phase of the CLI's event ``event_name``; :class:`HookPayloadError` for an
        event that is none of them."""
        if event_name in self.before_events:
            return "before"
        if event_name in self.after_events:
            return "after"
        if event_name in self.turn_events:
            return "turn"
        if event_name in self.batch_events:
            return "batch"
        raise HookPayloadError(f"{self.name} event {event_name!r} is not a tool event")

    def recognises(self, payload: dict[str, object]) -> bool:
        """Whether a payload read without ``--agent`` is this CLI's (asked only of the
        CLIs of :data:`TOLD_BY_PAYLOAD`)."""
        del payload
        return False

    @abc.abstractmethod
    def parse(self, payload: dict[str, object]) -> HookEvent:
        """Read one hook input; :class:`HookPayloadError` for anything that is not a
        tool, prompt or batch event of this CLI."""

    @abc.abstractmethod
    def render(self, event: HookEvent, action: Action, reason: str) -> tuple[str, int]:
        """The hook's stdout and exit status for ``action`` on ``event``: ``"allow"``
        prints nothing; ``"note"`` (after a call only; before it where not
        :attr:`answers_reach_hook`) gives ``reason`` to the model;
        ``"deny"`` (before a call only) refuses it with ``reason``; ``"end"`` refuses it
        and ends the session where :attr:`can_end_session` (elsewhere a ``"deny"``)."""

    def render_user_message(self, event: HookEvent, text: str) -> tuple[str, int]:
        """The hook's stdout and exit status that allow ``event``'s call (if any) and
        show ``text`` to the *user*, not the model."""
        del event
        return json.dumps({"systemMessage": text}), 0

    @abc.abstractmethod
    def probe_event(self, session: str) -> dict[str, object]:
        """A before-call payload of this CLI's shape, for the tool :data:`PROBE_TOOL` in
        ``session`` (``loopfuse doctor``'s test)."""

    @abc.abstractmethod
    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """The file ``loopfuse init`` writes: the user's (from ``env``'s ``HOME`` and
        the CLI's own variables), or the project's in ``cwd``; :class:`ConfigError` for
        a scope the CLI has not."""


@cache
def agent_cli(name: str) -> AgentCli:
    """The :class:`AgentCli` of ``--agent`` ``name`` (its module imported on first use);
    :class:`~loopfuse.errors.ConfigError` for a name :data:`AGENT_CLIS` has not."""
    module = AGENT_CLIS.get(name)
    if module is None:
        raise ConfigError(f"unknown agent {name!r}; one of {', '.join(AGENT_CLIS)}")
    found: AgentCli = importlib.import_module(f"loopfuse.harness.{module}").CLI
    return found


def harness_module(name: str) -> ModuleType:
    """The module ``name`` of :mod:`loopfuse.harness`, imported on first use. How a CLI's
    module reaches its transcript reader (``_<cli>_sessions``, which imports the CLI's
    module for its helpers): only ``scan`` reads transcripts, and the hook, which imports
    every CLI's module, imports no reader."""
    return importlib.import_module(f"loopfuse.harness.{name}")


def reader_names(module: str, names: Iterable[str], owner: str) -> Callable[[str], object]:
    """A CLI module's ``__getattr__`` (PEP 562) for the ``names`` of its transcript reader,
    ``module`` of :mod:`loopfuse.harness`, read there on first use: they are still
    ``owner``'s names, and the hook, which imports ``owner`` at every call, imports no
    reader (:attr:`AgentCli.sessions_module`).

    >>> lookup = reader_names("_codex_sessions", ["SESSIONS"], "loopfuse.harness.codex")
    >>> lookup("SESSIONS").agent
    'codex'
    >>> lookup("nothing")
    Traceback (most recent call last):
    ...
    AttributeError: module 'loopfuse.harness.codex' has no attribute 'nothing'
    """
    kept = frozenset(names)

    def __getattr__(name: str) -> object:
        if name in kept:
            return getattr(harness_module(module), name)
        raise AttributeError(f"module {owner!r} has no attribute {name!r}")

    return __getattr__


def recognised(payload: dict[str, object]) -> AgentCli:
    """The CLI that sent ``payload``, read without ``--agent``: the first of
    :data:`TOLD_BY_PAYLOAD` that recognises it, else :data:`DEFAULT_AGENT`'s."""
    for name in TOLD_BY_PAYLOAD:
        cli = agent_cli(name)
        if cli.recognises(payload):
            return cli
    return agent_cli(DEFAULT_AGENT)
