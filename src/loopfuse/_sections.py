"""The tables of a settings file that one entry point reads alone, declared once: ``[scan]``
(:class:`ScanOptions`: ``loopfuse scan``'s own options) and ``[hook]``
(:class:`HookOptions`: ``loopfuse hook``'s).

They are declared here, below :mod:`loopfuse.settings`, because every entry point checks
every table of the file alike (:func:`loopfuse.load_settings` too, which uses neither):
the loader reads these declarations, and the command line builds on them (its scan
settings are a :class:`loopfuse.Settings` and a :class:`ScanOptions`; the hook reads its
table with :func:`hook_options`), so the library never imports the command line.

Light, as ``loopfuse hook`` reads it at every tool call given a settings file: it imports
:mod:`loopfuse.fields` and nothing of the guards.

>>> [key for key in keys_of(ScanOptions)][:3]
['turn_seconds', 'path', 'format']
>>> hook_options({"lock_timeout": 2}, "f.toml").lock_timeout
2.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from loopfuse._settings_file import MODES
from loopfuse.errors import ConfigError
from loopfuse.fields import (
    Choice,
    Flag,
    Kind,
    Seconds,
    SettingError,
    Text,
    check_fields,
    did_you_mean,
    keys_of,
    setting,
    with_keys,
)

__all__ = ["HookOptions", "Price", "PriceKind", "ScanOptions", "hook_options"]


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens: one price, or one for input and one for output (the
    value of ``loopfuse scan``'s ``price_per_mtok``)."""

    input: float
    output: float

    @classmethod
    def parse(cls, raw: object) -> Price:
        """``"3"``, ``"3,15"`` (input, output), a number, or a TOML pair ``[3, 15]``.

        >>> Price.parse("3,15"), Price.parse(2)
        (Price(input=3.0, output=15.0), Price(input=2.0, output=2.0))
        """
        items = raw.split(",") if isinstance(raw, str) else raw
        if not isinstance(items, list | tuple):
            items = [items]
        values: list[float] = []
        for item in items:
            try:
                number = float(item.strip() if isinstance(item, str) else item)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                number = math.nan
            if isinstance(item, bool) or not math.isfinite(number) or number < 0:
                break
            values.append(number)
        if len(values) != len(items) or len(values) not in (1, 2):
            raise ConfigError(
                "must be dollars per million tokens, one price or input,output "
                f"(e.g. 3 or 3,15), got {raw!r}"
            )
        return cls(values[0], values[-1])

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        """Dollars for these tokens."""
        return (tokens_in * self.input + tokens_out * self.output) / 1_000_000

    def __str__(self) -> str:
        if self.input == self.output:
            return f"${self.input:g}/Mtok"
        return f"${self.input:g}/${self.output:g} per Mtok in/out"


class PriceKind(Kind):
    """Dollars per million tokens (see :meth:`Price.parse`), or ``none``: an output option
    of ``loopfuse scan``."""

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


@dataclass(frozen=True, kw_only=True)
class ScanOptions:
    """``loopfuse scan``'s own options: the keys of a file's ``[scan]`` table (also read
    at the top level, as before the table was made), and the scan's flags. The command
    line's scan settings are a :class:`loopfuse.Settings` with these besides; the loader
    checks a file's keys with them.

    ``turn_seconds`` is how far the fake clock moves per replayed request when the input
    carries no time of its own.

    Not slotted, so that a slotted settings class can take these fields and the guards'
    together (two slotted bases cannot be combined).

    >>> ScanOptions(format="json", turn_seconds=1).turn_seconds
    1.0
    """

    turn_seconds: float = setting(
        2.0, Seconds(), "replay: fake-clock seconds per request without a time of its own"
    )
    path: str = setting("", Text(), "replay: request path for bodies that carry none")
    format: str = setting("text", Choice(("text", "json", "markdown", "html")), "output format")
    color: str = setting("auto", Choice(("auto", "always", "never")), "colour in text output")
    progress: bool = setting(True, Flag(), "progress bar on stderr (only on a terminal)")
    verbose: bool = setting(False, Flag(), "list clean runs too, and every finding in full")
    price_per_mtok: Price | None = setting(  # noqa: RUF009 (a field, as every setting())
        None,
        PriceKind(),
        "dollars per million tokens (IN or IN,OUT): what was not spent, in money",
    )

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class HookOptions:
    """The ``[hook]`` table of a settings file: what only ``loopfuse hook`` reads (its
    flags of the same names win). Declared as every setting is (:mod:`loopfuse.fields`),
    so that every entry point checks the table alike, :func:`loopfuse.load_settings` and
    ``loopfuse scan --config`` included (they use none of it).

    >>> HookOptions(mode="refuse", lock_timeout=2).lock_timeout
    2.0
    >>> hook_options({"lock_timeout": 90}, "f.toml")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: f.toml: hook.lock_timeout must be at most 60 seconds, got 90
    >>> hook_options({"mdoe": "refuse"}, "f.toml")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: f.toml: unknown key 'hook.mdoe' (did you mean mode?)
    """

    mode: str = setting(
        "warn",
        Choice(MODES),
        "what a loop gets in the hook (default: the file's mode, else warn)",
    )
    end_session: bool = setting(
        False, Flag(), "end the session when a loop goes on after its refusal (not Codex)"
    )
    note_early: bool = setting(
        True,
        Flag(),
        "mode warn: note a loop one count before the refusal (default: the file's "
        "note_early, else on)",
    )
    state_dir: str | None = setting(
        None, Text(off=True, blank=False), "the folder of the sessions and hook.log"
    )
    lock_timeout: float = setting(
        5.0, Seconds(zero=True, maximum=60.0), "seconds to wait for a session's lock"
    )

    def __post_init__(self) -> None:
        check_fields(self)


def hook_options(table: Mapping[str, object], source: str) -> HookOptions:
    """The ``[hook]`` table ``table`` of the file ``source``, read and checked; a key or
    a value refused is a :class:`~loopfuse.errors.ConfigError` naming the file and
    ``hook.KEY``."""
    declared = keys_of(HookOptions)
    values: dict[str, object] = {}
    for key, raw in table.items():
        name = str(key).replace("-", "_")
        found = declared.get(name)
        if found is None:
            raise ConfigError(f"{source}: unknown key 'hook.{key}'{did_you_mean(name, declared)}")
        try:
            values[name] = found.kind.parse(raw)
        except ConfigError as exc:
            raise ConfigError(f"{source}: hook.{name} {exc}") from None
    return with_keys(HookOptions(), values, f"{source}: hook settings")
