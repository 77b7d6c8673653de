"""``loopfuse hook``: the command Claude Code, Codex and Gemini CLI run before and after
every tool call (installed by ``loopfuse init``; see docs/agents.md).

Before a call, the session's :class:`~loopfuse.detector.LoopDetector` (rebuilt from the
session's recent batches of calls and their answers, see :mod:`~loopfuse.cli.hook_state`)
decides on it; after it, the answer is recorded. The parallel calls of one turn are one
batch, decided once (by whichever of their hooks gets the lock first) and alike for each
of its calls: see :func:`_joins` for how a hook tells its batch, and docs/agents.md. What
a loop gets depends on the mode, as in the integrations:

- ``warn`` (default): the first time a loop is found the call runs and the model gets a
  note after it; when the session goes on looping, in any way, within the window of the
  note, the call is refused with the reason; so is the call after calls that failed
  again the way the noted calls did, after a note at the detector's own count
  (:mod:`~loopfuse.cli.hook_notes`). With
  ``note_early`` (default) the note comes one count before ``refuse`` mode would refuse
  the call, from the detector's early twin (its counts one notch lower,
  :meth:`~loopfuse.detector.LoopDetector.earlier`), and the refusal where ``refuse``
  mode refuses, as the integrations' ``Guard`` decides (:func:`_early_loop`). A CLI that
  throws away what a hook says after a call (Kimi Code: ``notes_reach_model`` false) has
  the first loop refused at once, at the detector's own counts: that refusal's reason is
  the note;
- ``refuse``: refused at once; ``note``: only ever noted;
- with ``--end-session``, a loop that goes on after its refusal ends the session, where
  the CLI lets a hook do that (Claude Code, Gemini CLI; never Codex, where it is refused).

The hook never breaks the agent: a bad payload, an unknown event, a settings error, a
lock not had in time or any internal error allows the call, prints nothing on stdout,
exits 0 and writes one line to the log (``hook.log`` in the state folder). A state
folder that is not the user's own, that others may write to, or that holds a link or a
FIFO where a file of loopfuse's should be, is not used: the call is allowed and the
reason is written on stderr (see :mod:`loopfuse.cli.safe_files`). A settings error is
also shown to the user, once per session, in the CLI's channel for the user
(:func:`_settings_refused`): a guard switched off by a mistake is never silent.

It imports only what it uses (the detector and this package's small modules), so that
a hook process costs little more than Python's own start.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from blake3 import blake3

from loopfuse.cli.agents import (
    AGENTS,
    Action,
    HookEvent,
    HookPayloadError,
    NotAUserPrompt,
    can_end_session,
    parse_event,
    render,
    render_user_message,
)
from loopfuse.cli.hook_state import (
    LockTimeout,
    SessionState,
    cleanup,
    load,
    locked,
    save,
    session_path,
    state_root,
)
from loopfuse.cli.options import MODES as OPTION_MODES
from loopfuse.cli.options import (
    Option,
    detector_options,
    detector_settings,
    parse_mode,
)
from loopfuse.cli.safe_files import UnsafeFileError, open_regular, private_folder
from loopfuse.errors import ConfigError
from loopfuse.harness.agent_cli import agent_cli

if TYPE_CHECKING:
    import argparse

    from loopfuse.cli.hook_notes import FailedAgain
    from loopfuse.detector import LoopDetected, LoopDetector
    from loopfuse.detector.errors import ErrorReading

__all__ = ["MODES", "HookSettings", "build_parser", "handle", "main"]

MODES: Final = OPTION_MODES  # one list of modes, the library's
WARN_WINDOW: Final = 600.0
"""Seconds a note (and a refusal) is remembered, as the integrations' ``warn_window``."""
LOCK_TIMEOUT: Final = 5.0
"""Seconds a hook waits for its session's lock before it allows the call unguarded."""
MAX_LOG_BYTES: Final = 1024 * 1024
"""The log is moved to ``hook.log.1`` past this size (one old log is kept)."""
MAX_ARGUMENT_TEXT: Final = 4096
"""Argument strings longer than this are kept as their length and hash."""
MAX_CALL_TEXT: Final = 16 * 1024
"""The arguments of one call (and a structured answer) are kept in at most about this
many characters of JSON, whatever their shape (:func:`_bounded`)."""
SHORT_TEXT: Final = 256
"""Past :data:`MAX_CALL_TEXT`, argument strings longer than this are kept as their hash."""
MIN_EVENTS: Final = 16
DETECTOR_WINDOW: Final = 48
"""The detector's default ``window`` (``loopfuse.detector.DEFAULT_WINDOW``), here so that an
after-hook bounds the state without importing the detector."""
MAX_ANSWER_TEXT: Final = 64 * 1024
"""An answer longer than this is kept as its head and tail (half each) and its length."""

_HOOK_KEYS: Final = ("mode", "end_session", "note_early", "state_dir", "lock_timeout")
_SWITCHES: Final = frozenset({"end_session", "note_early"})
_VALUED: Final = frozenset({"agent", "mode", "config", "state_dir", "lock_timeout"})
"""The hook's own flags; the detector's (:func:`_detector_option`) are read only when one
is given, so that a hook given none does not read the detector's settings."""
_IGNORED_NOTE: Final = "This loop went on after loopfuse's note about it, so the call was refused."
_ENDED: Final = "It went on after loopfuse refused it, so loopfuse ended the session."


class HookSettings(NamedTuple):
    """What ``loopfuse hook`` was told, from its flags and its settings file."""

    agent: str | None = None
    mode: str = "warn"
    end_session: bool = False
    state_dir: str | None = None
    lock_timeout: float = LOCK_TIMEOUT
    detector: Mapping[str, object] = {}  # never changed: a new dict is built
    note_early: bool = True


