"""The ``loopfuse`` command line: ``loopfuse scan PATH...`` and ``loopfuse demo``.

Run it as ``loopfuse`` (console script) or ``python -m loopfuse``. The entry point is
:func:`loopfuse.cli.main.main`. The modules here do the I/O the guards never do:

- :mod:`~loopfuse.cli.readers` (and :mod:`~loopfuse.cli.loglines`): files, folders, log
  lines and standard input, recognised by content;
- :mod:`~loopfuse.cli.decisions`: each file's requests through the guard decision every
  integration runs, on a fake clock (a recorded conversation walked once, turn by turn,
  as :func:`loopfuse.intent.conversation` splits it);
- :mod:`~loopfuse.cli.findings` and :mod:`~loopfuse.cli.results`: what the guard did,
  grouped into findings; :mod:`~loopfuse.cli.tokens`: what it did not spend;
- :mod:`~loopfuse.cli.report` (text, JSON), :mod:`~loopfuse.cli.markdown`,
  :mod:`~loopfuse.cli.html` (with :mod:`~loopfuse.cli.timeline`), on the totals of
  :mod:`~loopfuse.cli.summary`; :mod:`~loopfuse.cli.progress`: the progress bar;
- :mod:`~loopfuse.cli.config` (and :mod:`~loopfuse.cli.options`): every threshold as a
  flag and as a TOML key;
- :mod:`~loopfuse.cli.demo`: ``loopfuse demo`` on the bundled examples.

The command line is not part of the library API: nothing here is re-exported from
``loopfuse``.
"""

from __future__ import annotations

__all__: list[str] = []
