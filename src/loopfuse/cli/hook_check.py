"""What ``loopfuse hook`` will make of a command line, checked without running it.

``loopfuse init`` checks the command it is about to install and ``loopfuse doctor`` the
one installed: a hook whose flags or settings file are refused allows every call (it
fails open), so neither lets that pass in silence. The check is the hook's own reading
(:func:`loopfuse.cli.hook.settings_of`, the loader of every entry point); it writes
nothing (no memo in the state folder).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loopfuse.cli.hook import HookSettings, read_flags, settings_of
from loopfuse.errors import ConfigError

__all__ = ["check_hook_command"]


def check_hook_command(flags: Sequence[str], env: Mapping[str, str]) -> HookSettings:
    """The settings ``loopfuse hook`` reads from its flags ``flags`` and the settings file
    they name (without ``--config``: ``$LOOPFUSE_CONFIG`` in ``env``), or the
    :class:`~loopfuse.errors.ConfigError` it would meet at every call; a file named by
    the variable is said to be.

    >>> check_hook_command(["--agent", "codex", "--mode", "refuse"], {}).mode
    'refuse'
    >>> check_hook_command(["--max-strike", "3"], {})
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: loopfuse hook: unknown argument '--max-strike'
    """
    read = read_flags(flags)
    named = env.get("LOOPFUSE_CONFIG")
    try:
        return settings_of(read, env, None)
    except ConfigError as exc:
        if not read.get("config") and named and str(exc).startswith(named):
            raise ConfigError(f"$LOOPFUSE_CONFIG, which the hook reads: {exc}") from None
        raise