def build_parser() -> argparse.ArgumentParser:
    """The ``loopfuse hook`` parser, for ``--help`` only: the hook reads its flags with
    :func:`read_flags`, which does not cost argparse's start."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="loopfuse hook",
        description="Guard a coding-agent CLI's tool calls: read one hook event (JSON) on "
        "stdin, answer in the CLI's format. Installed by `loopfuse init` (docs/agents.md).",
    )
    parser.add_argument("--agent", choices=AGENTS, help="the CLI (default: told by the payload)")
    parser.add_argument("--mode", choices=MODES, help="what a loop gets (default: warn)")
    parser.add_argument(
        "--end-session",
        action=argparse.BooleanOptionalAction,
        help="end the session when a loop goes on after its refusal (where the CLI lets a "
        "hook end it)",
    )
    parser.add_argument(
        "--note-early",
        action=argparse.BooleanOptionalAction,
        help="warn mode: note a loop one count before the call refuse mode refuses (default: on)",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="TOML settings, as loopfuse scan's (or $LOOPFUSE_CONFIG)"
    )
    parser.add_argument(
        "--state-dir", metavar="DIR", help="sessions and log (or $LOOPFUSE_STATE_DIR)"
    )
    parser.add_argument(
        "--lock-timeout", metavar="SECONDS", help=f"wait for a session's lock ({LOCK_TIMEOUT:g})"
    )
    group = parser.add_argument_group("detector (as in loopfuse scan)")
    for option in detector_options():
        if option.kind.switch:
            group.add_argument(option.flag, action=argparse.BooleanOptionalAction, help=option.help)
        else:
            group.add_argument(option.flag, metavar="VALUE", help=option.help)
    return parser


def read_flags(argv: Sequence[str]) -> dict[str, str | bool]:
    """The flags in ``argv``, by name (``--max-strikes 2``, ``--max-strikes=2``,
    ``--end-session``, ``--no-end-session``); :class:`ConfigError` for anything else.

    >>> read_flags(["--mode=refuse", "--max-strikes", "2", "--no-error-aware"])
    {'mode': 'refuse', 'max_strikes': '2', 'error_aware': False}
    """
    flags: dict[str, str | bool] = {}
    given = list(argv)
    while given:
        word = given.pop(0)
        flag, equals, value = word.partition("=")
        name = flag.removeprefix("--").replace("-", "_")
        if flag.startswith("--no-") and not equals and _flag_kind(name[3:]) == "switch":
            flags[name[3:]] = False
        elif not flag.startswith("--") or (kind := _flag_kind(name)) is None:
            raise ConfigError(f"loopfuse hook: unknown argument {word!r}")
        elif kind == "switch" and not equals:
            flags[name] = True
        elif kind == "valued":
            if not equals:
                if not given:
                    raise ConfigError(f"loopfuse hook: {flag} needs a value")
                value = given.pop(0)
            flags[name] = value
        else:
            raise ConfigError(f"loopfuse hook: unknown argument {word!r}")
    return flags


def _flag_kind(name: str) -> str | None:
    """``"switch"``, ``"valued"`` or ``None`` (no such flag) for the flag ``--name``."""
    if name in _SWITCHES:
        return "switch"
    if name in _VALUED:
        return "valued"
    option = _detector_option(name)
    if option is None:
        return None
    return "switch" if option.kind.switch else "valued"


def _detector_option(name: str) -> Option | None:
    """The detector option of key ``name``, if it is one (the detector's options are read
    on first use: a hook given none does not read them)."""
    if name in _SWITCHES or name in _VALUED:
        return None
    return next((option for option in detector_options() if option.name == name), None)


def settings_of(
    flags: Mapping[str, str | bool], env: Mapping[str, str], state: str | None = None
) -> HookSettings:
    """The settings: defaults, then the TOML file (``--config`` or ``$LOOPFUSE_CONFIG``:
    the detector keys, ``mode`` and ``note_early`` ``loopfuse scan`` reads, and a
    ``[hook]`` table, whose ``mode`` and ``note_early`` win), then the flags. The whole
    file is checked as :func:`loopfuse.load_settings` checks it, once per version of the
    file (remembered in the state folder ``state``: :mod:`~loopfuse.cli.hook_config`)."""
    values: dict[str, object] = {}
    hook: dict[str, object] = {}
    config = flags.get("config") or env.get("LOOPFUSE_CONFIG")
    if isinstance(config, str) and config:
        from loopfuse.cli.hook_config import checked_table, hook_options  # with a file only

        table = checked_table(config, state)
        for key, raw in table.items():
            name = key.replace("-", "_")
            if name == "hook" and isinstance(raw, dict):
                read = hook_options(raw, config)  # each value as every entry point reads it
                hook.update((k, getattr(read, k)) for k in (str(k).replace("-", "_") for k in raw))
            elif name in ("mode", "note_early"):  # the hook's unless [hook] says another
                hook.setdefault(name, raw)
            elif _detector_option(name) is not None:  # other keys are the other guards'
                values[name] = _parsed(name, raw, config)
    for name, flag in flags.items():
        if name in _HOOK_KEYS:
            hook[name] = flag
        elif name not in _VALUED:  # read_flags let only the detector's through
            values[name] = _parsed(name, flag, "flags")
    agent = flags.get("agent")
    if agent is not None and agent not in AGENTS:
        raise ConfigError(f"--agent must be one of {', '.join(AGENTS)}, got {agent!r}")
    mode = parse_mode(hook.get("mode", "warn"))
    end = hook.get("end_session", False)
    if not isinstance(end, bool):
        raise ConfigError(f"end_session must be true or false, got {end!r}")
    early = _switch("note_early", hook.get("note_early", True))
    state_dir = hook.get("state_dir")
    if state_dir is not None and not isinstance(state_dir, str):
        raise ConfigError(f"state_dir must be a folder name, got {state_dir!r}")
    timeout = _seconds(hook.get("lock_timeout", LOCK_TIMEOUT))
    return HookSettings(
        agent if isinstance(agent, str) else None,
        str(mode),
        end,
        state_dir,
        timeout,
        values,
        early,
    )


def _parsed(name: str, raw: object, source: str) -> object:
    option = _detector_option(name)
    assert option is not None
    try:
        return option.kind.parse(raw)
    except ConfigError as exc:
        where = option.flag if source == "flags" else f"{source}: {name}"
        raise ConfigError(f"{where} {exc}") from None


def _switch(name: str, raw: object) -> bool:
    """An on/off setting: a flag's bool, or the file's (a bool, or the text the guards'
    loader takes: ``on``/``off``, ``yes``/``no``, ``true``/``false``, ``1``/``0``)."""
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _seconds(raw: object) -> float:
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value <= 60:
        raise ConfigError(f"lock_timeout must be 0 to 60 seconds, got {raw!r}")
    return value


def main(argv: Sequence[str] | None = None, started: float | None = None) -> int:
    """Run one hook: the event on stdin, the answer on stdout; returns the exit status.

    ``started`` is when the process started (wall clock), read by the console script
    before it imports this module: it tells the hooks of parallel calls apart from the
    next turn's (see :func:`handle`)."""
    if argv is not None and any(a in ("-h", "--help") for a in argv):
        build_parser().print_help()
        return 0
    if _typed_at_a_terminal():
        sys.stderr.write(at_a_terminal())
        return 2
    try:
        raw = sys.stdin.buffer.read()
    except (OSError, ValueError):
        raw = b""
    argv = sys.argv[2:] if argv is None else argv
    started = process_start(time.time() if started is None else started)
    output, status = handle(
        raw,
        argv,
        os.environ,
        time.time,
        started=started,
        boot_clock=boot_clock,
        started_boot=_started_since_boot(),
    )
    if output:
        try:
            sys.stdout.write(output + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    return status


def at_a_terminal() -> str:
    """What ``loopfuse hook`` says, on stderr, when a person types it at a terminal (the
    CLIs named from the registry)."""
    titles = [agent_cli(name).title for name in AGENTS]
    who = f"{', '.join(titles[:-1])} and {titles[-1]}" if len(titles) > 1 else titles[0]
    return (
        f"loopfuse hook: error: {who} run this at each tool call, with the call's event "
        "(JSON) on stdin; it is not typed at a terminal.\n"
        f"To install it: loopfuse init --agent {'|'.join(AGENTS)} "
        "(loopfuse hook --help says more)\n"
    )


def _typed_at_a_terminal() -> bool:
    """Whether stdin is a terminal: a person typed ``loopfuse hook``, and reading stdin
    would wait for input that never comes. Every CLI writes the event to the hook's stdin
    through a pipe, so a CLI never meets this (and its usage status 2)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # no stdin, or a closed one: not a terminal
        return False


MAX_START_LAG: Final = 5.0
"""Seconds the kernel's start time of the process may precede the first reading of the
clock in Python; more means the two clocks disagree (a suspend): the reading is used."""


def process_start(first_reading: float) -> float:
    """When this process started, on the wall clock: the kernel's record (Linux's
    ``/proc/self/stat``, rounded up to its tick), else ``first_reading``.

    Python's own start takes tens of milliseconds, more on a loaded machine: the
    kernel's start is when the CLI started the hook, which is what tells a parallel
    call's hook from the next turn's (:func:`_joins`)."""
    since_boot = _started_since_boot()
    if since_boot is None:
        return first_reading
    start = time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot[1])
    if not 0 <= first_reading - start <= MAX_START_LAG:
        return first_reading
    return start


_BOOT_ID: list[str] = []  # read once per process


def boot_clock() -> tuple[str, float] | None:
    """The monotonic clock the hooks of one machine share: the boot's id and the
    seconds since it (Linux's ``CLOCK_BOOTTIME``, which a change of the wall clock does
    not move and a suspend does); ``None`` where there is none."""
    try:
        if not _BOOT_ID:
            with open("/proc/sys/kernel/random/boot_id", "rb") as file:
                _BOOT_ID.append(file.read(64).decode("ascii").strip())
        return _BOOT_ID[0], time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, AttributeError):
        return None


def _started_since_boot() -> tuple[str, float] | None:
    """When this process started on :func:`boot_clock` (the kernel's record, rounded up
    to its tick), else ``None``."""
    boot = boot_clock()
    if boot is None:
        return None
    try:
        with open("/proc/self/stat", "rb") as file:
            stat = file.read()
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22: starttime
        return boot[0], (ticks + 1) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def handle(
    raw: bytes,
    argv: Sequence[str],
    env: Mapping[str, str],
    clock: Callable[[], float],
    started: float | None = None,
    *,
    boot_clock: Callable[[], tuple[str, float] | None] | None = None,
    started_boot: tuple[str, float] | None = None,
) -> tuple[str, int]:
    """The hook's stdout and exit status for the event ``raw``; never raises.

    ``clock`` is the wall clock (seconds), for warn mode's memory, the cleanup and the
    batches; ``started`` when the hook's process started (default: now). A before-hook
    that started before the open batch's latest hook was done was started by the CLI
    without waiting for it: it is a parallel call of the same batch (see :func:`_joins`).
    ``boot_clock`` and ``started_boot`` are the same on the machine's monotonic clock
    (:func:`boot_clock`), which tells "started before" whatever the wall clock does;
    without them the wall clock does, within :data:`JOIN_SPAN`.
    """
    started = clock() if started is None else started
    root = state_root(None, env)  # where a problem is logged, until the settings say
    event: HookEvent | None = None
    try:
        flags = read_flags(argv)
        given = flags.get("state_dir")
        if isinstance(given, str):
            root = state_root(given, env)
        settings = settings_of(flags, env, root)
        if settings.state_dir:
            root = state_root(settings.state_dir, env)
        if env.get("LOOPFUSE_HOOK", "").strip().lower() in ("off", "0", "false", "no"):
            return "", 0
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError):
            raise HookPayloadError("the hook input is not JSON") from None
        event = parse_event(payload, settings.agent)
        path = session_path(root, event.agent, event.session)
        now = clock()
        if event.phase == "before":
            # Import the detector before taking the lock: the hooks of parallel calls
            # wait for the lock only while one of them decides, not while it imports.
            import loopfuse.detector.detector  # noqa: F401
        with locked(path, settings.lock_timeout):
            state = load(path)
            begun = _Start(started, started_boot)
            action, reason, logged, in_batch = _decide(event, state, settings, now, begun)
            if in_batch and state.batch is not None:
                # Read after deciding: a hook started before this is a sibling call.
                state.batch["done"] = clock()
                boot = boot_clock() if boot_clock is not None else None
                state.batch["boot"] = boot[0] if boot else None
                state.batch["done_boot"] = boot[1] if boot else None
            save(path, state, now)
        if logged:
            _log(root, now, event, logged)
        output = render(event, action, reason)
        try:
            cleanup(root, now)
        except OSError as exc:
            _log(root, now, event, f"cleanup failed: {exc}")
        return output
    except UnsafeFileError as exc:  # not ours to use: say why where the user can see it
        problem = f"{exc.filename}: {exc.strerror}; the call is allowed, unguarded"
        with contextlib.suppress(Exception):
            sys.stderr.write(f"loopfuse hook: {problem}\n")
        _log_failure(root, clock, event, f"UnsafeFileError: {problem}")
    except ConfigError as exc:  # fails open, and the user is told (once per session)
        _log_failure(root, clock, event, f"ConfigError: {exc}; the call is allowed")
        off = env.get("LOOPFUSE_HOOK", "").strip().lower() in ("off", "0", "false", "no")
        with contextlib.suppress(Exception):
            if not off:
                return _settings_refused(raw, argv, env, root, clock, str(exc))
    except NotAUserPrompt:
        pass  # an event with nothing to guard (Qwen Code's continuation): allowed, quietly
    except (HookPayloadError, LockTimeout) as exc:
        _log_failure(root, clock, event, f"{type(exc).__name__}: {exc}; the call is allowed")
    except Exception as exc:  # never break the agent: the call goes on unguarded
        problem = f"internal error {type(exc).__name__}: {exc}; the call is allowed"
        _log_failure(root, clock, event, problem)
    return "", 0


MAX_USER_MESSAGE: Final = 1000
"""Characters at most of the settings error shown to the user."""
SETTINGS_REFUSED: Final = (
    "[loopfuse] The loop guard is OFF: its settings are refused ({error}). Every tool call "
    "runs unchecked until they are fixed; `loopfuse doctor` checks them."
)
"""What the user is shown, once per session, when the hook's settings are refused."""


