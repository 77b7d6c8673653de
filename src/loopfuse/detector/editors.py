"""Editor and file tools judged as a person would: by their name *and* their arguments.

Coding agents read and change files through editor tools whose name says little on its
own: OpenHands' and SWE-agent's ``str_replace_editor`` views a file with
``command="view"`` and changes it with ``command="str_replace"``. :func:`editor_call`
tells, for one call, what it does:

- ``READ``: it only reads (a view, an open, a scroll, a grep or glob): read-only, like
  a read-only shell command line;
- ``EDIT``: it changes a file; :attr:`EditorCall.path` names the file when the
  arguments do. An edit whose answer is an error ("No replacement was performed",
  "new_str must be different from old_str", a file that is not there) changed nothing;
  one that succeeded is progress for a later check that reads the file it changed;
- ``None``: not an editor tool this module knows (its name decides, as before).

The tools known, by their own name (after any ``mcp__server__`` namespace), are those
the harnesses declare (:attr:`loopfuse.harness.Tool.files`: Claude Code's ``Read`` /
``Edit``, Codex's ``apply_patch``, Gemini CLI's ``replace``, OpenHands' and SWE-agent's
``str_replace_editor``, SWE-agent's ``edit`` …) and the generic ones (Anthropic's
``str_replace_based_edit_tool``), whatever the detector's ``harness`` setting
(:func:`loopfuse.harness.file_tools`): an editor's arguments say what it does, whoever
defined it. A text editor (``command`` decides): ``view`` reads; ``create``,
``str_replace``, ``insert``, ``undo_edit``, ``write`` edit
(:data:`~loopfuse.harness.generic.TEXT_EDITOR_READS`, ``_EDITS``).

SWE-agent's own reading commands (``open``, ``goto``, ``scroll_*``, ``search_*``,
``find_file``) are left as they were judged before: ``open``, ``goto`` and ``scroll_*``
move the window its next ``edit`` acts on, and on the calibration runs reading its
searches as reads gave a two-call lap of a failing and a working search five laps
instead of two.

Reading the arguments never raises and costs time bounded by a constant (a patch is
read for its first file header within its first :data:`_PATCH_HEAD` characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from loopfuse.detector._textcache import TextCache
from loopfuse.detector.tools import own_name
from loopfuse.harness import FileAccess, file_tools
from loopfuse.harness.generic import TEXT_EDITOR_EDITS, TEXT_EDITOR_READS

__all__ = ["EDIT", "READ", "EditorCall", "editor_call", "mentions_file"]

READ: Final = FileAccess.READS.value
EDIT: Final = FileAccess.EDITS.value

_COMMAND: Final = FileAccess.BY_COMMAND.value
_COMMAND_READS: Final = TEXT_EDITOR_READS
_COMMAND_EDITS: Final = TEXT_EDITOR_EDITS
_PATH_KEYS: Final = ("path", "file_path", "absolute_path", "notebook_path", "filename", "file")
_PATCH_KEYS: Final = ("input", "patch", "command")
_PATCH_HEAD: Final = 4096
_PATCH_FILE: Final = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: *(\S[^\n]*)$", re.MULTILINE)
_MAX_PATH: Final = 1024
_MENTIONS_READ: Final = 64  # occurrences of a file name looked at in one text, at most
_MENTION_BACK: Final = 256  # characters of path read back from one occurrence, at most


@dataclass(frozen=True, slots=True)
class EditorCall:
    """What one editor call does: ``action`` (``READ`` or ``EDIT``) and, for an edit
    whose arguments name it, the ``path`` of the file it changes (``None`` otherwise)."""

    action: str
    path: str | None = None


_READ_CALL: Final = EditorCall(READ)


def editor_call(name: str, arguments: object) -> EditorCall | None:
    """What the call ``name(arguments)`` does, or ``None`` for a tool this module does not
    know (or a ``str_replace_editor`` call whose ``command`` it cannot read).

    >>> editor_call("str_replace_editor", {"command": "view", "path": "/repo/a.py"})
    EditorCall(action='read', path=None)
    >>> editor_call("str_replace_editor", {"command": "str_replace", "path": "/repo/a.py"})
    EditorCall(action='edit', path='/repo/a.py')
    >>> editor_call("Edit", {"file_path": "src/b.py", "old_string": "x", "new_string": "y"})
    EditorCall(action='edit', path='src/b.py')
    >>> editor_call("apply_patch", {"input": "*** Begin Patch\\n*** Update File: c.py\\n"})
    EditorCall(action='edit', path='c.py')
    >>> editor_call("bash", {"command": "ls"}) is None
    True
    """
    if type(name) is not str:
        return None
    tool = _TOOL_KINDS.call(name)
    if tool is None:
        return None
    if tool == _COMMAND:
        command = arguments.get("command") if type(arguments) is dict else None
        if type(command) is not str:
            return None
        if command in _COMMAND_READS:
            return _READ_CALL
        if command in _COMMAND_EDITS:
            return EditorCall(EDIT, _path_of(arguments))
        return None
    if tool == READ:
        return _READ_CALL
    return EditorCall(EDIT, _path_of(arguments) or _patch_path(arguments))


def _tool_kind(name: str) -> str | None:
    """``"command"`` (a ``str_replace_editor``-style tool), ``READ``, ``EDIT`` or ``None``,
    by the tool's own name (cached: a scan asks again for every call of a run)."""
    # What each editor and file tool does to files, by own name: the harnesses'
    # declarations, read once (on first use: importing the detector imports no harness).
    access = file_tools().get(own_name(name))
    return None if access is None else access.value


