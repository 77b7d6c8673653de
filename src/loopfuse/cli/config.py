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
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from loopfuse import DedupCache, LoopBreaker
from loopfuse.detector import LoopDetector
from loopfuse.errors import ConfigError

__all__ = [
    "GUARDS",
    "OPTIONS",
    "Option",
    "Settings",
    "apply",
    "check",
    "detector_of",
    "load_toml",
    "parse_value",
]

GUARDS: Final = ("breaker", "detector", "dedup")
"""The guards a scan runs, in the order the report lists them."""

_BREAKER: Final = LoopBreaker()
_DETECTOR: Final = LoopDetector()
_CACHE: Final[DedupCache[int]] = DedupCache()


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a scan can be told; the defaults are the guards' defaults.

    ``observation_tools`` and ``costly_tools`` are *added* to the detector's default
    lists. ``turn_seconds`` is how far the fake clock moves per replayed request when
    the input carries no time of its own.
    """

    guards: tuple[str, ...] = GUARDS
    window: float = _BREAKER.window
    max_repeats: int = _BREAKER.max_repeats
    max_strikes: int | None = _DETECTOR.max_strikes
    max_observation_steps: int | None = _DETECTOR.max_observation_steps
    max_cycle_period: int = _DETECTOR.max_cycle_period
    max_cycle_laps: int = _DETECTOR.max_cycle_laps
    max_stagnation_steps: int | None = _DETECTOR.max_stagnation_steps
    normalize_answers: bool = _DETECTOR.normalize_answers
    observation_tools: tuple[str, ...] = field(default=())
    costly_tools: tuple[str, ...] = field(default=())
    cache_ttl: float = _CACHE.default_ttl
    cache_capacity: int = _CACHE.capacity
    turn_seconds: float = 2.0
    path: str = ""
    format: str = "text"
    color: str = "auto"
    progress: bool = True


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its TOML key, its value type, and the help line of its flag.

    ``kind`` is ``int`` (>= 0), ``int?`` (an int, or ``none`` for off), ``seconds``
    (a positive, finite number), ``bool``, ``names`` (a comma-separated list, or a TOML
    array of strings), ``choice`` or ``str``.
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
    Option("guards", "names", "guards to run (default: all three)", "scan", GUARDS),
    Option("window", "seconds", "breaker: sliding window, seconds", "breaker"),
    Option("max_repeats", "int", "breaker: identical requests a window may hold", "breaker"),
    Option("max_strikes", "int", "detector: identical batches allowed in a row", "detector"),
    Option(
        "max_observation_steps",
        "int?",
        "detector: the same, for read-only tools; also the ceiling (none: off)",
        "detector",
    ),
    Option("max_cycle_period", "int", "detector: longest cycle looked for (<2: off)", "detector"),
    Option("max_cycle_laps", "int", "detector: laps of a cycle allowed", "detector"),
    Option(
        "max_stagnation_steps",
        "int?",
        "detector: same prose answer allowed (none: off)",
        "detector",
    ),
    Option(
        "normalize_answers",
        "bool",
        "detector: answers differing only in noise count as the same",
        "detector",
    ),
    Option("observation_tools", "names", "detector: more read-only tool names", "detector"),
    Option("costly_tools", "names", "detector: more costly read-only tool names", "detector"),
    Option("cache_ttl", "seconds", "dedup: seconds an answer stays cached", "dedup"),
    Option("cache_capacity", "int", "dedup: answers the cache holds", "dedup"),
    Option(
        "turn_seconds",
        "seconds",
        "replay: fake-clock seconds per request without a time of its own",
        "scan",
    ),
    Option("path", "str", "replay: request path for bodies that carry none", "scan"),
    Option("format", "choice", "output format", "output", ("text", "json", "markdown")),
    Option("color", "choice", "colour in text output", "output", ("auto", "always", "never")),
    Option("progress", "bool", "progress bar on stderr (only on a terminal)", "output"),
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
    if kind in ("int", "int?"):
        if kind == "int?" and (raw is None or raw is False or _text(raw) == "none"):
            return None
        value = _integer(raw)
        if value is None or value < 0:
            extra = " or none" if kind == "int?" else ""
            raise ConfigError(f"must be an integer >= 0{extra}, got {raw!r}")
        return value
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
    from loopfuse.detector import DEFAULT_COSTLY_TOOLS, DEFAULT_OBSERVATION_TOOLS

    return LoopDetector(
        max_strikes=settings.max_strikes,
        observation_tools=(*DEFAULT_OBSERVATION_TOOLS, *settings.observation_tools),
        max_observation_steps=settings.max_observation_steps,
        costly_tools=(*DEFAULT_COSTLY_TOOLS, *settings.costly_tools),
        max_cycle_period=settings.max_cycle_period,
        max_cycle_laps=settings.max_cycle_laps,
        normalize_answers=settings.normalize_answers,
        max_stagnation_steps=settings.max_stagnation_steps,
    )


def check(settings: Settings) -> None:
    """Build every guard once, so that a value a guard refuses fails before the scan."""
    detector_of(settings)
    LoopBreaker(window=settings.window, max_repeats=settings.max_repeats)
    DedupCache[int](capacity=settings.cache_capacity, default_ttl=settings.cache_ttl)
