"""``python -m loopfuse``: the ``loopfuse`` command line (see :mod:`loopfuse.cli`)."""

from __future__ import annotations

from loopfuse.cli.entry import main

if __name__ == "__main__":
    raise SystemExit(main())
