"""Settings of ``loopfuse scan``: every threshold, from flags or a TOML file, one key each.

Every option has one name. On the command line it is ``--name-with-dashes``; in a TOML
file (``--config FILE``) it is ``name_with_underscores`` (dashes are accepted too), at the
top level, in a ``[loopfuse]`` table, or in ``[tool.loopfuse]`` (so ``pyproject.toml``
works). Flags override the file; the file overrides the defaults, which are the guards'
own defaults (read from the guard classes, so they cannot drift). The detector's options
are its settings' fields (:func:`~loopfuse.cli.options.detector_options`), kept as one
:class:`~loopfuse.detector.DetectorSettings`.

>>> settings = Settings()
>>> settings.max_repeats, settings.detector.max_strikes, settings.turn_seconds
(5, 3, 2.0)
>>> apply({"max_strikes": "2", "guards": "detector,dedup"}, Settings(), "flags").guards
('detector', 'dedup')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from loopfuse import DedupCache, Guard, LoopBreaker
from loopfuse.cli.options import (
    GUARDS,
    MODES,
    Option,
    detector_options,
    detector_settings,
    load_toml,
    parse_mode,
)
from loopfuse.cli.tokens import Price
from loopfuse.detector import DetectorSettings, LoopDetector
from loopfuse.detector.settings import default_settings
from loopfuse.errors import ConfigError
from loopfuse.fields import Choice, Flag, Integer, Kind, Names, Seconds, SettingError, Text
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
    "value_of",
]

_BREAKER: Final = LoopBreaker()
_CACHE: Final[DedupCache[int]] = DedupCache()
_GUARD: Final = Guard(breaker=None, detector=None)
_DETECTOR: Final = default_settings()  # what LoopDetector() runs with


class PriceKind(Kind):
    """Dollars per million tokens (see :meth:`~loopfuse.cli.tokens.Price.parse`), or
    ``none``: an output option of ``loopfuse scan``."""

    off = None
    metavar = "PRICE"

    def check(self, value: object, name: str) -> object:
        if value is not None and not isinstance(value, Price):
            raise SettingError("{0} must be a Price or None, got {got!r}", name, got=value)
        return value

    def parse(self, raw: object) -> object:
        if self._is_off(raw):
            return None
        return Price.parse(raw)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a scan can be told; the defaults are the guards' defaults.

    ``detector`` holds every detector option (a tool list given as an option is *added*
    to the detector's default list). ``turn_seconds`` is how far the fake clock moves per
    replayed request when the input carries no time of its own.
    """

    guards: tuple[str, ...] = GUARDS
    mode: str = DEFAULT_MODE
    window: float = _BREAKER.window
    max_repeats: int = _BREAKER.max_repeats
    detector: DetectorSettings = _DETECTOR
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


_NUMBER: Final = Integer()
_SWITCH: Final = Flag()

OPTIONS: Final = (
    Option("guards", Names(choices=GUARDS), "guards to run", "scan"),
    Option(
        "mode",
        Choice(MODES),
        "the guard's mode replayed: refuse each loop; warn: a note first, a stop when the "
        "loop goes on (the integrations' default); note: a note every time",
        "scan",
    ),
    Option("window", Seconds(), "breaker: sliding window, seconds", "breaker"),
    Option("max_repeats", _NUMBER, "breaker: identical requests a window may hold", "breaker"),
    *detector_options(),
    Option("cache_ttl", Seconds(), "seconds an answer stays cached", "dedup"),
    Option("cache_capacity", _NUMBER, "answers the cache holds", "dedup"),
    Option("cache_streams", _SWITCH, "cache streamed answers too", "dedup"),
    Option("cache_sampled", _SWITCH, "serve sampled requests (temperature > 0) too", "dedup"),
    Option(
        "turn_seconds",
        Seconds(),
        "replay: fake-clock seconds per request without a time of its own",
        "scan",
    ),
    Option("path", Text(), "replay: request path for bodies that carry none", "scan"),
    Option("format", Choice(("text", "json", "markdown", "html")), "output format", "output"),
    Option("color", Choice(("auto", "always", "never")), "colour in text output", "output"),
    Option("progress", _SWITCH, "progress bar on stderr (only on a terminal)", "output"),
    Option("verbose", _SWITCH, "list clean runs too, and every finding in full", "output"),
    Option(
        "price_per_mtok",
        PriceKind(),
        "dollars per million tokens (IN or IN,OUT): what was not spent, in money",
        "output",
    ),
)
"""Every option, in the order ``--help`` lists them."""

