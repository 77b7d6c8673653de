"""The names the reports give the files they scanned: relative to the scanned folder.

A scan of ``/home/me/runs`` names its files ``ab_cycle.json`` and ``deep/run.json`` and
says once, in its summary, which folder they are in; the whole path of every file would
push the part that tells them apart to the right of the line (and, cut to the width of a
terminal, off it). The scanned folder is the one given; of several paths (folders or
files), the deepest folder that holds them all; of one file, its folder. The JSON
report keeps each file's path as it was found (programs open it) and says the folder.

>>> scanned_folder(["/home/me/runs"], is_dir=lambda path: True)
'/home/me/runs'
>>> scanned_folder(["/home/me/runs/a.json", "/home/me/b/c.json"], is_dir=lambda path: False)
'/home/me'
>>> shown_name("/home/me/runs/deep/run.json", "/home/me/runs")
'deep/run.json'
>>> shown_name("/elsewhere/run.json", "/home/me/runs")  # not in the folder: as it is
'/elsewhere/run.json'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

__all__ = ["scanned_folder", "shown_name"]

STDIN = "-"


def scanned_folder(
    paths: Sequence[str], is_dir: Callable[[str], bool] = os.path.isdir
) -> str | None:
    """The absolute folder that the report's names are relative to, for a scan of
    ``paths`` (``None`` when there is none: standard input alone, or no path)."""
    folders = [
        os.path.abspath(path if is_dir(path) else os.path.dirname(path) or os.curdir)
        for path in paths
        if path != STDIN
    ]
    if not folders:
        return None
    try:
        return os.path.commonpath(folders)
    except ValueError:  # no folder in common (paths on different Windows drives)
        return None


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
