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
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from loopfuse import DedupCache, LoopBreaker
from loopfuse.cli.options import Option, parse_value
from loopfuse.cli.tokens import Price
from loopfuse.detector import LoopDetector
from loopfuse.detector.settings import default_settings
from loopfuse.errors import ConfigError
from loopfuse.integrations import Guard

__all__ = [
    "GUARDS",
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

GUARDS: Final = ("breaker", "detector", "dedup")
"""The guards a scan runs, in the order the report lists them."""

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
    window: float = _BREAKER.window
    max_repeats: int = _BREAKER.max_repeats
    max_strikes: int | None = _D.max_strikes
    max_observation_steps: int | None = _D.max_observation_steps
    max_cycle_period: int = _D.max_cycle_period
    max_cycle_laps: int = _D.max_cycle_laps
    max_error_streak: int | None = _D.max_error_streak
    max_near_repeats: int | None = _D.max_near_repeats
    max_unchanged_checks: int | None = _D.max_unchanged_checks
    error_storm: tuple[int, int] | None = _D.error_storm
    max_stagnation_steps: int | None = _D.max_stagnation_steps
    error_aware: bool = _D.error_aware
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


OPTIONS: Final = (
    Option("guards", "names", "guards to run", "scan", GUARDS),
    Option("window", "seconds", "breaker: sliding window, seconds", "breaker"),
    Option("max_repeats", "int", "breaker: identical requests a window may hold", "breaker"),
    Option("max_strikes", "int?", "identical batches allowed in a row (none: off)", "detector"),
    Option(
        "max_observation_steps",
        "int?",
        "the same, for read-only tools; also the ceiling (none: off)",
        "detector",
    ),
    Option("max_cycle_period", "int", "longest cycle looked for (<2: off)", "detector"),
    Option("max_cycle_laps", "int", "laps of a cycle allowed", "detector"),
    Option("max_error_streak", "count?", "the same error allowed in a row (none: off)", "detector"),
    Option(
        "max_near_repeats",
        "count?",
        "near-identical calls allowed in a row (none: off)",
        "detector",
    ),
    Option(
        "max_unchanged_checks",
        "count?",
        "runs of a check unchanged by edits allowed (none: off)",
        "detector",
    ),
    Option("error_storm", "pair?", "ERRORS,CALLS: that many of the last calls failed", "detector"),
    Option("max_stagnation_steps", "int?", "same prose answer allowed (none: off)", "detector"),
    Option("error_aware", "bool", "a repeated error is refused one repeat earlier", "detector"),
    Option(
        "normalize_answers", "bool", "answers differing only in noise count as the same", "detector"
    ),
    Option(
        "error_flags", "bool", "a result flagged failed is an error (is_error, isError)", "detector"
    ),
    Option(
        "framework_errors",
        "bool",
        "frameworks' unknown-tool / invalid-arguments answers are errors",
        "detector",
    ),
    Option("detector_window", "int", "tool-call batches the detector remembers", "detector"),
    Option("observation_tools", "names", "more read-only tool names", "detector"),
    Option("costly_tools", "names", "more costly read-only tool names", "detector"),
    Option(
        "shell_tools", "names", "more shell tool names (their command lines are read)", "detector"
    ),
    Option("read_only_commands", "names", "more read-only command patterns", "detector"),
    Option("tool_limits", "limits", "NAME=N,...: per-tool caps on identical calls", "detector"),
    Option("ignore_tools", "names", "tools never counted", "detector"),
    Option("cache_ttl", "seconds", "seconds an answer stays cached", "dedup"),
    Option("cache_capacity", "int", "answers the cache holds", "dedup"),
    Option("cache_streams", "bool", "cache streamed answers too", "dedup"),
    Option("cache_sampled", "bool", "serve sampled requests (temperature > 0) too", "dedup"),
    Option(
        "turn_seconds",
        "seconds",
        "replay: fake-clock seconds per request without a time of its own",
        "scan",
    ),
    Option("path", "str", "replay: request path for bodies that carry none", "scan"),
    Option("format", "choice", "output format", "output", ("text", "json", "markdown", "html")),
    Option("color", "choice", "colour in text output", "output", ("auto", "always", "never")),
    Option("progress", "bool", "progress bar on stderr (only on a terminal)", "output"),
    Option("verbose", "bool", "list clean runs too, and every finding in full", "output"),
    Option(
        "price_per_mtok",
        "price?",
        "dollars per million tokens (IN or IN,OUT): what was not spent, in money",
        "output",
    ),
)
"""Every option, in the order ``--help`` lists them."""

_BY_NAME: Final = {option.name: option for option in OPTIONS}


def apply(values: Mapping[str, object], base: Settings, source: str) -> Settings:
    """``base`` with ``values`` (option name → raw value) parsed and set.

    ``source`` names where the values came from, for error messages (a file name, or
    ``"flags"``, in which case errors name the flag). Unknown keys raise ``ConfigError``.
    """
    changes: dict[str, object] = {}
    for key, raw in values.items():
        name = key.replace("-", "_")
        option = _BY_NAME.get(name)
        if option is None:
            raise ConfigError(f"{source}: unknown key {key!r} (see loopfuse scan --help)")
        try:
            changes[name] = parse_value(option, raw)
        except ConfigError as exc:
            where = option.flag if source == "flags" else f"{source}: {name}"
            raise ConfigError(f"{where} {exc}") from None
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def load_toml(path: Path) -> dict[str, object]:
    """The option table of a TOML file; ``ConfigError`` naming the file when unusable.

    The table is ``[tool.loopfuse]`` if present, else ``[loopfuse]``, else the top level.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a TOML file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table: object = data
    tool = data.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("loopfuse"), dict):
        table = tool["loopfuse"]
    elif isinstance(data.get("loopfuse"), dict):
        table = data["loopfuse"]
    assert isinstance(table, dict)
    return {str(key): value for key, value in table.items()}


def detector_of(settings: Settings) -> LoopDetector:
    """The :class:`~loopfuse.detector.LoopDetector` these settings describe."""
    return LoopDetector(
        max_strikes=settings.max_strikes,
        observation_tools=(*_D.observation_tools, *settings.observation_tools),
        max_observation_steps=settings.max_observation_steps,
        costly_tools=(*_D.costly_tools, *settings.costly_tools),
        shell_tools=(*_D.shell_tools, *settings.shell_tools),
        read_only_commands=(*_D.read_only_commands, *settings.read_only_commands),
        max_cycle_period=settings.max_cycle_period,
        max_cycle_laps=settings.max_cycle_laps,
        normalize_answers=settings.normalize_answers,
        error_aware=settings.error_aware,
        error_flags=settings.error_flags,
        framework_errors=settings.framework_errors,
        max_error_streak=settings.max_error_streak,
        max_near_repeats=settings.max_near_repeats,
        max_unchanged_checks=settings.max_unchanged_checks,
        error_storm=settings.error_storm,
        max_stagnation_steps=settings.max_stagnation_steps,
        tool_limits=dict(settings.tool_limits),
        ignore_tools=settings.ignore_tools,
        window=settings.detector_window,
    )


def guard_of(settings: Settings, clock: Callable[[], float]) -> Guard:
    """The :class:`~loopfuse.integrations.Guard` a scan replays one file through: the
    guards ``settings.guards`` names, on ``clock``, in ``refuse`` mode. A request that
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