def _settings_refused(
    raw: bytes,
    argv: Sequence[str],
    env: Mapping[str, str],
    root: str,
    clock: Callable[[], float],
    error: str,
) -> tuple[str, int]:
    """The answer to an event whose hook's settings (file or flags) are refused: the
    call is allowed, and the first event of each session shows the user why, in the
    CLI's channel for the user (:func:`~loopfuse.cli.agents.render_user_message`); the
    session's state remembers it was told (``noted``, under a key no loop has, kept
    while the settings stay refused: only a hook that reads its settings forgets)."""
    try:
        flags: Mapping[str, object] = read_flags(argv)
    except ConfigError:
        flags = {}
    agent = flags.get("agent")
    event = parse_event(json.loads(raw), agent if agent in AGENTS else None)
    text = " ".join(error.split())
    config = flags.get("config") or env.get("LOOPFUSE_CONFIG")
    if not (isinstance(config, str) and config and text.startswith(config)):
        text = f"the command line of `loopfuse hook`: {text}"  # a flag, not the file
    if len(text) > MAX_USER_MESSAGE:
        text = text[: MAX_USER_MESSAGE - 3] + "..."
    key = "settings refused:" + blake3(text.encode("utf-8", "surrogatepass")).hexdigest(16)
    path = session_path(root, event.agent, event.session)
    with locked(path, LOCK_TIMEOUT):
        state = load(path)
        if key in state.noted:
            return "", 0
        state.noted[key] = clock()
        save(path, state, state.noted[key])
    _log(root, state.noted[key], event, "the user was told the settings are refused")
    return render_user_message(event, SETTINGS_REFUSED.format(error=text))


