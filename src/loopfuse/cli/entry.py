"""The ``loopfuse`` console script: ``hook`` and ``init`` without the rest.

``loopfuse hook`` runs before and after every tool call of a coding agent, so it must
start fast: this entry point hands ``hook`` and ``init`` to their own modules before
anything of ``loopfuse scan`` is imported; every other command goes to
:func:`loopfuse.cli.main.main`.
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
        from loopfuse.cli import hook

        return hook.main(args[1:], started=started)
    if args[:1] == ["init"]:
        from loopfuse.cli import init

        return init.main(args[1:])
    from loopfuse.cli.main import main as full

    status: int = full(args)
    return status
