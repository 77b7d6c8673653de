"""The keyword settings of the guards' constructors, typed: ``Guard(mode="warn")``,
``LoopBreaker(max_repeats=3)``, ``LoopDetector(max_strikes=2)``, ``DedupCache(capacity=64)``.

Each constructor takes ``**overrides: Unpack[...]`` of the :class:`~typing.TypedDict`
here, so that a type checker refuses a misspelt setting (``Guard(max_strike=3)``) or a
value of the wrong type (``Guard(mode="wran")``: modes are a ``Literal``) before it runs;
at run time the settings class refuses the same with a
:class:`~loopfuse.errors.ConfigError` that names the closest setting.

Each dictionary has one key per field of its settings class
(:class:`~loopfuse.GuardSettings`, :class:`~loopfuse.BreakerSettings`,
:class:`~loopfuse.DetectorSettings`, :class:`~loopfuse.CacheSettings`), with the types the
field's kind accepts (a count is anything with ``__index__``, a time a number of seconds
or a ``timedelta``, a list of names any iterable of str): a test keeps the keys the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, SupportsIndex, TypedDict

if TYPE_CHECKING:
    from loopfuse.guard.guard import Mode

__all__ = ["BreakerOverrides", "CacheOverrides", "DetectorOverrides", "GuardOverrides"]

Seconds = float | timedelta
"""A time a setting takes: seconds, or a ``timedelta``."""


class GuardOverrides(TypedDict, total=False):
    """The settings ``Guard(...)`` takes by name: :class:`~loopfuse.GuardSettings`' fields."""

    mode: Mode
    cache_streams: bool
    cache_sampled: bool
    cache_namespace: str | None
    shared_session: str | None
    fail_closed: bool
    warn_window: Seconds
    note_early: bool


class BreakerOverrides(TypedDict, total=False):
    """The settings ``LoopBreaker(...)`` takes by name: :class:`~loopfuse.BreakerSettings`'
    fields."""

    window: Seconds
    max_repeats: SupportsIndex
    max_samples_per_session: SupportsIndex
    max_sessions: SupportsIndex
    fail_closed: bool


class CacheOverrides(TypedDict, total=False):
    """The settings ``DedupCache(...)`` takes by name: :class:`~loopfuse.CacheSettings`'
    fields."""

    capacity: SupportsIndex
    default_ttl: Seconds
    wait_timeout: Seconds
    fail_closed: bool


class DetectorOverrides(TypedDict, total=False):
    """The settings ``LoopDetector(...)`` takes by name:
    :class:`~loopfuse.DetectorSettings`' fields (``None`` switches a signal off)."""

    max_strikes: SupportsIndex | None
    max_observation_steps: SupportsIndex | None
    max_cycle_period: SupportsIndex | None
    max_cycle_laps: SupportsIndex
    max_error_streak: SupportsIndex | None
    max_near_repeats: SupportsIndex | None
    max_unchanged_checks: SupportsIndex | None
    max_unread_edit_checks: SupportsIndex | None
    error_storm: tuple[int, int] | None
    max_stagnation_steps: SupportsIndex | None
    max_waits: SupportsIndex | None
    error_aware: bool
    editor_aware: bool
    normalize_answers: bool
    error_flags: bool
    framework_errors: bool
    window: SupportsIndex
    observation_tools: Iterable[str]
    costly_tools: Iterable[str]
    shell_tools: Iterable[str]
    read_only_commands: Iterable[str]
    harness: str  # "auto", "generic" or a harness's name (loopfuse.harness.HARNESS_SETTINGS)
    tool_limits: Mapping[str, int] | Iterable[tuple[str, int]] | None
    ignore_tools: Iterable[str]
    enabled: bool