class _Start(NamedTuple):
    """When a hook's process started: on the wall clock, and on :func:`boot_clock`."""

    wall: float
    boot: tuple[str, float] | None


def _decide(
    event: HookEvent, state: SessionState, settings: HookSettings, now: float, started: _Start
) -> tuple[Action, str, str, bool]:
    """Decide on ``event``, updating ``state``: the action, the reason for the model,
    a line for the log (empty: nothing worth logging), and whether the event belongs
    to the open batch."""
    _forget(state, now)
    if event.phase == "turn":  # the user spoke: a new run, as LoopDetector.break_run
        state.events.clear()
        state.noted.clear()
        state.refused.clear()
        state.failure = None
        if state.batch is not None:
            state.batch["closed"] = True  # kept for whether the CLI marks its batches
        return "allow", "", "", False
    if event.phase == "batch":
        _close_batch(state, event)
        return "allow", "", "", False
    if event.phase == "after":
        return _after(event, state, settings)
    return _before(event, state, settings, now, started)


def _after(
    event: HookEvent, state: SessionState, settings: HookSettings
) -> tuple[Action, str, str, bool]:
    """Keep the answer of a call, and give the model the note its batch got, if any.

    The answer is kept as it came (bounded, see :func:`_kept_answer`) and digested with
    the rest of its batch by the first before-hook of the next batch, which imports the
    detector anyway: an after-hook does not."""
    arguments = _bounded(event.tool_input)
    paired = _paired(state, event, arguments)
    note: object = None
    if paired is not None and paired[4] is False:
        return "allow", "", "", False  # the answer of a refused call: nothing ran
    if paired is None:  # its before-hook was not ours (installed mid-call): count it now
        call_id = _new_call(state, event, arguments, None, f"after-{state.next_id}")
    else:
        call_id, note = str(paired[1]), paired[4]
    answer = {"answer": _kept_answer(event.answer), "error": event.error}
    state.events.append(["answer", call_id, answer])
    _trim(state, _window(settings))
    in_batch = paired is not None and state.batch is not None and paired[6] == state.batch["id"]
    if not agent_cli(event.agent).waits_for_after_hooks:
        # Its after-hooks run in the background (Kimi Code): the next call's before-hook,
        # started meanwhile, is not a sibling of this call for having started before it.
        in_batch = False
    if isinstance(note, str):
        return "note", note, "", in_batch
    return "allow", "", "", in_batch


