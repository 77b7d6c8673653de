"""The names the reports give the files they scanned: relative to the scanned folder.

A scan of ``/home/me/runs`` names its files ``ab_cycle.json`` and ``deep/run.json`` and
says once, in its summary, which folder they are in; the whole path of every file would
push the part that tells them apart to the right of the line (and, cut to the width of a
terminal, off it). The scanned folder is the one given; of several paths (folders or
files), the deepest folder that holds them all; of one file, its folder. The JSON
report keeps each file's path as it was found (programs open it) and says the folder.

>>> scanned_folder(["/home/me/runs"], folders=True)
'/home/me/runs'
>>> scanned_folder(["/home/me/runs/a", "/home/me/b"], folders=True)
'/home/me'
>>> shown_name("/home/me/runs/deep/run.json", "/home/me/runs")
'deep/run.json'
>>> shown_name("/elsewhere/run.json", "/home/me/runs")  # not in the folder: as it is
'/elsewhere/run.json'
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["scanned_folder", "shown_name"]

STDIN = "-"


def scanned_folder(paths: Sequence[str], *, folders: bool = False) -> str | None:
    """The absolute folder that the report's names are relative to, for a scan of
    ``paths`` (all of them folders, existing or not, with ``folders``). ``None`` when
    there is none: standard input alone, paths that do not exist, or only the file
    system's root in common (names relative to it would tell nothing more)."""
    found = []
    for path in paths:
        if path == STDIN:
            continue
        if folders or os.path.isdir(path):
            found.append(os.path.abspath(path))
        elif os.path.lexists(path):
            found.append(os.path.dirname(os.path.abspath(path)))
    if not found:
        return None
    try:
        common = os.path.commonpath(found)
    except ValueError:  # no folder in common (paths on different Windows drives)
        return None
    return None if os.path.dirname(common) == common else common


def shown_name(name: str, folder: str | None) -> str:
    """``name`` relative to ``folder`` when it is inside it, else as it is."""
    if folder is None or name.startswith("<"):  # <stdin>, or a name that is no path
        return name
    path = os.path.abspath(name)
    try:
        inside = os.path.commonpath([path, folder]) == folder
    except ValueError:
        return name
    return os.path.relpath(path, folder) if inside and path != folder else name
