"""One option of ``loopfuse scan`` and ``loopfuse hook``: its key, its kind, its help line,
and the detector's options, made from :class:`~loopfuse.detector.DetectorSettings`' fields
(``loopfuse hook`` reads only those: this module imports nothing it does not need).

A raw value (a flag's text or a TOML value) is read by the option's kind
(:mod:`loopfuse.fields`), or refused with a :class:`~loopfuse.errors.ConfigError` saying
why; the caller names the flag or the file and key.

>>> from loopfuse.fields import Integer, Limits, Seconds
>>> Option("max_observation_steps", Integer(off=True), "", "detector").kind.parse("none") is None
True
>>> Option("window", Seconds(), "", "breaker").kind.parse("0")
Traceback (most recent call last):
    ...
loopfuse.errors.ConfigError: must be a positive number of seconds, got '0'
>>> [option.flag for option in detector_options()][:2]
['--max-strikes', '--max-observation-steps']
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from loopfuse._settings_file import MODES
from loopfuse.errors import ConfigError

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings
    from loopfuse.fields import Kind, Setting
    from loopfuse.guard.guard import Mode

__all__ = [
    "MODES",
    "Option",
    "detector_options",
    "detector_settings",
    "parse_mode",
]


class Option(NamedTuple):
    """One option: its TOML key (its flag with dashes), its kind (:mod:`loopfuse.fields`:
    how its values are read), the help line of its flag, the group ``--help`` lists it
    in, its :class:`~loopfuse.fields.Setting`, and the part of the settings that holds
    it (``"detector"``: :class:`~loopfuse.Settings`' ``detector``; ``None``: a field of the
    settings themselves)."""

    name: str
    kind: Kind
    help: str
    group: str
    setting: Setting | None = None
    part: str | None = None

    @property
    def flag(self) -> str:
        """The command-line spelling, e.g. ``--max-strikes``."""
        return "--" + self.name.replace("_", "-")


def parse_mode(value: object) -> Mode:
    """``value`` as a mode, or ``ConfigError`` naming the modes.

    >>> parse_mode("warn")
    'warn'
    """
    for mode in MODES:
        if mode == value:
            return mode
    raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {value!r}")


@cache
def detector_options() -> tuple[Option, ...]:
    """An option for each :class:`~loopfuse.detector.DetectorSettings` field that has a key,
    in their order: its key, kind and help are the field's. Read on first use: a process
    that is given no detector setting (an after-hook) does not import the detector."""
    from loopfuse.detector.settings import DetectorSettings
    from loopfuse.fields import fields_of

    return tuple(
        Option(declared.key, declared.kind, declared.help, "detector", declared, "detector")
        for declared in fields_of(DetectorSettings)
        if declared.key is not None
    )


def detector_settings(
    values: Mapping[str, object], base: DetectorSettings | None = None
) -> DetectorSettings:
    """``base`` (default: ``LoopDetector()``'s) with the detector options ``values`` (by
    key, already read by their kinds) set. A tool list (a field that ``extends``) is
    *added* to the detector's own default list. A value the settings refuse is a
    :class:`~loopfuse.errors.ConfigError` that starts ``detector settings:`` and names the
    keys.

    >>> settings = detector_settings({"max_strikes": 2, "detector_window": 24})
    >>> settings.max_strikes, settings.window
    (2, 24)
    >>> detector_settings({"detector_window": 10})
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: detector settings: error_storm must be None or (errors, \
calls) with 1 <= errors <= calls <= detector_window (10), got (10, 12)
    >>> "my_runner" in detector_settings({"shell_tools": ("my_runner",)}).shell_tools
    True
    """
    from loopfuse.detector.settings import default_settings
    from loopfuse.fields import with_keys

    return with_keys(default_settings() if base is None else base, values, "detector settings")