JOIN_SPAN: Final = 20.0
"""Seconds at most between a parallel call's start and its batch's latest hook (a
sibling waits for the lock :data:`LOCK_TIMEOUT` at most, after its start): past this, a
wall clock that went back does not join a new call to an old batch."""


def _joins(state: SessionState, started: _Start, name: str, arguments: object) -> bool:
    """Whether a before-hook ``started`` then, for the call ``name(arguments)``, is a
    call of the open batch.

    The CLIs start the hooks of a turn's parallel calls together, and the next turn's
    only once the model has read every answer, that is after every hook of this turn
    has answered. So a hook that started before the batch's latest hook was done
    (``done``, read when it had decided) was started without waiting for it: it is one
    of the batch's calls, whichever order the hooks get the lock in. A hook started
    after it could be the model's answer to it: a new batch. "Before" is read on the
    machine's monotonic clock where both hooks had it (:func:`boot_clock`, same boot): a
    wall clock stepped back does not make a new call look started before.

    Claude Code runs a turn's state-changing shell calls one after the other, but says
    when the batch is over (PostToolBatch): in a session that said so before, a batch
    stays open until it does, unless the call is one the batch has already (a model
    does not ask for the same call twice in one turn: that is the next turn, whose end
    of batch went missing)."""
    batch = state.batch
    if batch is None or batch.get("closed") is True:
        return False
    done = batch["done"]
    assert isinstance(done, int | float)
    done_boot = batch.get("done_boot")
    if started.boot is not None and isinstance(done_boot, int | float) and batch.get("boot"):
        if batch["boot"] == started.boot[0]:
            since = done_boot - started.boot[1]
            before = 0 < since < JOIN_SPAN
        else:  # another boot: the batch is of a past life
            before = False
    else:
        before = started.wall < done and done - started.wall < JOIN_SPAN
    if before:
        return True
    if batch.get("marked") is not True:
        return False
    return not any(
        e[0] == "call"
        and len(e) == 7
        and e[6] == batch["id"]
        and e[2] == name
        and e[3] == arguments
        for e in state.events
    )


def _close_batch(state: SessionState, event: HookEvent) -> None:
    """The CLI says the open batch is over, and which calls it had: those are one batch
    (calls its hooks showed apart are merged into the batch of the first), and the
    session's batches are closed by the CLI from now on (see :func:`_joins`)."""
    ids = event.tool_input if isinstance(event.tool_input, list) else []
    calls = [e for e in state.events if e[0] == "call" and len(e) == 7 and e[5] in ids]
    for call in calls[1:]:
        call[6] = calls[0][6]
    if state.batch is not None:
        state.batch["closed"] = True
        state.batch["marked"] = True


def _before(
    event: HookEvent, state: SessionState, settings: HookSettings, now: float, started: _Start
) -> tuple[Action, str, str, bool]:
    """Decide on the call about to run: as its batch was decided when it is a parallel
    call of the open batch; else it opens a batch, decided with the session's detector."""
    arguments = _bounded(event.tool_input)
    if state.batch is not None and _joins(state, started, event.tool_name, arguments):
        joined, said, _ = _member(event, state, settings, arguments, state.batch)
        return joined, said, "", True  # logged once, for the batch
    from loopfuse.detector import LoopDetector

    detector = LoopDetector(detector_settings(settings.detector))
    # A CLI that runs no hook after a call (Crush) never sends an answer: a missing one
    # is then not a repeated one (unless this session did send answers).
    answered = agent_cli(event.agent).answers_reach_hook or any(
        e[0] == "answer" for e in state.events
    )
    again = _failed_again(state, settings, now, detector.settings.error_reading)
    computed = _digest_answers(state, detector.settings.error_reading)
    early = _early_twin(detector, event, settings)
    # The early twin finds every loop the detector finds (one count sooner): it is asked
    # first, and the detector only when it found one, so that a call costs one replay.
    first = early if early is not None else detector
    batches = _replay(first, state, computed, answered)
    predicted = _predicted(batches, event.tool_name, arguments)
    found = _check(first, predicted, answered)
    early_found: LoopDetected | None = None
    if early is not None and found is not None:
        early_found = found
        batches = _replay(detector, state, computed, answered)
        found = _check(detector, _predicted(batches, event.tool_name, arguments), answered)
    action: Action = "allow"
    message = logged = ""
    if found is not None:
        action, message, logged = _on_loop(found, event, state, settings, now, batches)
        if action == "note" and settings.mode == "warn":
            from loopfuse.cli.hook_notes import note_given

            note_given(state, state.next_id, f"{found.kind}:{found.signature}", found.count, now)
    elif again is not None:
        action, message, logged = _on_failed_again(again, event, state, settings, now)
    elif early_found is not None and not _answers_of_a_note(early_found, state):
        action, message, logged = _early_loop(early_found, event, state, now)
    marked = state.batch is not None and state.batch.get("marked") is True
    state.batch = {
        "id": state.next_id,
        "marked": marked,
        "done": now,
        "action": action,
        "message": message,
        "logged": logged,
    }
    return (*_member(event, state, settings, arguments, state.batch), True)


def _member(
    event: HookEvent,
    state: SessionState,
    settings: HookSettings,
    arguments: object,
    batch: Mapping[str, object],
) -> tuple[Action, str, str]:
    """Add the call to ``batch`` with the batch's decision, which every call of a batch
    gets alike: all noted, all refused, or all ended."""
    action = batch["action"]
    message = str(batch["message"])
    assert action in ("allow", "note", "deny", "end")
    note: str | bool | None = None
    if action == "note":
        note = message
    elif action != "allow":
        note = False  # refused: no answer will come
    _new_call(state, event, arguments, note, batch["id"])
    _trim(state, _window(settings))
    return action, message, str(batch["logged"])


def _early_twin(
    detector: LoopDetector, event: HookEvent, settings: HookSettings
) -> LoopDetector | None:
    """warn mode with ``note_early``: the detector whose loops are noted one count
    before ``detector`` finds them (:meth:`~loopfuse.detector.LoopDetector.earlier`, as
    the integrations' ``Guard.early_detector``), else ``None``. None for a CLI that
    throws its notes away (Kimi Code): its first loop is refused, and an early refusal
    would be stricter than ``refuse`` mode; none when every count is at its lowest."""
    if settings.mode != "warn" or not settings.note_early:
        return None
    if not agent_cli(event.agent).notes_reach_model:
        return None
    if detector.settings.earlier() is detector.settings:
        return None  # the note comes with the refusal, as in the Guard
    return detector.earlier()


