"""A griffe extension for the docs site: loopfuse's reST-flavoured docstrings as Markdown.

The docstrings are written for ``help()`` and doctest: ``>>>`` examples, ``:class:`X```
roles, ``text::`` literal blocks and ``====`` tables. Rendered as Markdown those turn
into nested block quotes and stray colons, so before mkdocstrings renders a docstring
this extension fences doctest examples and tables as code and turns roles into code
spans. It only changes what the site shows; the docstrings themselves stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")
_TABLE_RULE = re.compile(r"^\s*=+(?:\s+=+)+\s*$")


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def markdown(text: str) -> str:
    """``text`` (a docstring) with doctests and tables fenced, roles as code spans."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(">>>"):
            pad = " " * _indent(line)
            block = []
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) >= len(pad):
                block.append(lines[i][len(pad) :])
                i += 1
            out += ["", pad + "```pycon", *(pad + b for b in block), pad + "```", ""]
            continue
        if _TABLE_RULE.match(line):
            pad = " " * _indent(line)
            block = [line]
            rules = 1
            i += 1
            while i < len(lines) and rules < 3:
                block.append(lines[i])
                rules += bool(_TABLE_RULE.match(lines[i]))
                i += 1
            out += ["", pad + "```text", *block, pad + "```", ""]
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            line = line[:-1]  # "text::" opens a literal block; Markdown indents it already
        out.append(_ROLE.sub(_role, line))
        i += 1
    return "\n".join(out)


class DocstringsAsMarkdown(Extension):
    """Rewrites every docstring with :func:`markdown` once griffe has loaded it."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
