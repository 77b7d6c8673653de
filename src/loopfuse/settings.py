"""One settings file for every guard and every entry point: tune it with ``loopfuse scan
--config``, then load the same file in production, in ``loopfuse hook`` and ``loopfuse
init``.

:class:`Settings` holds which guards run (``guards``) and the settings of each one, every
field declared once beside its guard (:class:`~loopfuse.BreakerSettings`,
:class:`~loopfuse.DetectorSettings`, :class:`~loopfuse.CacheSettings`,
:class:`~loopfuse.GuardSettings`). :func:`load_settings` reads the TOML file ``loopfuse
scan --config`` reads (its top level, a ``[loopfuse]`` table or ``[tool.loopfuse]``, so
``pyproject.toml`` works) with the keys of ``loopfuse scan``'s flags, and
:meth:`Settings.build_guard` builds the :class:`~loopfuse.Guard` (and its breaker,
detector and cache) that every integration takes:
``GuardTransport(inner, guard=settings.build_guard())``.

One schema: the guards' keys at the top level, and a table for what one entry point
reads alone (:data:`SECTIONS`): ``[scan]`` for ``loopfuse scan``'s own options (the
output, the replay's clock, the price; also read at the top level, as before the table
was made), ``[hook]`` for ``loopfuse hook``'s. Every entry point checks every key of
every table with this loader, with the same errors: a key is unknown everywhere or
nowhere, and an unknown one is named with the closest known one.

A key is the setting's name where it is one guard's (``max_repeats``, ``max_strikes``,
``mode``), and says whose where two guards share a name: ``window`` is the breaker's and
``detector_window`` the detector's; the cache's are ``cache_ttl``, ``cache_capacity``,
``cache_wait_timeout``, ``cache_fail_closed``; ``fail_closed`` is the guard's and
``breaker_fail_closed`` the breaker's.

What a file does not say is the library's default (``mode``: ``"warn"``, the one default
everywhere: a note first, a refusal when the loop goes on), with one choice made for
production: ``guards`` is ``["breaker", "detector"]`` (a cache answers identical requests
from memory: name ``"dedup"`` to have one). ``loopfuse scan`` replays the same, but runs
the cache too when the file names no ``guards``: what it would have saved is part of its
report (it serves nothing).

>>> settings = Settings.from_table({"max_repeats": 3, "max_strikes": "2"}, "loopfuse.toml")
>>> settings.breaker.max_repeats, settings.detector.max_strikes, settings.guard.mode
(3, 2, 'warn')
>>> Settings.from_table({"max_repeat": 3}, "loopfuse.toml")
Traceback (most recent call last):
    ...
loopfuse.errors.ConfigError: loopfuse.toml: unknown key 'max_repeat' (did you mean max_repeats?)
>>> Settings.from_table({"scan": {"format": "json"}, "hook": {"mode": "refuse"}}, "f").guards
('breaker', 'detector')
>>> guard = settings.build_guard(clock=lambda: 0.0)
>>> guard.breaker.max_repeats, guard.cache is None
(3, True)
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Self

from loopfuse._sections import ScanOptions, hook_options
from loopfuse._settings_file import load_toml
from loopfuse.breaker import BreakerSettings, LoopBreaker
from loopfuse.dedup import CacheSettings, DedupCache
from loopfuse.detector import DetectorSettings, LoopDetector
from loopfuse.detector.settings import default_settings
from loopfuse.errors import ConfigError
from loopfuse.events import EventCallback
from loopfuse.fields import (
    Names,
    Setting,
    check_fields,
    did_you_mean,
    keys_of,
    setting,
    with_keys,
)
from loopfuse.guard import Guard
from loopfuse.guard.guard import GuardSettings
from loopfuse.stores import AsyncBreakerStore, AsyncCacheStore, BreakerStore, CacheStore

__all__ = ["DEFAULT_GUARDS", "GUARDS", "PARTS", "SECTIONS", "Settings", "load_settings"]

GUARDS: Final = ("breaker", "detector", "dedup")
"""The guards a settings file may run, in the order reports list them (``dedup``: a
:class:`~loopfuse.DedupCache` of answers)."""

SECTIONS: Final = ("scan", "hook")
"""The tables of a settings file that one entry point reads alone: ``[scan]``, ``loopfuse
scan``'s own options (:func:`scan_keys`: the output, the replay's clock, the price), and
``[hook]``, ``loopfuse hook``'s (:class:`loopfuse._sections.HookOptions`). Both are
declared in :mod:`loopfuse._sections`, below this loader, and the command line builds on
those declarations. Every entry point checks both, with the same errors; the guards' keys
are at the top level."""

DEFAULT_GUARDS: Final = ("breaker", "detector")
"""The guards a file that names none runs in production: no cache unless asked for."""

PARTS: Final[Mapping[str, type]] = {
    "breaker": BreakerSettings,
    "detector": DetectorSettings,
    "cache": CacheSettings,
    "guard": GuardSettings,
}
"""The fields of :class:`Settings` that are one guard's settings, and their classes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Which guards run, and each one's settings: what a settings file says.

    Each part is that guard's own settings object (its defaults, checks and help are
    declared there).
    A file is read with :func:`load_settings` (or :meth:`from_toml`); a value refused is
    a :class:`~loopfuse.errors.ConfigError` naming the file and the key.
    """

    guards: tuple[str, ...] = setting(
        DEFAULT_GUARDS,
        Names(choices=GUARDS),
        "guards to run: breaker, detector, dedup (a cache of answers)",
    )
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    detector: DetectorSettings = field(default_factory=default_settings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    guard: GuardSettings = field(default_factory=GuardSettings)

    def __post_init__(self) -> None:
        check_fields(self)
        for part, kind in PARTS.items():
            value = getattr(self, part)
            if not isinstance(value, kind):
                raise ConfigError(f"{part} must be a {kind.__name__}, got {value!r}")

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Self:
        """The settings a TOML file says (see :func:`load_settings`)."""
        return cls.from_table(load_toml(Path(path)), os.fspath(path))

    @classmethod
    def from_table(cls, table: Mapping[str, object], source: str) -> Self:
        """The settings a file's table says (key → TOML value; ``source`` names the file
        in messages)."""
        return cls().updated(table, source)

    def updated(self, values: Mapping[str, object], source: str | None = None) -> Self:
        """These settings with ``values`` (key → raw value: a TOML value, or a flag's
        text) read by each setting's kind and set; dashes in keys are taken for
        underscores. A tool list given so is *added* to the detector's default list.
        ``source`` is the file the values come from, named in messages (``None``: they
        are the command line's flags, named as flags).

        Every key of the file is checked, the ones these settings do not use too (see
        :data:`SECTIONS`): ``loopfuse scan``'s own options (in ``[scan]``, or at the top
        level) and the ``[hook]`` table; a key none of them has is an error with the
        closest key, so a key is unknown to every entry point or to none.
        """
        keys = key_table(type(self))
        origin = "flags" if source is None else source
        given: dict[str, tuple[str, object]] = {}  # name -> (where the file says it, raw)
        for key, raw in values.items():
            name = key.replace("-", "_")
            if name in SECTIONS and source is not None:
                if not isinstance(raw, dict):
                    raise ConfigError(f"{source}: {name} must be a table ([{name}]), got {raw!r}")
                if name == "hook":
                    hook_options(raw, source)  # checked; read by loopfuse hook alone
                    continue
                inside = [(f"scan.{k}", str(k).replace("-", "_"), v) for k, v in raw.items()]
            else:
                inside = [(key, name, raw)]
            for where, inner, value in inside:
                if inner in given:
                    raise ConfigError(
                        f"{origin}: {inner} is given twice ({given[inner][0]}, {where})"
                    )
                given[inner] = (where, value)
        parts: dict[str | None, dict[str, object]] = {}
        for name, (where, raw) in given.items():
            found = keys.get(name)
            scan_only = scan_keys().get(name) if found is None else None
            if found is None and (scan_only is None or source is None):
                known = [*keys, *(scan_keys() if source is not None else ()), *SECTIONS]
                hint = did_you_mean(name, known) or " (see loopfuse scan --help)"
                raise ConfigError(f"{origin}: unknown key {where!r}{hint}")
            if where.startswith("scan.") and name not in scan_keys():
                raise ConfigError(f"{origin}: unknown key {where!r} (it goes at the top level)")
            declared = found[1] if found is not None else scan_only
            assert declared is not None
            try:
                value = declared.kind.parse(raw)
            except ConfigError as exc:
                named = declared.flag if source is None else f"{source}: {where}"
                raise ConfigError(f"{named} {exc}") from None
            if found is None:
                continue  # loopfuse scan's own option: checked, used by the scan alone
            parts.setdefault(found[0], {})[name] = value
        prefix = "" if source is None else f"{source}: "
        changes = {
            part: with_keys(getattr(self, part), given, f"{prefix}{part} settings")
            for part, given in parts.items()
            if part is not None
        }
        changed = dataclasses.replace(self, **changes) if changes else self
        own = parts.get(None)
        return changed if not own else with_keys(changed, own, f"{prefix}settings")

    def build_guard(
        self,
        *,
        clock: Callable[[], float] | None = None,
        on_event: EventCallback | None = None,
        store: (BreakerStore | AsyncBreakerStore | CacheStore | AsyncCacheStore | None) = None,
    ) -> Guard:
        """The :class:`~loopfuse.Guard` these settings describe, with the guards
        ``guards`` names (a :class:`~loopfuse.LoopBreaker`, a
        :class:`~loopfuse.detector.LoopDetector`, a :class:`~loopfuse.DedupCache` for
        ``"dedup"``), each built from its settings.

        ``clock`` is every guard's (default: ``time.monotonic``); ``on_event`` the
        guard's, which says every decision (as an integration's ``on_event``); ``store``
        is where the breaker's windows and the cache's answers live (a
        :class:`~loopfuse.stores.redis.RedisStore` or
        :class:`~loopfuse.stores.redis.AsyncRedisStore` serves both; default: in memory).
        """
        guards, ticking = self.guards, time.monotonic if clock is None else clock
        breaker = cache = None
        if "breaker" in guards:
            breaker = LoopBreaker(self.breaker, clock=ticking, store=store)  # type: ignore[arg-type]
        if "dedup" in guards:
            cache = DedupCache[Any](self.cache, clock=ticking, store=store)  # type: ignore[arg-type]
        return Guard(
            self.guard,
            breaker=breaker,
            detector=LoopDetector(self.detector) if "detector" in guards else None,
            cache=cache,
            on_event=on_event,
            clock=ticking,
        )


def load_settings(path: str | os.PathLike[str]) -> Settings:
    """The :class:`Settings` of the TOML file at ``path``: the file ``loopfuse scan
    --config`` reads (the same keys as its flags), for production. Build the guard every
    integration takes with :meth:`Settings.build_guard`:

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder, "loopfuse.toml")
    ...     _ = path.write_text("max_strikes = 2\\nmode = 'refuse'\\n")
    ...     settings = load_settings(path)
    >>> guard = settings.build_guard()
    >>> guard.mode, guard.detector.settings.max_strikes
    ('refuse', 2)

    A file that cannot be read, or a key or value refused, is a
    :class:`~loopfuse.errors.ConfigError` naming the file (and the key).
    """
    return Settings.from_toml(path)


def scan_keys() -> dict[str, Setting]:
    """``loopfuse scan``'s own options, by key (``format``, ``price_per_mtok`` ...): the
    keys of a file's ``[scan]`` table (also read at the top level, as before the table
    was made), as :class:`loopfuse._sections.ScanOptions` declares them for the scan
    too, so that every entry point checks them as the scan reads them."""
    return keys_of(ScanOptions)


def key_table(cls: type) -> dict[str, tuple[str | None, Setting]]:
    """Every key a file (or a flag) may give ``cls``: the part of the settings it sets
    (``None``: a field of ``cls`` itself) and its :class:`~loopfuse.fields.Setting`, in
    order: ``cls``'s own fields, then each part's (read once per class)."""
    known = _KEY_TABLES.get(cls)
    if known is not None:
        return known
    table: dict[str, tuple[str | None, Setting]] = {
        key: (None, declared) for key, declared in keys_of(cls).items()
    }
    for part, kind in PARTS.items():
        for key, declared in keys_of(kind).items():
            if key in table:  # pragma: no cover - a declaration's mistake, caught by tests
                raise AssertionError(f"two settings have the key {key!r}")
            table[key] = (part, declared)
    _KEY_TABLES[cls] = table
    return table


_KEY_TABLES: Final[dict[type, dict[str, tuple[str | None, Setting]]]] = {}