_BY_NAME: Final = {option.name: option for option in OPTIONS}


def apply(values: Mapping[str, object], base: Settings, source: str) -> Settings:
    """``base`` with ``values`` (option name → raw value) parsed and set.

    ``source`` names where the values came from, for error messages (a file name, or
    ``"flags"``, in which case errors name the flag). Unknown keys raise ``ConfigError``;
    a ``[hook]`` table is ``loopfuse hook``'s (one file serves both) and is skipped. The
    detector's values are checked together, as its settings: a value they refuse is an
    error naming the keys.
    """
    changes: dict[str, object] = {}
    detector: dict[str, object] = {}
    for key, raw in values.items():
        name = key.replace("-", "_")
        if name == "hook" and isinstance(raw, dict):
            continue
        option = _BY_NAME.get(name)
        if option is None:
            raise ConfigError(f"{source}: unknown key {key!r} (see loopfuse scan --help)")
        try:
            value = option.kind.parse(raw)
        except ConfigError as exc:
            where = option.flag if source == "flags" else f"{source}: {name}"
            raise ConfigError(f"{where} {exc}") from None
        (changes if option.setting is None else detector)[name] = value
    if detector:
        try:
            changes["detector"] = detector_settings(detector, base.detector)
        except ConfigError as exc:
            where = "" if source == "flags" else f"{source}: "
            raise ConfigError(f"{where}{exc}") from None
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def value_of(settings: Settings, option: Option) -> object:
    """The value of ``option`` in ``settings``, as the option gives it: a detector tool
    list is what was added to the detector's own list, a set of names a sorted tuple.

    >>> value_of(Settings(), OPTIONS[4]), value_of(Settings(), _BY_NAME["shell_tools"])
    (3, ())
    """
    declared = option.setting
    if declared is None:
        return getattr(settings, option.name)
    value = getattr(settings.detector, declared.name)
    if declared.extends:
        assert isinstance(value, tuple)
        assert isinstance(declared.default, tuple)
        if value[: len(declared.default)] == declared.default:
            return value[len(declared.default) :]
    if isinstance(value, frozenset):
        return tuple(sorted(value))
    return value


def detector_of(settings: Settings) -> LoopDetector:
    """The :class:`~loopfuse.detector.LoopDetector` these settings describe."""
    return LoopDetector(settings.detector)


def guard_of(settings: Settings, clock: Callable[[], float]) -> Guard:
    """The :class:`~loopfuse.Guard` a scan replays one file through: the
    guards ``settings.guards`` names, on ``clock``, in ``settings.mode``. A request that
    names no session (no ``session`` in a log entry, no end user in the body) is counted
    in session ``"default"``, as if the whole file were one client's."""
    guards = settings.guards
    breaker = LoopBreaker(window=settings.window, max_repeats=settings.max_repeats, clock=clock)
    cache: DedupCache[int] = DedupCache(
        capacity=settings.cache_capacity, default_ttl=settings.cache_ttl, clock=clock
    )
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
    """Build every guard once, so that a value a guard refuses fails before the scan
    (the detector's settings are checked as they are read, by :func:`apply`).

    ``source`` names where the settings came from (a file, or ``"flags"``), for the
    message.
    """
    where = "" if source == "flags" else f"{source}: "
    try:
        guard_of(settings, lambda: 0.0)
    except ConfigError as exc:
        raise ConfigError(f"{where}{exc}") from None