def _check(detector: LoopDetector, predicted: list[Any], answered: bool) -> LoopDetected | None:
    """The loop ``detector`` finds in the batch ``predicted`` (after its replay), or
    ``None``."""
    from loopfuse.detector import LoopDetected, ToolCall

    try:
        detector.check([ToolCall(name, args) for name, args in predicted], answered=answered)
    except LoopDetected as found:
        return found
    return None


def _early_loop(
    found: LoopDetected, event: HookEvent, state: SessionState, now: float
) -> tuple[Action, str, str]:
    """warn mode's note on a loop only the early twin found (:func:`_early_twin`): one
    count before the detector would find it, so never a refusal. The session's first
    note is remembered, as :func:`_on_loop` remembers one (a loop at the detector's
    counts then ignored it and is refused); a later early loop in a noted session is
    noted again, as the integrations' ``Guard`` notes it. Its calls' failure is not
    remembered (no ``note_given``): a call failing again the way an early note's calls
    failed is not refused, as the ``Guard`` does not (that would stop runs ``refuse``
    mode lets through: docs/detector.md, "A note ignored")."""
    key = f"{found.kind}:{found.signature}"
    if not state.noted:
        state.noted[key] = now
    logged = f"loop noted ({found.kind}, {found.count}x): {event.tool_name}"
    return "note", f"[loopfuse] {found.message}", logged


def _answers_of_a_note(found: LoopDetected, state: SessionState) -> bool:
    """Whether the early loop ``found`` is one an answer-based signal found (on the
    answers in, whatever the batch about to run: ``basis`` ``"signal"``) in a session
    whose previous batch was noted. The hook decides before a call runs, so those
    answers are the ones that note came with, and the batch about to run is the model's
    answer to it: noting them again would note twice what ``loopfuse scan`` (and the
    integrations' ``Guard``, deciding once the answers are in) notes once. The next
    batch's hook reads this one's answers, and notes (or refuses) what they show."""
    record = found.record
    noted = state.batch is not None and state.batch.get("action") == "note"
    return bool(state.noted) and noted and record is not None and record.basis == "signal"


def _predicted(batches: list[list[list[object]]], name: str, arguments: object) -> list[Any]:
    """The batch a call that opens a batch is part of, as far as can be told when its
    siblings have not come yet: the latest batch that had the same call (a loop asks for
    the same batch again), else the call alone."""
    for batch in reversed(batches):
        if any(call[2] == name and call[3] == arguments for call in batch):
            return [(call[2], call[3]) for call in batch]
    return [(name, arguments)]


def _on_loop(
    found: LoopDetected,
    event: HookEvent,
    state: SessionState,
    settings: HookSettings,
    now: float,
    batches: list[list[list[object]]],
) -> tuple[Action, str, str]:
    """What the batch opened by ``event`` gets for the loop ``found``, by the mode (warn
    mode's and ``--end-session``'s memory updated): the action, the reason, the log."""
    key = f"{found.kind}:{found.signature}"
    message = f"[loopfuse] {found.message}"
    # warn: a session still looping, in any way (another kind or signature too), after a
    # note within the window ignored it (issue 27), as the integrations' Guard decides.
    first = settings.mode == "warn" and not state.noted
    heard = agent_cli(event.agent).notes_reach_model
    if settings.mode == "note" or (first and heard):
        state.noted[key] = now
        return "note", message, f"loop noted ({found.kind}, {found.count}x): {event.tool_name}"
    refusal, count = _refusal_text(found, batches)
    message = f"[loopfuse] {refusal}"
    if first:  # a CLI that throws notes away (Kimi Code): this refusal's reason is the note
        state.noted[key] = now
        # ... about the calls of the loop that ran: a later call failing again their way
        # ignored it (as one after a note that came with their answers).
        ran = next((batch for batch in reversed(batches) if batch[0][4] is not False), None)
        if ran is not None:
            from loopfuse.cli.hook_notes import note_given

            note_given(state, ran[0][6], key, found.count, now)
    elif settings.mode == "warn":
        message = f"{message} {_IGNORED_NOTE}"
    # The log counts what the model's message counts (see _refusal_text).
    return _refused(key, found.kind, count, message, event, state, settings, now)


def _refused(
    key: str,
    kind: str,
    count: int,
    message: str,
    event: HookEvent,
    state: SessionState,
    settings: HookSettings,
    now: float,
) -> tuple[Action, str, str]:
    """A refusal of the loop ``key`` (of ``kind``, ``count`` times), with ``message``:
    ended instead when ``--end-session`` is given and the loop was refused before (and
    the CLI lets a hook end it). The action, the reason, the log."""
    action: Action = "deny"
    if settings.end_session and key in state.refused:
        action = "end"
        message = f"{message} {_ENDED}"
    state.refused[key] = now
    logged = f"call refused ({kind}, {count}x): {event.tool_name}"
    if action == "end":
        logged = f"session ended ({kind}, {count}x): {event.tool_name}"
        if not can_end_session(event.agent):
            action = "deny"
            title = agent_cli(event.agent).title
            logged = f"{logged.replace('session ended', 'call refused')}; {title} cannot be ended"
    return action, message, logged


def _failed_again(
    state: SessionState, settings: HookSettings, now: float, reading: ErrorReading
) -> FailedAgain | None:
    """warn mode: whether the calls of the newest batch failed again the way the calls
    its note came with did (:mod:`loopfuse.cli.hook_notes`); read before the answers are
    digested. Nothing is read in a session without a note."""
    if settings.mode != "warn" or state.failure is None:
        return None
    from loopfuse.cli.hook_notes import failed_again

    return failed_again(state, _batches(state), now, WARN_WINDOW, reading)


