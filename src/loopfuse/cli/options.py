"""One option of ``loopfuse scan``: its key, its kind, and a raw value (a flag's text or
a TOML value) read as that kind, or a :class:`~loopfuse.errors.ConfigError` saying why
not.

>>> parse_value(Option("max_observation_steps", "int?", "", "detector"), "none") is None
True
>>> parse_value(Option("window", "seconds", "", "breaker"), "0")
Traceback (most recent call last):
    ...
loopfuse.errors.ConfigError: must be a positive number of seconds, got '0'
>>> parse_value(Option("tool_limits", "limits", "", "detector"), "deploy=1, x=3")
(('deploy', 1), ('x', 3))
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, NamedTuple

from loopfuse.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.guard.guard import Mode

__all__ = [
    "GUARDS",
    "MODES",
    "OPTIONS",
    "Option",
    "detector_arguments",
    "load_toml",
    "parse_mode",
    "parse_value",
]


class Option(NamedTuple):
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


GUARDS: Final = ("breaker", "detector", "dedup")
"""The guards a scan runs, in the order the report lists them."""

MODES: Final[tuple[Mode, ...]] = ("refuse", "warn", "note")
"""The modes a guard runs in (the integrations' ``Guard``, a scan's replay, the hook)."""


def parse_mode(value: object) -> Mode:
    """``value`` as a mode, or ``ConfigError`` naming the modes.

    >>> parse_mode("warn")
    'warn'
    """
    for mode in MODES:
        if mode == value:
            return mode
    raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {value!r}")


OPTIONS: Final = (
    Option("guards", "names", "guards to run", "scan", GUARDS),
    Option(
        "mode",
        "choice",
        "the guard's mode replayed: refuse each loop; warn: a note first, a stop when the "
        "loop goes on (the integrations' default); note: a note every time",
        "scan",
        MODES,
    ),
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
    Option(
        "max_unread_edit_checks",
        "count?",
        "runs of a check unchanged by edits of files it does not read (none: off)",
        "detector",
    ),
    Option("error_storm", "pair?", "ERRORS,CALLS: that many of the last calls failed", "detector"),
    Option("max_stagnation_steps", "int?", "same prose answer allowed (none: off)", "detector"),
    Option("error_aware", "bool", "a repeated error is refused one repeat earlier", "detector"),
    Option(
        "editor_aware", "bool", "editor tools judged by their arguments (view: a read)", "detector"
    ),
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


def load_toml(path: Path) -> dict[str, object]:
    """The option table of a TOML file; ``ConfigError`` naming the file when unusable.

    The table is ``[tool.loopfuse]`` if present, else ``[loopfuse]``, else the top level.
    """
    import tomllib  # here, not above: ``loopfuse hook`` without a settings file skips it

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


def parse_value(option: Option, raw: object) -> object:
    """``raw`` (a flag's text, or a TOML value) as the option's type; else ``ConfigError``."""
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
        from loopfuse.cli.tokens import Price  # here: `loopfuse hook` has no prices

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


def detector_arguments(values: Mapping[str, object]) -> dict[str, object]:
    """:class:`~loopfuse.detector.LoopDetector` keyword arguments from parsed detector
    options (option name → value; a missing option keeps the detector's default). The
    tool lists are *added* to the detector's own (see :class:`~loopfuse.cli.config.Settings`).

    >>> detector_arguments({"max_strikes": 2, "detector_window": 10, "tool_limits": (("x", 1),)})
    {'max_strikes': 2, 'window': 10, 'tool_limits': {'x': 1}}
    """
    from loopfuse.detector.settings import default_settings

    defaults = default_settings()
    arguments: dict[str, object] = {}
    for name, value in values.items():
        if name in _ADDED_TO_DEFAULTS:
            assert isinstance(value, tuple)
            arguments[name] = (*getattr(defaults, name), *value)
        elif name == "tool_limits":
            assert isinstance(value, tuple)
            arguments[name] = dict(value)
        elif name == "detector_window":
            arguments["window"] = value
        else:
            arguments[name] = value
    return arguments


_ADDED_TO_DEFAULTS: Final = frozenset(
    {"observation_tools", "costly_tools", "shell_tools", "read_only_commands"}
)
