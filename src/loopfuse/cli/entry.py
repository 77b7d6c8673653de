"""The ``loopfuse`` console script: ``hook``, ``init`` and ``doctor`` without the rest.

``loopfuse hook`` runs before and after every tool call of a coding agent, so it must
start fast: this entry point hands ``hook``, ``init`` and ``doctor`` to their own modules before
anything of ``loopfuse scan`` is imported; every other command goes to
:func:`loopfuse.cli.main.main`. Imports go one way: this module imports
:mod:`loopfuse.cli.main` (which hands ``hook`` and ``init`` to their modules itself when
called from Python), never the reverse.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    started = time.time()  # before the hook's imports: when the CLI started this hook
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        # A hook parses a few kilobytes of JSON, which the standard library does as fast
        # as orjson, and loopfuse gives the same answers with either backend
        # (docs/intent.md): so the hook does not import orjson, whose import (with the
        # uuid and platform modules it pulls in) is about a tenth of a hook's cost.
        sys.modules.setdefault("orjson", None)  # type: ignore[arg-type]
        from loopfuse.cli import hook

        return hook.main(args[1:], started=started)
    if args[:1] == ["init"]:
        from loopfuse.cli import init

        return init.main(args[1:])
    if args[:1] == ["doctor"]:
        from loopfuse.cli import doctor

        return doctor.main(args[1:])
    from loopfuse.cli.main import main as full

    status: int = full(args)
    return status
