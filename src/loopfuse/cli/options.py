"""One option of ``loopfuse scan`` and ``loopfuse hook``: its key, its kind, its help line,
and the detector's options, made from :class:`~loopfuse.detector.DetectorSettings`' fields.

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
from typing import TYPE_CHECKING, Final, NamedTuple

from loopfuse.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.detector.settings import DetectorSettings
    from loopfuse.fields import Kind, Setting
    from loopfuse.guard.guard import Mode

__all__ = [
    "GUARDS",
    "MODES",
    "Option",
    "detector_key",
    "detector_options",
    "detector_settings",
    "load_toml",
    "parse_mode",
]


class Option(NamedTuple):
    """One option: its TOML key (its flag with dashes), its kind (:mod:`loopfuse.fields`:
    how its values are read), the help line of its flag, the group ``--help`` lists it
    in, and, for a setting of a guard's settings object, that :class:`~loopfuse.fields.Setting`."""

    name: str
    kind: Kind
    help: str
    group: str
    setting: Setting | None = None

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


@cache
def detector_options() -> tuple[Option, ...]:
    """An option for each :class:`~loopfuse.detector.DetectorSettings` field that has a key,
    in their order: its key, kind and help are the field's. Read on first use: a process
    that is given no detector setting (an after-hook) does not import the detector."""
    from loopfuse.detector.settings import DetectorSettings
    from loopfuse.fields import fields_of

    return tuple(
        Option(declared.key, declared.kind, declared.help, "detector", declared)
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
    from loopfuse.fields import SettingError, replace

    by_key = {option.name: option.setting for option in detector_options()}
    changes: dict[str, object] = {}
    for key, value in values.items():
        declared = by_key[key]
        assert declared is not None
        if declared.extends:
            assert isinstance(value, tuple)
            assert isinstance(declared.default, tuple)
            value = (*declared.default, *value)
        changes[declared.name] = value
    try:
        return replace(default_settings() if base is None else base, changes)
    except SettingError as exc:
        raise ConfigError(f"detector settings: {exc.named(detector_key)}") from None
    except ConfigError as exc:  # a classifier's own check of its patterns
        raise ConfigError(f"detector settings: {exc}") from None


def detector_key(name: str) -> str:
    """The key of the :class:`~loopfuse.detector.DetectorSettings` field ``name`` (its
    own name when it has no other).

    >>> detector_key("window"), detector_key("max_strikes")
    ('detector_window', 'max_strikes')
    """
    for option in detector_options():
        if option.setting is not None and option.setting.name == name:
            return option.name
    return name