def _on_failed_again(
    again: FailedAgain,
    event: HookEvent,
    state: SessionState,
    settings: HookSettings,
    now: float,
) -> tuple[Action, str, str]:
    """The refusal of a batch opened after calls failed again the way the noted ones
    did: the note was ignored, though no signal counted to its threshold again. It
    keeps the noted loop (its kind, and its key for ``--end-session``) and counts one
    more, as the integrations' ``Guard`` does."""
    said = again.failure.again()
    message = f"[loopfuse] {said} This call was refused: it did not run. {_IGNORED_NOTE}"
    return _refused(again.loop, again.kind, again.times + 1, message, event, state, settings, now)


def _refusal_text(found: LoopDetected, batches: list[list[list[object]]]) -> tuple[str, int]:
    """The detector's message for a refused batch, saying how many identical calls ran,
    and that count (``hook.log`` gives the same one).

    A repeat's ``count`` is the batches asked for in a row, this one included, and
    refused ones too (a refused batch counts, so that asking again stays refused); none
    of those ran. The model is told the ones that did: ``count`` less this one and the
    refused ones just before it (a refused batch is always the newest of its streak)."""
    text = found.message
    count = found.count
    if found.kind == "repeat":
        refused_before = 0
        for batch in reversed(batches):
            if batch_key(batch) != batch_key(batches[-1]) or batch[0][4] is not False:
                break
            refused_before += 1
        ran = found.count - 1 - refused_before
        said = f" the same arguments {found.count} times in a row"
        if ran >= 1 and said in text:
            text = text.replace(said, f" the same arguments {ran} times in a row", 1)
            count = ran
    return f"{text} This call was refused: it did not run.", count


def batch_key(batch: list[list[object]]) -> str:
    """The calls of ``batch`` (tool and arguments, in any order), as one comparable text."""
    return json.dumps(sorted(json.dumps([c[2], c[3]], sort_keys=True) for c in batch))


def _window(settings: HookSettings) -> int:
    window = settings.detector.get("detector_window", DETECTOR_WINDOW)
    return window if isinstance(window, int) else DETECTOR_WINDOW


def _batches(state: SessionState) -> list[list[list[object]]]:
    """The session's call events by batch, in the order the batches were opened."""
    batches: dict[str, list[list[object]]] = {}
    for event in state.events:
        if event[0] == "call" and len(event) == 7:
            batches.setdefault(json.dumps(event[6]), []).append(event)
    return list(batches.values())


KEEP_RAW_TEXT: Final = 4096
"""The newest finished batch keeps answers up to this long as they came, for one more
batch: Claude Code's end of batch may yet merge it with the next (see
:func:`_close_batch`), whose digest must then cover both."""


def _digest_answers(state: SessionState, reading: ErrorReading | None = None) -> dict[str, str]:
    """Replace the answers an after-hook kept by their batch's results digest (the
    calls' tools and arguments are part of it), each answer event of the batch getting
    it; an answer whose call is gone is dropped. Run when a batch is opened: every
    batch before it is over. The newest of them keeps short answers as they came (see
    :data:`KEEP_RAW_TEXT`): its digest is returned, by batch, instead of kept.
    ``reading`` is the detector's (its harness's conventions: a wait's answer that says
    the thing still runs, issue 27)."""
    from loopfuse.detector import ToolCall, results_digest
    from loopfuse.detector.errors import READ_EVERY_ERROR

    read = READ_EVERY_ERROR if reading is None else reading

    calls = {e[1]: e for e in state.events if e[0] == "call" and len(e) == 7}
    batches = _batches(state)
    newest = json.dumps(batches[-1][0][6]) if batches else None
    by_batch: dict[str, list[list[object]]] = {}
    for event in state.events:
        if event[0] != "answer" or len(event) != 3 or not isinstance(event[2], dict):
            continue
        call = calls.get(event[1])
        if call is None:
            event[0] = "damaged"
            continue
        by_batch.setdefault(json.dumps(call[6]), []).append(event)
    computed: dict[str, str] = {}
    for key, answers in by_batch.items():
        try:
            tools = []
            texts = []
            errors = set()
            for event in answers:
                call = calls[event[1]]
                kept = event[2]
                assert isinstance(kept, dict)
                error = kept.get("error")
                if not (error is None or isinstance(error, bool)):
                    raise ValueError("not an answer")
                tools.append(ToolCall(call[2], call[3]))  # type: ignore[arg-type]
                texts.append(kept.get("answer"))
                errors.add(error)
            failed = True if True in errors else (False if errors == {False} else None)
            digest = results_digest(tools, texts, error=failed, reading=read)
            short = all(len(json.dumps(text)) <= KEEP_RAW_TEXT for text in texts)
            if key == newest and short and digest is not None:
                computed[key] = digest
                continue
            for event in answers:
                event[2] = digest
        except Exception:  # a damaged batch: the replay drops what it cannot read
            for event in answers:
                event[2] = None
                event[0] = "damaged"
    return computed


def _replay(
    detector: object, state: SessionState, computed: Mapping[str, str], answered: bool = True
) -> list[list[list[object]]]:
    """Replay the session's batches into ``detector``, each checked as one batch with
    its answers' digest (``computed``, by batch, else the one its answers were given;
    none when they were digested apart), or without answers (``answered=False``). The
    batches replayed. A batch that cannot be replayed is dropped, and so is what is
    damaged."""
    from loopfuse.detector import BatchRecord, LoopDetected, LoopDetector, ToolCall

    assert isinstance(detector, LoopDetector)
    digests = {e[1]: e[2] for e in state.events if e[0] == "answer" and isinstance(e[2], str)}
    replayed: list[list[list[object]]] = []
    dropped: set[int] = set()
    for batch in _batches(state):
        try:
            calls = [ToolCall(c[2], c[3]) for c in batch]  # type: ignore[arg-type]
            try:
                record: BatchRecord | None = detector.check(calls, answered=answered)
            except LoopDetected as loop:
                record = loop.record
            given = {digests[c[1]] for c in batch if c[1] in digests}
            digest = computed.get(json.dumps(batch[0][6]))
            if digest is None and len(given) == 1:
                digest = given.pop()
            if isinstance(record, BatchRecord) and digest is not None:
                detector.record_results(record, digest)
        except Exception:  # a damaged batch: forget it, keep the rest
            dropped.update(id(c) for c in batch)
            continue
        replayed.append(batch)
    state.events[:] = [
        e for e in state.events if e[0] in ("call", "answer") and id(e) not in dropped
    ]
    return replayed