def _path_of(arguments: object) -> str | None:
    if type(arguments) is not dict:
        return None
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if type(value) is str and 0 < len(value) <= _MAX_PATH:
            return value
    return None


def _patch_path(arguments: object) -> str | None:
    """The first file a Codex ``apply_patch`` patch changes."""
    text: object = arguments
    if type(arguments) is dict:
        text = next((arguments[k] for k in _PATCH_KEYS if type(arguments.get(k)) is str), None)
    elif type(arguments) is list and arguments and type(arguments[-1]) is str:
        text = arguments[-1]  # ["apply_patch", "<patch>"]
    if type(text) is not str:
        return None
    found = _PATCH_FILE.search(text[:_PATCH_HEAD])
    path = found.group(1).strip() if found else ""
    return path if 0 < len(path) <= _MAX_PATH else None


def mentions_file(text: str, path: str) -> bool | None:
    """Whether ``text`` (a check's command line or answer) names the file at ``path``:
    ``True`` when it does, ``False`` when it names only *another* file of the same name,
    ``None`` when it names no file of that name at all.

    The path itself, or a path of two or more parts that ``path`` ends with (a relative
    path into the same tree: ``lib/stackplot.py`` names ``/repo/lib/stackplot.py``), or
    the bare file name (``python reproduce.py``) name it. A file of the same name in
    another tree (``/testbed/lib/x.py`` when ``/workspace/lib/x.py`` was edited) is
    another file: the check reads that one, and the edit does not reach it.

    >>> mentions_file('File "/testbed/lib/x.py", line 3', "/workspace/lib/x.py")
    False
    >>> mentions_file("FAILED lib/x.py::test_a", "/workspace/lib/x.py")
    True
    >>> mentions_file("python reproduce.py", "/workspace/reproduce.py")
    True
    >>> mentions_file("AssertionError: 3 != 4", "/workspace/lib/x.py") is None
    True

    The text is attacker-controlled: at most :data:`_MENTIONS_READ` occurrences of the
    name are looked at, each with at most :data:`_MENTION_BACK` characters of path
    before it, so the cost is bounded whatever the text.
    """
    return _MENTIONS.call(text, path)


def _mentions(text: str, path: str) -> bool | None:
    base = path.replace("\\", "/").rstrip("/")
    name = base.rsplit("/", 1)[-1]
    if not name:
        return None
    found: bool | None = None
    at = text.find(name)
    seen = 0
    while at >= 0 and seen < _MENTIONS_READ:
        seen += 1
        end = at + len(name)
        start = at
        stop = max(0, at - _MENTION_BACK)
        while start > stop and (text[start - 1].isalnum() or text[start - 1] in "./\\_+@~-"):
            start -= 1
        after = text[end] if end < len(text) else " "
        mention = text[start:end].replace("\\", "/").lstrip("./")
        if not (after.isalnum() or after in "_-") and mention.rsplit("/", 1)[-1] == name:
            if mention == name or base == mention or base.endswith("/" + mention):
                return True
            found = False  # a file of the same name, elsewhere
        at = text.find(name, at + 1)
    return found


# Cached under bounded keys (the names and texts are the client's, of any length).
_TOOL_KINDS: Final[TextCache[str | None]] = TextCache(_tool_kind, 4096)
_MENTIONS: Final[TextCache[bool | None]] = TextCache(_mentions, 1024)
