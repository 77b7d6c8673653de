"""The settings of a :class:`~loopfuse.detector.LoopDetector`: every signal's threshold,
its measured default and its off switch, validated once.

Every threshold below was chosen on real agent runs (docs/detector.md has the tables):
the value where a run that succeeded would first have been stopped is the *safe edge*,
and each default sits at least one notch inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Final

from loopfuse.detector.editors import EDIT, READ, editor_call
from loopfuse.detector.errors import ErrorReading
from loopfuse.detector.shell import (
    DEFAULT_READ_ONLY_COMMANDS,
    DEFAULT_SHELL_TOOLS,
    ShellClassifier,
)
from loopfuse.detector.tools import (
    DEFAULT_COSTLY_TOOLS,
    DEFAULT_OBSERVATION_TOOLS,
    ToolClassifier,
    own_name,
)
from loopfuse.errors import ConfigError

__all__ = [
    "DEFAULT_ERROR_STORM",
    "DEFAULT_MAX_CYCLE_LAPS",
    "DEFAULT_MAX_CYCLE_PERIOD",
    "DEFAULT_MAX_ERROR_STREAK",
    "DEFAULT_MAX_NEAR_REPEATS",
    "DEFAULT_MAX_OBSERVATION_STEPS",
    "DEFAULT_MAX_STAGNATION_STEPS",
    "DEFAULT_MAX_STRIKES",
    "DEFAULT_MAX_UNCHANGED_CHECKS",
    "DEFAULT_MAX_UNREAD_EDIT_CHECKS",
    "DEFAULT_WINDOW",
    "DetectorSettings",
    "default_settings",
]

DEFAULT_MAX_STRIKES: Final = 3
DEFAULT_MAX_OBSERVATION_STEPS: Final = 5
DEFAULT_MAX_CYCLE_PERIOD: Final = 8
DEFAULT_MAX_CYCLE_LAPS: Final = 2
DEFAULT_MAX_ERROR_STREAK: Final = 3
DEFAULT_MAX_NEAR_REPEATS: Final = 3
DEFAULT_MAX_UNCHANGED_CHECKS: Final = 4
DEFAULT_MAX_UNREAD_EDIT_CHECKS: Final = 9
DEFAULT_ERROR_STORM: Final = (10, 12)
DEFAULT_MAX_STAGNATION_STEPS: Final = 5
DEFAULT_WINDOW: Final = 48


def _count(name: str, value: object, *, minimum: int = 0, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(
            f"{name} must be an int >= {minimum}{' or None' if optional else ''}, got {value!r}"
        )


def _names(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(f"{name} must be a collection of tool names, not {value!r}")
    out = tuple(value)
    for item in out:
        if not isinstance(item, str) or not item:
            raise ConfigError(f"{name} must hold non-empty str tool names, got {item!r}")
    return out


# Asked for on every scan: the four readings made once (a NamedTuple's __new__ is slow).
_READINGS: Final = {
    (flags, frameworks): ErrorReading(flags, frameworks)
    for flags in (False, True)
    for frameworks in (False, True)
}


@dataclass(frozen=True, slots=True)
class DetectorSettings:
    """Validated settings; see :class:`~loopfuse.detector.LoopDetector` for each one."""

    max_strikes: int | None = DEFAULT_MAX_STRIKES
    max_observation_steps: int | None = DEFAULT_MAX_OBSERVATION_STEPS
    observation_tools: tuple[str, ...] = DEFAULT_OBSERVATION_TOOLS
    costly_tools: tuple[str, ...] = DEFAULT_COSTLY_TOOLS
    shell_tools: tuple[str, ...] = DEFAULT_SHELL_TOOLS
    read_only_commands: tuple[str, ...] = DEFAULT_READ_ONLY_COMMANDS
    max_cycle_period: int = DEFAULT_MAX_CYCLE_PERIOD
    max_cycle_laps: int = DEFAULT_MAX_CYCLE_LAPS
    normalize_answers: bool = True
    error_aware: bool = True
    editor_aware: bool = True
    max_unread_edit_checks: int | None = DEFAULT_MAX_UNREAD_EDIT_CHECKS
    error_flags: bool = True
    framework_errors: bool = True
    max_error_streak: int | None = DEFAULT_MAX_ERROR_STREAK
    max_near_repeats: int | None = DEFAULT_MAX_NEAR_REPEATS
    max_unchanged_checks: int | None = DEFAULT_MAX_UNCHANGED_CHECKS
    error_storm: tuple[int, int] | None = DEFAULT_ERROR_STORM
    max_stagnation_steps: int | None = DEFAULT_MAX_STAGNATION_STEPS
    tool_limits: tuple[tuple[str, int], ...] = ()
    ignore_tools: frozenset[str] = frozenset()
    window: int = DEFAULT_WINDOW
    enabled: bool = True
    classifier: ToolClassifier = field(init=False, compare=False, repr=False)
    shell: ShellClassifier = field(init=False, compare=False, repr=False)
    limits_by_name: dict[str, int] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        _count("max_strikes", self.max_strikes, optional=True)
        _count("max_observation_steps", self.max_observation_steps, optional=True)
        _count("max_cycle_period", self.max_cycle_period)
        _count("max_cycle_laps", self.max_cycle_laps)
        _count("max_error_streak", self.max_error_streak, minimum=1, optional=True)
        _count("max_near_repeats", self.max_near_repeats, minimum=1, optional=True)
        _count("max_unchanged_checks", self.max_unchanged_checks, minimum=1, optional=True)
        _count("max_unread_edit_checks", self.max_unread_edit_checks, minimum=1, optional=True)
        _count("max_stagnation_steps", self.max_stagnation_steps, optional=True)
        _count("window", self.window, minimum=8)
        for flag in (
            "normalize_answers",
            "error_aware",
            "editor_aware",
            "error_flags",
            "framework_errors",
            "enabled",
        ):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be a bool, got {getattr(self, flag)!r}")
        storm = self.error_storm
        if storm is not None and (
            not isinstance(storm, tuple)
            or len(storm) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in storm)
            or not 1 <= storm[0] <= storm[1] <= self.window
        ):
            raise ConfigError(
                "error_storm must be None or (errors, calls) with "
                f"1 <= errors <= calls <= window ({self.window}), got {storm!r}"
            )
        for name, limit in self.tool_limits:
            _count(f"tool_limits[{name!r}]", limit)
        for name, value in (
            ("max_error_streak", self.max_error_streak),
            ("max_near_repeats", self.max_near_repeats),
        ):
            if value is not None and value >= self.window:
                raise ConfigError(f"{name} must be < window ({self.window}), got {value}")
        if (
            self.max_unchanged_checks is not None
            and 2 * (self.max_unchanged_checks + 1) > self.window
        ):
            raise ConfigError(
                "max_unchanged_checks must be <= window / 2 - 1 "
                f"({self.window // 2 - 1}): a check and the edits between its runs must fit "
                f"the window, got {self.max_unchanged_checks}"
            )
        if self.max_cycle_period < 2:
            object.__setattr__(self, "max_cycle_period", 0)  # no lap is shorter than 2
        object.__setattr__(
            self, "classifier", ToolClassifier(self.observation_tools, self.costly_tools)
        )
        object.__setattr__(
            self, "shell", ShellClassifier(self.shell_tools, self.read_only_commands)
        )
        object.__setattr__(self, "limits_by_name", dict(self.tool_limits))

    @classmethod
    def build(
        cls,
        *,
        observation_tools: object,
        costly_tools: object,
        shell_tools: object,
        read_only_commands: object,
        tool_limits: object,
        ignore_tools: object,
        **values: object,
    ) -> DetectorSettings:
        """Settings from :class:`~loopfuse.detector.LoopDetector`'s arguments."""
        if tool_limits is None:
            tool_limits = {}
        if not isinstance(tool_limits, Mapping):
            raise ConfigError(
                f"tool_limits must be a mapping of tool name to int, not {tool_limits!r}"
            )
        limits = tuple(sorted((str(k), v) for k, v in tool_limits.items() if _named(k)))
        if len(limits) != len(tool_limits):
            raise ConfigError("tool_limits must map non-empty str tool names to ints")
        return cls(
            observation_tools=_names("observation_tools", observation_tools),
            costly_tools=_names("costly_tools", costly_tools),
            shell_tools=_patterns("shell_tools", shell_tools),
            read_only_commands=_patterns("read_only_commands", read_only_commands),
            tool_limits=limits,
            ignore_tools=frozenset(_names("ignore_tools", ignore_tools)),
            **values,  # type: ignore[arg-type]
        )

    @property
    def error_reading(self) -> ErrorReading:
        """Which evidence of an error beyond the text heuristics is read: the flags results
        carry (``error_flags``), the frameworks' answers (``framework_errors``)."""
        return _READINGS[self.error_flags, self.framework_errors]

    @property
    def allowance(self) -> int | None:
        """Quiet repeats allowed to a read-only batch (``None``: repeats are off)."""
        if self.max_strikes is None:
            return None
        if self.max_observation_steps is None:
            return self.max_strikes
        return max(self.max_observation_steps, self.max_strikes)

    @property
    def ceiling(self) -> int | None:
        """Occurrences in a row a state-changing batch may reach whatever its answers."""
        return None if self.max_observation_steps is None else self.allowance

    @property
    def cycle_allowance(self) -> int:
        """Laps allowed to a cycle of read-only batches (they get the read-only allowance)."""
        return max(self.allowance or 0, self.max_cycle_laps)

    @property
    def history_len(self) -> int:
        """Batches remembered: the window, or a cycle going past its limit if longer."""
        return max(self.window, self.max_cycle_period * self.cycle_allowance + 1)

    def tool_limit(self, names: tuple[str, ...]) -> int | None:
        """The smallest ``tool_limits`` entry that applies to every call of a batch."""
        limits = self.limits_by_name
        if not limits:
            return None
        found: list[int] = []
        for name in names:
            limit = limits.get(name)
            if limit is None:
                limit = limits.get(own_name(name))
            if limit is None:
                return None
            found.append(limit)
        return min(found) if found else None

    def classify(self, names: tuple[str, ...], args: tuple[object, ...]) -> tuple[bool, bool]:
        """``(every call only reads, some call is costly)`` for one batch.

        A shell call is read-only when its command line is (:mod:`loopfuse.detector.shell`);
        so is a call of a tool named after the program its ``command`` runs (transcripts
        that name each action after its first word: ``cat``, ``grep``, ``sed``); with
        ``editor_aware``, an editor call when it only reads (:mod:`loopfuse.detector.editors`:
        ``str_replace_editor`` ``view``, ``Read``). Any other tool is judged by its name
        (:mod:`loopfuse.detector.tools`).
        """
        observation = bool(names)
        costly = False
        for name, arguments in zip(names, args, strict=False):
            read_only = self.shell.classify_call(name, arguments)
            if read_only is None and self.editor_aware:
                editor = editor_call(name, arguments)
                if editor is not None:
                    read_only = editor.action == READ
            if read_only is None:
                read_only = self._program_call(name, arguments)
            if read_only is None:
                obs, cost = self.classifier.classify_names((name,))
                observation = observation and obs
                costly = costly or cost
            else:
                observation = observation and read_only
        return observation, costly

    def edits(self, names: tuple[str, ...], args: tuple[object, ...]) -> tuple[str, ...] | None:
        """The files a state-changing batch edits through editor tools, when that is all
        it does (``editor_aware``); ``None`` when some call changes state otherwise (a
        shell command, a tool judged by its name) or names no file."""
        if not self.editor_aware:
            return None
        paths: list[str] = []
        for name, arguments in zip(names, args, strict=False):
            editor = editor_call(name, arguments)
            if editor is None or (editor.action == EDIT and editor.path is None):
                return None
            if editor.path is not None:
                paths.append(editor.path)
        return tuple(paths) if paths else None

    def _program_call(self, name: str, arguments: object) -> bool | None:
        """For a tool named after the program its command line starts with, whether that
        command line only reads; ``None`` for any other tool."""
        if type(arguments) is not dict or "command" not in arguments:
            return None
        command = arguments["command"]
        if type(command) is not str or not command.startswith(name):
            return None
        rest = command[len(name) : len(name) + 1]
        if rest not in ("", " ", "\t", "\n"):
            return None
        return self.shell.is_read_only(command)

    def kept(self, names: tuple[str, ...]) -> list[int] | None:
        """Which calls of a batch count (``ignore_tools``): their indices, or ``None`` when
        every call does (an empty list: none does)."""
        if not self.ignore_tools:
            return None
        keep = [k for k, name in enumerate(names) if not self.ignored(name)]
        return None if len(keep) == len(names) else keep

    def ignored(self, name: str) -> bool:
        """Whether calls of tool ``name`` are never counted."""
        return bool(self.ignore_tools) and (
            name in self.ignore_tools or own_name(name) in self.ignore_tools
        )


@cache
def default_settings() -> DetectorSettings:
    """The settings of ``LoopDetector()``, built once, on first use."""
    return DetectorSettings()


def _patterns(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(f"{name} must be a collection of patterns, not {value!r}")
    return tuple(value)  # the classifier checks each one


def _named(key: object) -> bool:
    return isinstance(key, str) and bool(key)