def _paired(state: SessionState, event: HookEvent, arguments: object) -> list[object] | None:
    """The call event ``event`` answers: the oldest call without an answer that has the
    CLI's call id, or (Gemini CLI gives none) the same tool and arguments. A refused call
    (no answer expected) is returned only when nothing else matches, so that an answer a
    CLI sends for a refused call is not counted as a new call."""
    answered = {e[1] for e in state.events if e[0] == "answer"}
    refused: list[object] | None = None
    for entry in state.events:
        if entry[0] != "call" or entry[1] in answered or len(entry) != 7:
            continue
        if event.call_id is not None:
            same = entry[5] == event.call_id
        else:
            same = entry[2] == event.tool_name and entry[3] == arguments
        if same and entry[4] is False:
            refused = entry
        elif same:
            return entry
    return refused


def _new_call(
    state: SessionState,
    event: HookEvent,
    arguments: object,
    note: str | bool | None,
    batch: object,
) -> str:
    """Add a checked call to the session, in ``batch``; ``note`` is the loop message
    for after it, ``False`` for a refused call (no answer will come), else ``None``."""
    call_id = f"#{state.next_id}"
    state.next_id += 1
    state.events.append(["call", call_id, event.tool_name, arguments, note, event.call_id, batch])
    return call_id


def _trim(state: SessionState, window: int) -> None:
    """Keep the events a fresh detector needs to reach the same state: its window of
    calls, each with its answer."""
    limit = max(MIN_EVENTS, 2 * window)
    if len(state.events) > limit:
        del state.events[: len(state.events) - limit]


def _forget(state: SessionState, now: float) -> None:
    """Forget the notes and refusals older than :data:`WARN_WINDOW`. A time a little
    after ``now`` is kept: a parallel hook read its clock before it waited for the lock,
    while a sibling noted the loop (only a clock far off is forgotten)."""
    for memory in (state.noted, state.refused):
        for key in [k for k, t in memory.items() if abs(now - t) >= WARN_WINDOW]:
            del memory[key]


def _bounded(value: object) -> object:
    """``value`` as the state keeps it, in about :data:`MAX_CALL_TEXT` characters of JSON
    at most, whatever its shape: every string longer than :data:`MAX_ARGUMENT_TEXT` as
    its length and hash; if that is still too large, every string longer than
    :data:`SHORT_TEXT`; then each value of a mapping that is a list or a mapping as its
    hash; then the whole as its hash. The same value is always kept the same way, so a
    call asked for again still compares equal; small arguments are kept as they came."""
    kept = _hashed(value, MAX_ARGUMENT_TEXT)
    if _size(kept) <= MAX_CALL_TEXT:
        return kept
    kept = _hashed(value, SHORT_TEXT)
    if _size(kept) <= MAX_CALL_TEXT:
        return kept
    if isinstance(kept, dict):
        kept = {k: _digest(v) if isinstance(v, dict | list) else v for k, v in kept.items()}
        if _size(kept) <= MAX_CALL_TEXT:
            return kept
    return _digest(value)


def _hashed(value: object, longest: int) -> object:
    """``value`` with every string longer than ``longest`` replaced by its length and
    hash: the same text stays the same."""
    if isinstance(value, str):
        if len(value) <= longest:
            return value
        data = value.encode("utf-8", "surrogatepass")
        digest = blake3(data).hexdigest(length=16)
        return f"<{len(value)} characters, blake3 {digest}>"
    if isinstance(value, dict):
        return {str(k): _hashed(v, longest) for k, v in value.items()}
    if isinstance(value, list):
        return [_hashed(v, longest) for v in value]
    return value


def _size(value: object) -> int:
    return len(json.dumps(value))


def _digest(value: object) -> str:
    """A JSON value as one string: its kind, its size and the hash of its canonical JSON."""
    text = json.dumps(value, sort_keys=True, default=str)
    digest = blake3(text.encode("ascii")).hexdigest(length=16)
    return f"<{type(value).__name__} of {len(text)} characters, blake3 {digest}>"


def _kept_answer(answer: object) -> object:
    """``answer`` as the state keeps it: text up to :data:`MAX_ANSWER_TEXT` as it is
    (the detector's normalisation needs it), longer text as its head, its length and
    its tail; a JSON value with its long strings hashed (:func:`_bounded`)."""
    if not isinstance(answer, str):
        return _bounded(answer)
    if len(answer) <= MAX_ANSWER_TEXT:
        return answer
    half = MAX_ANSWER_TEXT // 2
    return f"{answer[:half]}\n[... {len(answer)} characters in all ...]\n{answer[-half:]}"


def _log(root: str, now: float, event: HookEvent | None, text: str) -> None:
    """One line in ``root/hook.log`` (moved to ``hook.log.1`` past its size); a log
    that cannot be written is skipped."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    who = f"{event.agent} {event.session} {event.event_name}" if event else "-"
    line = f"{stamp} {who}: {text}".replace("\r", " ").replace("\n", " ")[:2000] + "\n"
    try:
        private_folder(root, link_ok=True)  # never a log in a folder that is not ours
        log = os.path.join(root, "hook.log")
        fd = open_regular(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            info = os.fstat(fd)
            if info.st_size > MAX_LOG_BYTES:
                os.replace(log, log + ".1")  # renames the name: a link is moved, not followed
                os.close(fd)
                fd = -1
                fd = open_regular(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            elif info.st_mode & 0o077:
                os.fchmod(fd, 0o600)  # an older version's log was 0644
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            if fd >= 0:
                os.close(fd)
    except OSError:
        pass


def _log_failure(root: str, clock: Callable[[], float], event: HookEvent | None, text: str) -> None:
    with contextlib.suppress(Exception):  # the log is best effort: the agent goes on
        _log(root, clock(), event, text)
