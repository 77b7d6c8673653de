"""The settings of a :class:`~loopfuse.detector.LoopDetector`: every signal's threshold,
its measured default and its off switch, each declared once (:mod:`loopfuse.fields`) and
validated once.

Every threshold below was chosen on real agent runs (docs/detector.md has the tables):
the value where a run that succeeded would first have been stopped is the *safe edge*,
and each default sits at least one notch inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Final

from loopfuse.fields import (
    Choice,
    Flag,
    Integer,
    Limits,
    Names,
    Pair,
    SettingError,
    check_fields,
    setting,
)
from loopfuse.harness import HARNESS_SETTINGS
from loopfuse.harness.generic import (
    DEFAULT_COSTLY_TOOLS,
    DEFAULT_OBSERVATION_TOOLS,
    DEFAULT_READ_ONLY_COMMANDS,
    DEFAULT_SHELL_TOOLS,
)

if TYPE_CHECKING:
    from loopfuse.detector.errors import ErrorReading
    from loopfuse.detector.reader import BatchReader

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
    "DEFAULT_MAX_WAITS",
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
DEFAULT_MAX_WAITS: Final = 120
"""Waits in a row on something that still runs (docs/detector.md, "Waits"): at Codex's
usual 30 s poll, an hour of waiting; the longest healthy wait seen in the CLI sessions
was 11 polls in a row (the issue's benchmark runs: up to 26 minutes)."""
DEFAULT_WINDOW: Final = 48
_MIN_WINDOW: Final = 8
"""The shortest ``window``: the signals need a few batches of history to see anything."""

_COUNT: Final = Integer()
_COUNT_OR_OFF: Final = Integer(off=True)
_POSITIVE_OR_OFF: Final = Integer(minimum=1, off=True)
_FLAG: Final = Flag()
_TOOL_NAMES: Final = Names("tool names")
_PATTERNS: Final = Names("patterns", items=False)  # each one is checked by its classifier


@dataclass(frozen=True, slots=True, kw_only=True)
class DetectorSettings:
    """Every setting of a :class:`~loopfuse.detector.LoopDetector`, checked once: each
    field is declared here with its default, its kind, a one-line help and its off
    value (``None`` switches a signal off), and ``loopfuse scan``'s flags and TOML keys
    are made from these fields (:func:`loopfuse.fields.fields_of`). docs/detector.md has
    what each one does and the measurement behind each default.

    An iterable of tool names becomes a tuple, a mapping of ``tool_limits`` sorted
    pairs; a value refused is a :class:`~loopfuse.fields.SettingError` (a
    :class:`~loopfuse.errors.ConfigError`) naming the setting.

    >>> DetectorSettings(max_strikes=2, ignore_tools=["think"]).ignore_tools
    frozenset({'think'})
    >>> DetectorSettings(max_cycle_period=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: max_cycle_period must be an int >= 2 or None (...), got 1
    """

    max_strikes: int | None = setting(
        DEFAULT_MAX_STRIKES, _COUNT_OR_OFF, "identical batches allowed in a row (none: off)"
    )
    max_observation_steps: int | None = setting(
        DEFAULT_MAX_OBSERVATION_STEPS,
        _COUNT_OR_OFF,
        "the same, for read-only tools; also the ceiling (none: off)",
    )
    max_cycle_period: int | None = setting(
        DEFAULT_MAX_CYCLE_PERIOD,
        Integer(
            minimum=2,
            off=True,
            note="no lap is shorter than 2 batches: use None to turn cycles off",
        ),
        "longest cycle looked for (none: off)",
    )
    max_cycle_laps: int = setting(DEFAULT_MAX_CYCLE_LAPS, _COUNT, "laps of a cycle allowed")
    max_error_streak: int | None = setting(
        DEFAULT_MAX_ERROR_STREAK, _POSITIVE_OR_OFF, "the same error allowed in a row (none: off)"
    )
    max_near_repeats: int | None = setting(
        DEFAULT_MAX_NEAR_REPEATS,
        _POSITIVE_OR_OFF,
        "near-identical calls allowed in a row (none: off)",
    )
    max_unchanged_checks: int | None = setting(
        DEFAULT_MAX_UNCHANGED_CHECKS,
        _POSITIVE_OR_OFF,
        "runs of a check unchanged by edits allowed (none: off)",
    )
    max_unread_edit_checks: int | None = setting(
        DEFAULT_MAX_UNREAD_EDIT_CHECKS,
        _POSITIVE_OR_OFF,
        "runs of a check unchanged by edits of files it does not read (none: off)",
    )
    error_storm: tuple[int, int] | None = setting(
        DEFAULT_ERROR_STORM, Pair(off=True), "ERRORS,CALLS: that many of the last calls failed"
    )
    max_stagnation_steps: int | None = setting(
        DEFAULT_MAX_STAGNATION_STEPS, _COUNT_OR_OFF, "same prose answer allowed (none: off)"
    )
    max_waits: int | None = setting(
        DEFAULT_MAX_WAITS,
        _POSITIVE_OR_OFF,
        "waits in a row on something still running (none: waits judged as any call)",
    )
    error_aware: bool = setting(True, _FLAG, "a repeated error is refused one repeat earlier")
    editor_aware: bool = setting(
        True, _FLAG, "editor tools judged by their arguments (view: a read)"
    )
    normalize_answers: bool = setting(
        True, _FLAG, "answers differing only in noise count as the same"
    )
    error_flags: bool = setting(
        True, _FLAG, "a result flagged failed is an error (is_error, isError)"
    )
    framework_errors: bool = setting(
        True, _FLAG, "frameworks' unknown-tool / invalid-arguments answers are errors"
    )
    window: int = setting(
        DEFAULT_WINDOW,
        _COUNT,
        "tool-call batches the detector remembers",
        key="detector_window",  # the breaker has a window too (seconds)
    )
    observation_tools: tuple[str, ...] = setting(
        DEFAULT_OBSERVATION_TOOLS, _TOOL_NAMES, "more read-only tool names", extends=True
    )
    costly_tools: tuple[str, ...] = setting(
        DEFAULT_COSTLY_TOOLS, _TOOL_NAMES, "more costly read-only tool names", extends=True
    )
    shell_tools: tuple[str, ...] = setting(
        DEFAULT_SHELL_TOOLS,
        _PATTERNS,
        "more shell tool names (their command lines are read)",
        extends=True,
    )
    read_only_commands: tuple[str, ...] = setting(
        DEFAULT_READ_ONLY_COMMANDS, _PATTERNS, "more read-only command patterns", extends=True
    )
    harness: str = setting(
        "auto",
        Choice(HARNESS_SETTINGS),
        "whose tools: auto (each by the harness declaring it), generic, or one harness",
    )
    tool_limits: tuple[tuple[str, int], ...] = setting(
        (), Limits(), "NAME=N,...: per-tool caps on identical calls"
    )
    ignore_tools: frozenset[str] = setting(
        frozenset(), Names("tool names", into=frozenset), "tools never counted"
    )
    enabled: bool = setting(
        True, _FLAG, "False: the detector is off for this run, every batch passes", key=None
    )
    reader: BatchReader = field(init=False, compare=False, repr=False)
    """How batches are read with these settings (:mod:`loopfuse.detector.reader`)."""
    error_reading: ErrorReading = field(init=False, compare=False, repr=False)
    """Which evidence of an error beyond the text heuristics is read: the flags results
    carry (``error_flags``), the frameworks' answers (``framework_errors``)."""

    def __post_init__(self) -> None:
        check_fields(self)
        self._check_rules()
        # Here, not above: what reads only the fields (the CLI, `loopfuse hook`) does not
        # import the classifiers.
        from loopfuse.detector.reader import BatchReader

        reader = BatchReader(
            observation_tools=self.observation_tools,
            costly_tools=self.costly_tools,
            shell_tools=self.shell_tools,
            read_only_commands=self.read_only_commands,
            tool_limits=self.tool_limits,
            ignore_tools=self.ignore_tools,
            editor_aware=self.editor_aware,
            error_flags=self.error_flags,
            framework_errors=self.framework_errors,
            harness=self.harness,
        )
        object.__setattr__(self, "reader", reader)
        object.__setattr__(self, "error_reading", reader.error_reading)  # read on every scan

    def _check_rules(self) -> None:
        """The rules between fields: what must fit the window."""
        window = self.window
        if window < _MIN_WINDOW:
            raise SettingError(f"{{0}} must be an int >= {_MIN_WINDOW}, got {window}", "window")
        storm = self.error_storm
        if storm is not None and not storm[0] <= storm[1] <= window:
            raise SettingError(
                "{0} must be None or (errors, calls) with 1 <= errors <= calls <= {1} "
                "({window}), got {storm!r}",
                "error_storm",
                "window",
                window=window,
                storm=storm,
            )
        for name in ("max_error_streak", "max_near_repeats"):
            value = getattr(self, name)
            if value is not None and value >= window:
                raise SettingError(
                    "{0} must be < {1} ({window}), got {value}",
                    name,
                    "window",
                    window=window,
                    value=value,
                )
        checks = self.max_unchanged_checks
        if checks is not None and 2 * (checks + 1) > window:
            raise SettingError(
                "{0} must be <= {1} / 2 - 1 ({most}): a check and the edits between its runs "
                "must fit the {1}, got {checks}",
                "max_unchanged_checks",
                "window",
                most=window // 2 - 1,
                checks=checks,
            )

    def earlier(self) -> DetectorSettings:
        """These settings with every signal's count one notch lower: where ``mode="warn"``
        gives its note, so that the loop is refused where ``mode="refuse"`` refuses it and
        the note comes one count before (issue 27; docs/detector.md, "Warn").

        A count already at its lowest stays (that signal notes where it refuses);
        ``error_storm`` needs one error fewer in one call fewer; ``max_waits`` and
        ``tool_limits`` are bounds the user gave in calls, kept as they are; the signals
        switched off stay off. Built once per settings.

        >>> early = DetectorSettings().earlier()
        >>> early.max_strikes, early.max_error_streak, early.error_storm, early.max_waits
        (2, 2, (9, 11), 120)
        >>> DetectorSettings(max_strikes=0, max_error_streak=None).earlier().max_strikes
        0
        """
        return _earlier(self)

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
        period = self.max_cycle_period or 0
        return max(self.window, period * self.cycle_allowance + 1)


# The counts lowered for an early note, and the lowest each can go: 0 or 1, as its
# setting allows (a cycle needs a lap to be one).
_EARLIER: Final = (
    ("max_strikes", 0),
    ("max_observation_steps", 0),
    ("max_cycle_laps", 1),
    ("max_error_streak", 1),
    ("max_near_repeats", 1),
    ("max_unchanged_checks", 1),
    ("max_unread_edit_checks", 1),
    ("max_stagnation_steps", 0),
)


@cache
def _earlier(settings: DetectorSettings) -> DetectorSettings:
    lowered: dict[str, object] = {}
    for name, lowest in _EARLIER:
        value = getattr(settings, name)
        if value is not None and value > lowest:
            lowered[name] = value - 1
    storm = settings.error_storm
    if storm is not None and storm[0] > 1:
        # The storm one call sooner: 10 of the last 12 calls failed now means at least 9
        # of the 11 before it did.
        lowered["error_storm"] = (storm[0] - 1, storm[1] - 1)
    return replace(settings, **lowered) if lowered else settings  # type: ignore[arg-type]


@cache
def default_settings() -> DetectorSettings:
    """The settings of ``LoopDetector()``, built once, on first use."""
    return DetectorSettings()
