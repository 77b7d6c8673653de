"""Destructive lines, run in real bash: each one changes a scratch folder, and the
classifier must not call it read-only.

Issue #22 found 23 destructive lines classified read-only (so given the poll allowance)
in eight classes: ``command`` with ``-v`` further on, brace expansion, parameter
expansion, builtins that run commands, arithmetic-subscript injection, GNU long-option
abbreviations, short-option clusters and global options of read-only sub-commands. Each
case below runs its line with ``bash -c`` in a temporary folder holding harmless stand-ins
(a ``victim`` file, a small git repository) and checks that the line deleted, wrote or
changed something there; then it checks the classifier. A case whose program is not
installed here (``tree``, ``gh``) is skipped for bash but still checked against the
classifier. Lines of the same classes that bash cannot run safely here (``date --se=`` sets
the clock, ``ss --ki`` kills sockets) are run with the privilege removed, or only
classified, in test_detector_shell.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loopfuse.detector.shell import ShellClassifier

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

UNCACHED = ShellClassifier(cache_size=0)
VICTIM = "victim.txt"
# The interpreter running the tests comes first: its pip is the one "pip list" runs.
SEARCH_PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@dataclass(frozen=True)
class Destructive:
    """A line, the files it starts with, and what it does to them when bash runs it."""

    line: str
    effect: str  # "deleted NAME", "created NAME", "changed NAME" or "says TEXT"
    files: dict[str, str] = field(default_factory=lambda: {VICTIM: "keep me\n"})
    env: dict[str, str] = field(default_factory=dict)
    needs: str = ""  # a program that must be installed for bash to run the line
    git: bool = False  # the folder is a git repository with its files committed


CASES: dict[str, Destructive] = {
    # "command -v" is a lookup only when -v is one of command's own options
    "command then -v": Destructive(f"command rm -v -rf {VICTIM}", f"deleted {VICTIM}"),
    "command -p then -v": Destructive(f"command -p rm -v {VICTIM}", f"deleted {VICTIM}"),
    # brace expansion makes words the reader never saw
    "brace -exec": Destructive(
        "find . -name '*.txt' {-exec,rm} {} ';'", f"deleted {VICTIM}"
    ),
    "brace -delete": Destructive("find . -name '*.txt' -{delete,print}", f"deleted {VICTIM}"),
    "brace -i": Destructive(f"sed -e s/keep/lose/ {{-i,}} {VICTIM}", f"changed {VICTIM}"),
    "brace second file": Destructive(
        "uniq {in,out}.txt", "created out.txt", files={"in.txt": "a\n"}
    ),
    "brace sequence": Destructive(
        "uniq f{1..2}.txt", "created f2.txt", files={"f1.txt": "a\n"}
    ),
    # parameter expansion: a default value, or IFS splitting a word in two
    "default value": Destructive("find . -name '*.txt' ${X:--delete}", f"deleted {VICTIM}"),
    "quoted default value": Destructive(
        "find . -name '*.txt' \"${X:--delete}\"", f"deleted {VICTIM}"
    ),
    "IFS split": Destructive("find . -name '*.txt'$IFS-delete", f"deleted {VICTIM}"),
    "IFS split sed": Destructive(f"sed -e s/keep/lose/ $IFS-i {VICTIM}", f"changed {VICTIM}"),
    "variable": Destructive(
        "find . -name '*.txt' $X", f"deleted {VICTIM}", env={"X": "-delete"}
    ),
    "variable as program": Destructive(f"$X {VICTIM}", f"deleted {VICTIM}", env={"X": "rm"}),
    # a continuation (backslash, newline) vanishes before bash reads the line
    "continued $(": Destructive(f'echo "$\\\n(rm {VICTIM})"', f"deleted {VICTIM}"),
    "continued ${": Destructive(
        "find . -name '*.txt' $\\\n{X:--delete}", f"deleted {VICTIM}"
    ),
    # builtins that run a command
    "jobs -x": Destructive(f"jobs -x rm {VICTIM}", f"deleted {VICTIM}"),
    # arithmetic-subscript injection: bash evaluates a[...] and runs the $(...) in it
    "printf -v": Destructive(f"printf -v 'a[$(rm {VICTIM})]' x", f"deleted {VICTIM}"),
    "test -v": Destructive(f"test -v 'a[$(rm {VICTIM})]'", f"deleted {VICTIM}"),
    "[ -v": Destructive(f"[ -v 'a[$(rm {VICTIM})]' ]", f"deleted {VICTIM}"),
    "[[ -v": Destructive(f"[[ -v 'a[$(rm {VICTIM})]' ]]", f"deleted {VICTIM}"),
    "[[ -eq": Destructive(f"[[ 'a[$(rm {VICTIM})]' -eq 0 ]]", f"deleted {VICTIM}"),
    "[[ -gt name": Destructive(
        "[[ n -gt 0 ]]", f"deleted {VICTIM}", env={"n": f"a[$(rm {VICTIM})]"}
    ),
    "wait -p": Destructive(f"sleep 0 & wait -n -p 'a[$(rm {VICTIM})]'", f"deleted {VICTIM}"),
    "prompt expansion": Destructive(
        "echo ${X@P}", f"deleted {VICTIM}", env={"X": f"$(rm {VICTIM})"}
    ),
    "fd variable": Destructive(
        f"ls {{a['$(rm {VICTIM})']}}>/dev/null", f"deleted {VICTIM}"
    ),
    # GNU long options may be shortened to any unambiguous prefix
    "sort --outp": Destructive(
        "sort --outp=out.txt in.txt", "created out.txt", files={"in.txt": "b\na\n"}
    ),
    "sort --o": Destructive(
        "sort --o out.txt in.txt", "created out.txt", files={"in.txt": "b\na\n"}
    ),
    "git grep --open": Destructive("git grep --open=rm keep", f"deleted {VICTIM}", git=True),
    "file --comp": Destructive(
        "file --comp -m magic", "created magic.mgc", files={"magic": "0 string HELLO hello\n"},
        needs="file",
    ),
    "date --se": Destructive(
        "capsh --drop=cap_sys_time -- -c 'date --se=2020-01-01'", "says cannot set date",
        needs="capsh",
    ),
    # short options clustered behind another letter
    "git grep -iOrm": Destructive("git grep -iOrm keep", f"deleted {VICTIM}", git=True),
    "file -bC": Destructive(
        "file -bC -m magic", "created magic.mgc", files={"magic": "0 string HELLO hello\n"},
        needs="file",
    ),
    "tree -ao": Destructive("tree -ao out.txt", "created out.txt", needs="tree"),
    "sort -uo": Destructive("sort -uo out.txt in.txt", "created out.txt", files={"in.txt": "a\n"}),
    # options of the program that the sub-command does not name
    "pip list --log": Destructive("pip list --log out.txt", "created out.txt", needs="pip"),
    "PIP_LOG": Destructive("PIP_LOG=out.txt pip list", "created out.txt", needs="pip"),
}  # fmt: skip

# Lines that bash cannot run here (no gh, no server): classified only.
NOT_RUN = [
    "gh api -iXDELETE repos/o/r/issues/1",
    "gh api -XPOST repos/o/r/issues",
    "gh api -iXPOST repos/o/r/issues",
    "gh api -if title=x repos/o/r/issues",
    "gh api -iF title=x repos/o/r/issues",
    "gh api --method=DELETE repos/o/r",
]


def _environment(tmp_path: Path, extra: dict[str, str]) -> dict[str, str]:
    """A small, fixed environment: PATH with the interpreter running the tests (its pip),
    HOME in the scratch folder, no user or system git configuration."""
    return {
        "PATH": SEARCH_PATH,
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        **extra,
    }


def _git(folder: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file() and ".git" not in path.parts
    }


def _run_in_bash(case: Destructive, folder: Path) -> tuple[dict[str, bytes], str]:
    env = _environment(folder, case.env)
    for name, text in case.files.items():
        (folder / name).write_text(text, encoding="utf-8")
    if case.git:
        _git(folder, env, "init", "-q")
        _git(folder, env, "add", "-A")
        _git(folder, env, "commit", "-qm", "start")
    done = subprocess.run(
        ["bash", "-c", case.line],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return _snapshot(folder), done.stdout + done.stderr


def _effect_seen(effect: str, before: dict[str, str], after: dict[str, bytes], said: str) -> bool:
    kind, _, what = effect.partition(" ")
    checks: dict[str, Callable[[], bool]] = {
        "deleted": lambda: what in before and what not in after,
        "created": lambda: what not in before and what in after,
        "changed": lambda: what in after and after[what] != before[what].encode(),
        "says": lambda: what in said,
    }
    return checks[kind]()


@pytest.mark.parametrize("name", CASES)
def test_bash_runs_the_line_destructively(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    if case.needs and shutil.which(case.needs, path=SEARCH_PATH) is None:
        pytest.skip(f"{case.needs} is not installed")
    after, said = _run_in_bash(case, tmp_path)
    assert _effect_seen(case.effect, case.files, after, said), (case.line, sorted(after), said)


@pytest.mark.parametrize("name", CASES)
def test_the_classifier_does_not_call_it_read_only(name: str) -> None:
    line = CASES[name].line
    if line.startswith("capsh "):
        line = "date --se=2020-01-01"  # the line inside the privilege drop
    assert UNCACHED.is_read_only(line) is False, line


@pytest.mark.parametrize("line", NOT_RUN)
def test_lines_classified_only(line: str) -> None:
    assert UNCACHED.is_read_only(line) is False, line
