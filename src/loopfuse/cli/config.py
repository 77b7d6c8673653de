"""Settings of ``loopfuse scan``: every threshold, from flags or a TOML file, one key each.

Every option has one name. On the command line it is ``--name-with-dashes``; in a TOML
file (``--config FILE``) it is ``name_with_underscores`` (dashes are accepted too), at the
top level, in a ``[loopfuse]`` table, or in ``[tool.loopfuse]`` (so ``pyproject.toml``
works). Flags override the file; the file overrides the defaults, which are the guards'
own defaults (read from the guard classes, so they cannot drift).

>>> settings = Settings()
>>> settings.max_repeats, settings.max_strikes, settings.turn_seconds
(5, 3, 2.0)
>>> apply({"max_strikes": "2", "guards": "detector,dedup"}, Settings(), "flags").guards
('detector', 'dedup')
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from loopfuse import DedupCache, Guard, LoopBreaker
from loopfuse.cli.options import (
    GUARDS,
    MODES,
    OPTIONS,
    Option,
    detector_arguments,
    load_toml,
    parse_mode,
    parse_value,
)
from loopfuse.cli.tokens import Price
from loopfuse.detector import LoopDetector
from loopfuse.detector.settings import default_settings
from loopfuse.errors import ConfigError
from loopfuse.integrations.httpx import DEFAULT_MODE

__all__ = [
    "GUARDS",
    "MODES",
    "OPTIONS",
    "Option",
    "Settings",
    "apply",
    "check",
    "detector_of",
    "guard_of",
    "load_toml",
    "parse_value",
]

_BREAKER: Final = LoopBreaker()
_D: Final = default_settings()  # what LoopDetector() runs with
_CACHE: Final[DedupCache[int]] = DedupCache()
_GUARD: Final = Guard(breaker=None, detector=None)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a scan can be told; the defaults are the guards' defaults.

    ``observation_tools``, ``costly_tools``, ``shell_tools`` and ``read_only_commands``
    are *added* to the detector's default lists. ``turn_seconds`` is how far the fake
    clock moves per replayed request when the input carries no time of its own.
    """

    guards: tuple[str, ...] = GUARDS
    mode: str = DEFAULT_MODE
    window: float = _BREAKER.window
    max_repeats: int = _BREAKER.max_repeats
    max_strikes: int | None = _D.max_strikes
    max_observation_steps: int | None = _D.max_observation_steps
    max_cycle_period: int = _D.max_cycle_period
    max_cycle_laps: int = _D.max_cycle_laps
    max_error_streak: int | None = _D.max_error_streak
    max_near_repeats: int | None = _D.max_near_repeats
    max_unchanged_checks: int | None = _D.max_unchanged_checks
    max_unread_edit_checks: int | None = _D.max_unread_edit_checks
    error_storm: tuple[int, int] | None = _D.error_storm
    max_stagnation_steps: int | None = _D.max_stagnation_steps
    error_aware: bool = _D.error_aware
    editor_aware: bool = _D.editor_aware
    normalize_answers: bool = _D.normalize_answers
    error_flags: bool = _D.error_flags
    framework_errors: bool = _D.framework_errors
    detector_window: int = _D.window
    observation_tools: tuple[str, ...] = field(default=())
    costly_tools: tuple[str, ...] = field(default=())
    shell_tools: tuple[str, ...] = field(default=())
    read_only_commands: tuple[str, ...] = field(default=())
    tool_limits: tuple[tuple[str, int], ...] = field(default=())
    ignore_tools: tuple[str, ...] = field(default=())
    cache_ttl: float = _CACHE.default_ttl
    cache_capacity: int = _CACHE.capacity
    cache_streams: bool = _GUARD.cache_streams
    cache_sampled: bool = _GUARD.cache_sampled
    turn_seconds: float = 2.0
    path: str = ""
    format: str = "text"
    color: str = "auto"
    progress: bool = True
    verbose: bool = False
    price_per_mtok: Price | None = None


_BY_NAME: Final = {option.name: option for option in OPTIONS}


def apply(values: Mapping[str, object], base: Settings, source: str) -> Settings:
    """``base`` with ``values`` (option name → raw value) parsed and set.

    ``source`` names where the values came from, for error messages (a file name, or
    ``"flags"``, in which case errors name the flag). Unknown keys raise ``ConfigError``;
    a ``[hook]`` table is ``loopfuse hook``'s (one file serves both) and is skipped.
    """
    changes: dict[str, object] = {}
    for key, raw in values.items():
        name = key.replace("-", "_")
        if name == "hook" and isinstance(raw, dict):
            continue
        option = _BY_NAME.get(name)
        if option is None:
            raise ConfigError(f"{source}: unknown key {key!r} (see loopfuse scan --help)")
        try:
            changes[name] = parse_value(option, raw)
        except ConfigError as exc:
            where = option.flag if source == "flags" else f"{source}: {name}"
            raise ConfigError(f"{where} {exc}") from None
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def detector_of(settings: Settings) -> LoopDetector:
    """The :class:`~loopfuse.detector.LoopDetector` these settings describe."""
    values = {o.name: getattr(settings, o.name) for o in OPTIONS if o.group == "detector"}
    return LoopDetector(**detector_arguments(values))  # type: ignore[arg-type]


def guard_of(settings: Settings, clock: Callable[[], float]) -> Guard:
    """The :class:`~loopfuse.Guard` a scan replays one file through: the
    guards ``settings.guards`` names, on ``clock``, in ``settings.mode``. A request that
    names no session (no ``session`` in a log entry, no end user in the body) is counted
    in session ``"default"``, as if the whole file were one client's."""
    guards = settings.guards
    breaker = LoopBreaker(settings.window, settings.max_repeats, clock=clock)
    cache: DedupCache[int] = DedupCache(settings.cache_capacity, settings.cache_ttl, clock)
    return Guard(
        breaker=breaker if "breaker" in guards else None,
        detector=detector_of(settings) if "detector" in guards else None,
        cache=cache if "dedup" in guards else None,
        cache_streams=settings.cache_streams,
        cache_sampled=settings.cache_sampled,
        mode=parse_mode(settings.mode),
        shared_session="default",
        clock=clock,
    )


def check(settings: Settings, source: str = "flags") -> None:
    """Build every guard once, so that a value a guard refuses fails before the scan.

    ``source`` names where the settings came from (a file, or ``"flags"``), for the
    message. The detector's own messages name its parameters; the one whose key is
    spelled differently (its ``window``) is renamed, so every message names a key.
    """
    where = "" if source == "flags" else f"{source}: "
    try:
        detector_of(settings)
    except ConfigError as exc:
        text = re.sub(r"\bwindow\b", "detector_window", str(exc))
        raise ConfigError(f"{where}detector settings: {text}") from None
    try:
        guard_of(settings, lambda: 0.0)
    except ConfigError as exc:
        raise ConfigError(f"{where}{exc}") from None
