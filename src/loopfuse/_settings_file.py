"""The table of a settings file: the TOML file ``loopfuse scan --config``, ``loopfuse hook``
and :func:`loopfuse.load_settings` read (light: ``loopfuse hook`` reads it at every call)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopfuse.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MAX_SETTINGS_BYTES", "load_toml"]

MAX_SETTINGS_BYTES = 1024 * 1024
"""A settings file larger than this is refused (it is read whole, at every hook)."""


def load_toml(path: Path) -> dict[str, object]:
    """The settings table of a TOML file; ``ConfigError`` naming the file when unusable.

    The table is ``[tool.loopfuse]`` if present, else ``[loopfuse]``, else the top level.
    """
    import tomllib  # here, not above: ``loopfuse hook`` without a settings file skips it

    from loopfuse.cli.safe_files import UnsafeFileError, read_regular

    try:
        # Non-blocking, a regular file only: a FIFO named as the settings would hang the
        # hook (a link is followed: the user's settings may be a dotfile's link).
        raw = read_regular(str(path), MAX_SETTINGS_BYTES, follow=True)
        if len(raw) > MAX_SETTINGS_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_SETTINGS_BYTES} bytes")
        data = tomllib.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a TOML file") from None
    except UnsafeFileError:
        if path.is_dir():
            raise ConfigError(f"{path}: is a folder, not a TOML file") from None
        raise ConfigError(f"{path}: not a regular file (a FIFO or a device)") from None
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
