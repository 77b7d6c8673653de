"""Crush's ``crush.json``, edited as text: the hook entry ``loopfuse init --agent crush``
writes and removes (:mod:`loopfuse.harness.crush` says where the file is and what Crush
does with the entry).

Crush's hooks are flat entries ``{"name", "matcher", "command", "timeout"}`` in the list
``hooks.PreToolUse`` (no ``hooks`` level, no ``type``). Every byte of the file that is not
loopfuse's entry stays as it was (:mod:`loopfuse.cli.settings_text`).
"""

from __future__ import annotations

import json
import os
import shlex

from loopfuse.cli import settings_text
from loopfuse.harness.crush import HOOK_NAME, HOOK_TIMEOUT

__all__ = ["commands", "install", "uninstall"]


def _ours(entry: object) -> bool:
    """Whether a ``hooks.PreToolUse`` entry is one ``init`` writes: its command's words
    are a ``loopfuse`` console script (any path; or ``PYTHON -m loopfuse``) then ``hook
    --agent crush``. A command that only mentions loopfuse is not ours.

    >>> _ours({"name": "loopfuse", "command": "/v/bin/loopfuse hook --agent crush"})
    True
    >>> _ours({"command": "notify loopfuse hook --agent crush"})
    False
    """
    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if words and os.path.basename(words[0]) == "loopfuse":
        rest = words[1:]
    elif words[1:3] == ["-m", "loopfuse"]:
        rest = words[3:]
    else:
        return False
    return rest[:3] == ["hook", "--agent", "crush"]


def commands(text: str) -> list[str]:
    """The commands of loopfuse's entries in the ``crush.json`` ``text``."""
    if not text.strip():
        return []
    settings = settings_text.load(text, comments=True)
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    if not isinstance(hooks, dict):
        return []
    found = []
    for entries in hooks.values():
        for entry in entries if isinstance(entries, list) else ():
            if _ours(entry):
                found.append(entry["command"])
    return found


def install(text: str, command: str) -> str:
    """``text`` (a ``crush.json``; ``""``: no file yet) with one entry running
    ``command`` before every tool call, and none other of loopfuse's: an entry of an
    earlier run is replaced where it was. Every other byte of the file stays."""
    entry = {"name": HOOK_NAME, "command": command, "timeout": HOOK_TIMEOUT}
    text = _without_ours(text, keep=True) if text.strip() else "{}\n"
    root = _root(text)
    at = root.find("hooks")
    if at is None:
        return settings_text.append(text, root, {"PreToolUse": [entry]}, "hooks")
    if text[root.values[at][0]] != "{":
        raise settings_text.SettingsTextError("'hooks' is not a JSON object; fix it by hand")
    hooks = settings_text.outline(text, root.values[at][0], True)
    where = hooks.find("PreToolUse")
    if where is None:
        return settings_text.append(text, hooks, [entry], "PreToolUse")
    if text[hooks.values[where][0]] != "[":
        raise settings_text.SettingsTextError("'hooks.PreToolUse' is not a list; fix it by hand")
    return settings_text.append(
        text, settings_text.outline(text, hooks.values[where][0], True), entry
    )


def uninstall(text: str) -> str:
    """``text`` without loopfuse's entries (and without the list and the ``hooks``
    object that only held them); ``""`` when nothing else is left in the file."""
    if not text.strip():
        return text
    text = _without_ours(text, keep=False)
    if settings_text.load(text, comments=True) == {} and not _has_comments(text):
        return ""
    return text


def _has_comments(text: str) -> bool:
    return settings_text.strip_comments(text, True) != text


def _root(text: str) -> settings_text.Container:
    start = len(text) - len(text.lstrip())
    return settings_text.outline(text, start, True)


def _without_ours(text: str, keep: bool) -> str:
    """``text`` without loopfuse's entries, one at a time; with ``keep`` the list
    ``hooks.PreToolUse`` (about to be filled again) and the ``hooks`` object stay."""
    while True:
        plain = settings_text.strip_comments(text, True)
        root = settings_text.outline(text, len(text) - len(text.lstrip()), True)
        at = root.find("hooks")
        if at is None or text[root.values[at][0]] != "{":
            return text
        hooks = settings_text.outline(text, root.values[at][0], True)
        edited = None
        for index, (start, _) in enumerate(hooks.values):
            if text[start] != "[":
                continue
            entries = settings_text.outline(text, start, True)
            for position, (begin, end) in enumerate(entries.values):
                if not _ours(json.loads(plain[begin:end])):
                    continue
                if len(entries.elements) > 1 or (keep and hooks.keys[index] == "PreToolUse"):
                    edited = settings_text.delete(text, entries, position)
                elif len(hooks.elements) > 1 or keep:
                    edited = settings_text.delete(text, hooks, index)
                else:
                    edited = settings_text.delete(text, root, at)
                break
            if edited is not None:
                break
        if edited is None:
            return text
        text = edited
