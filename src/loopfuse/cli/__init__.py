"""The ``loopfuse`` command line: ``loopfuse scan PATH...`` and ``loopfuse demo``.

Run it as ``loopfuse`` (console script) or ``python -m loopfuse``. The entry point is
:func:`loopfuse.cli.main.main`. The modules here do the I/O the guards never do:

- :mod:`~loopfuse.cli.readers`: files, folders and standard input, recognised by content;
- :mod:`~loopfuse.cli.turns`: the requests an agent sent, rebuilt turn by turn;
- :mod:`~loopfuse.cli.replay`: those requests through the three guards on a fake clock;
- :mod:`~loopfuse.cli.report`: text, JSON and Markdown reports, colour, progress bar;
- :mod:`~loopfuse.cli.config`: every threshold as a flag and as a TOML key;
- :mod:`~loopfuse.cli.demo`: ``loopfuse demo`` on the bundled examples.

The command line is not part of the library API: nothing here is re-exported from
``loopfuse``.
"""

from __future__ import annotations

__all__: list[str] = []
