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
from dataclasses import dataclass

from loopfuse.cli.tokens import Price
from loopfuse.errors import ConfigError

__all__ = ["Option", "parse_value"]


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
