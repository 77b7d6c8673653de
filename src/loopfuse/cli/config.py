"""Settings of ``loopfuse scan``: every threshold, from flags or a TOML file, one key each.

Every option has one name. On the command line it is ``--name-with-dashes``; in a TOML
file (``--config FILE``) it is ``name_with_underscores`` (dashes are accepted too), at the
top level, in a ``[loopfuse]`` table, or in ``[tool.loopfuse]`` (so ``pyproject.toml``
works); the scan's own options may also be in a ``[scan]`` table (see
:data:`loopfuse.settings.SECTIONS`). Flags override the file; the file overrides the
defaults. The guards' options are
their settings' fields, read as :func:`loopfuse.load_settings` reads the same file for
production (:class:`Settings` is a :class:`loopfuse.Settings` with the scan's own options
besides); the scan's own are declared the same way, once, as the ``[scan]`` table's
fields (:class:`loopfuse._sections.ScanOptions`), where the loader reads them too.

>>> settings = Settings()
>>> settings.breaker.max_repeats, settings.detector.max_strikes, settings.turn_seconds
(5, 3, 2.0)
>>> apply({"max_strikes": "2", "guards": "detector,dedup"}, Settings(), "flags").guards
('detector', 'dedup')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from loopfuse import Guard, LoopDetector
from loopfuse import Settings as GuardFile
from loopfuse._sections import ScanOptions
from loopfuse.cli.options import Option
from loopfuse.fields import Names, setting
from loopfuse.settings import GUARDS, key_table

__all__ = [
    "GROUPS",
    "GUARDS",
    "OPTIONS",
    "Option",
    "Settings",
    "apply",
    "detector_of",
    "guard_of",
    "value_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings(ScanOptions, GuardFile):
    """Everything a scan can be told: a :class:`loopfuse.Settings` (which guards run, each
    one's settings) and the scan's own options (:class:`loopfuse._sections.ScanOptions`,
    after the guards' in every list). Its defaults are the library's, but for
    ``guards``: a scan runs the cache too (what it would have saved is part of the
    report; it serves nothing).

    A tool list given as an option is *added* to the detector's default list.
    """

    guards: tuple[str, ...] = setting(
        GUARDS, Names(choices=GUARDS), "guards to run: breaker, detector, dedup"
    )

    def __post_init__(self) -> None:
        GuardFile.__post_init__(self)  # every field checked, the scan's own too


_GROUPS: Final = {"breaker": "breaker", "detector": "detector", "cache": "dedup", "guard": "guard"}
_OUTPUT: Final = frozenset({"format", "color", "progress", "verbose", "price_per_mtok"})
GROUPS: Final = ("scan", "breaker", "detector", "dedup", "guard", "output")
"""The groups of options, in the order ``--help`` lists them."""


def _group(part: str | None, key: str) -> str:
    if part is not None:
        return _GROUPS[part]
    return "output" if key in _OUTPUT else "scan"


OPTIONS: Final = tuple(
    sorted(
        (
            Option(key, declared.kind, declared.help, _group(part, key), declared, part)
            for key, (part, declared) in key_table(Settings).items()
        ),
        key=lambda option: GROUPS.index(option.group),
    )
)
"""Every option, by group (:data:`GROUPS`), each group in the order of its fields."""


def apply(values: Mapping[str, object], base: Settings, source: str) -> Settings:
    """``base`` with ``values`` (option name → raw value) parsed and set.

    ``source`` names where the values came from, for error messages (a file name, or
    ``"flags"``, in which case errors name the flag). Unknown keys raise ``ConfigError``;
    a ``[hook]`` table is ``loopfuse hook``'s (one file serves both): checked, and left
    to the hook. Each
    guard's values are checked together, as its settings: a value they refuse is an
    error naming the keys (see :meth:`loopfuse.Settings.updated`).
    """
    return base.updated(values, None if source == "flags" else source)


def value_of(settings: Settings, option: Option) -> object:
    """The value of ``option`` in ``settings``, as the option gives it: a detector tool
    list is what was added to the detector's own list, a set of names a sorted tuple.

    >>> by_key = {option.name: option for option in OPTIONS}
    >>> value_of(Settings(), by_key["max_strikes"]), value_of(Settings(), by_key["shell_tools"])
    (3, ())
    """
    declared = option.setting
    assert declared is not None
    holder = settings if option.part is None else getattr(settings, option.part)
    value = getattr(holder, declared.name)
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
    """The :class:`~loopfuse.Guard` a scan replays one file through: the one
    :meth:`loopfuse.Settings.build_guard` builds in production, on ``clock``. A request
    that names no session (no ``session`` in a log entry, no end user in the body) is
    counted in session ``"default"`` (or the settings' ``shared_session``), as if the
    whole file were one client's."""
    if settings.guard.shared_session is None:
        one_client = dataclasses.replace(settings.guard, shared_session="default")
        settings = dataclasses.replace(settings, guard=one_client)
    return settings.build_guard(clock=clock)
