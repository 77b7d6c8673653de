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
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from loopfuse import DedupCache, LoopBreaker
from loopfuse.cli.tokens import Price
from loopfuse.detector import LoopDetector
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
_D: Final = LoopDetector().settings
_CACHE: Final[DedupCache[int]] = DedupCache()


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
    detector_window: int = _D.window
    observation_tools: tuple[str, ...] = field(default=())
    costly_tools: tuple[str, ...] = field(default=())
    shell_tools: tuple[str, ...] = field(default=())
    read_only_commands: tuple[str, ...] = field(default=())
    tool_limits: tuple[tuple[str, int], ...] = field(default=())
    ignore_tools: tuple[str, ...] = field(default=())
    cache_ttl: float = _CACHE.default_ttl
    cache_capacity: int = _CACHE.capacity
    cache_streams: bool = False
    cache_sampled: bool = False
    turn_seconds: float = 2.0
    path: str = ""
    format: str = "text"
    color: str = "auto"
    progress: bool = True
    verbose: bool = False
    price_per_mtok: Price | None = None


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its TOML key, its value type, and the help line of its flag.

    ``kind`` is ``int`` (>= 0), ``int?`` (an int, or ``none`` for off), ``count?``
    (an int >= 1, or ``none``), ``seconds`` (a positive, finite number), ``bool``,
    ``names`` (a comma-separated list, or a TOML array of strings), ``pair?`` (two ints,
    ``10,12`` or ``[10, 12]``, or ``none``), ``limits`` (``name=N,...`` or a TOML table),
    ``price?`` (see :meth:`~loopfuse.cli.tokens.Price.parse`, or ``none``), ``choice``
    or ``str``.
    """

    name: str
    kind: str
    help: str
    group: str
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        """The command-line spelling, e.g. ``--max-strikes``."""
        return "--" + self.name.replace("_", "-")


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


def parse_value(option: Option, raw: object) -> object:
    """``raw`` (a flag's text, or a TOML value) as the option's type; else ``ConfigError``.

    >>> parse_value(_BY_NAME["max_observation_steps"], "none") is None
    True
    >>> parse_value(_BY_NAME["window"], "0")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: must be a positive number of seconds, got '0'
    """
    kind = option.kind
    if kind.endswith("?") and (raw is None or raw is False or _text(raw) == "none"):
        return None
    if kind in ("int", "int?", "count?"):
        value = _integer(raw)
        least = 1 if kind == "count?" else 0
        if value is None or value < least:
            extra = " or none" if kind.endswith("?") else ""
            raise ConfigError(f"must be an integer >= {least}{extra}, got {raw!r}")
        return value
    if kind == "pair?":
        return _pair(raw)
    if kind == "limits":
        return _limits(raw)
    if kind == "price?":
        return Price.parse(raw)
    if kind == "seconds":
        seconds = _number(raw)
        if seconds is None or not math.isfinite(seconds) or seconds <= 0:
            raise ConfigError(f"must be a positive number of seconds, got {raw!r}")
        return seconds
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if _text(raw) in ("true", "yes", "on", "1"):
            return True
        if _text(raw) in ("false", "no", "off", "0"):
            return False
        raise ConfigError(f"must be true or false, got {raw!r}")
    if kind == "names":
        return _names(option, raw)
    if not isinstance(raw, str):
        raise ConfigError(f"must be a string, got {raw!r}")
    if option.choices and raw not in option.choices:
        raise ConfigError(f"must be one of {', '.join(option.choices)}, got {raw!r}")
    return raw


def _text(raw: object) -> str | None:
    return raw.strip().lower() if isinstance(raw, str) else None


def _integer(raw: object) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip(), 10)
        except ValueError:
            return None
    return None


def _number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            return None
    return None


def _pair(raw: object) -> tuple[int, int]:
    items = raw.split(",") if isinstance(raw, str) else raw
    pair = tuple(_integer(item) for item in items) if isinstance(items, list) else ()
    if len(pair) != 2 or any(value is None or value < 1 for value in pair):
        raise ConfigError(f"must be two integers >= 1 (e.g. 10,12) or none, got {raw!r}")
    return pair  # type: ignore[return-value]


def _limits(raw: object) -> tuple[tuple[str, int], ...]:
    pairs: list[tuple[object, object]] = []
    if isinstance(raw, str):
        for item in filter(None, (part.strip() for part in raw.split(","))):
            key, equals, number = item.partition("=")
            pairs.append((key.strip(), number if equals else None))
    elif isinstance(raw, dict):
        pairs = list(raw.items())
    else:
        pairs = [(None, None)]
    out: dict[str, int] = {}
    for name, value in pairs:
        count = _integer(value)
        if not isinstance(name, str) or not name or count is None or count < 0:
            raise ConfigError(f"must be NAME=N pairs with N >= 0 (e.g. deploy=1), got {raw!r}")
        out[name] = count
    return tuple(sorted(out.items()))


def _names(option: Option, raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        items: list[object] = [part.strip() for part in raw.split(",") if part.strip()]
    elif isinstance(raw, list):
        items = list(raw)
    else:
        raise ConfigError(f"must be a list of names, got {raw!r}")
    if not all(isinstance(item, str) and item for item in items):
        raise ConfigError(f"must be a list of names, got {raw!r}")
    names = tuple(dict.fromkeys(str(item) for item in items))
    if option.choices:
        unknown = [name for name in names if name not in option.choices]
        if unknown or not names:
            raise ConfigError(
                f"must name some of {', '.join(option.choices)}, got {', '.join(unknown) or '[]'}"
            )
    return names


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
    from loopfuse.detector.settings import DetectorSettings

    defaults = DetectorSettings()
    return LoopDetector(
        max_strikes=settings.max_strikes,
        observation_tools=(*defaults.observation_tools, *settings.observation_tools),
        max_observation_steps=settings.max_observation_steps,
        costly_tools=(*defaults.costly_tools, *settings.costly_tools),
        shell_tools=(*defaults.shell_tools, *settings.shell_tools),
        read_only_commands=(*defaults.read_only_commands, *settings.read_only_commands),
        max_cycle_period=settings.max_cycle_period,
        max_cycle_laps=settings.max_cycle_laps,
        normalize_answers=settings.normalize_answers,
        error_aware=settings.error_aware,
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
