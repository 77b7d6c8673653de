"""`loopfuse hook`'s files: the state folder is the user's own, nothing in it is followed
through a link or waited on as a FIFO, its files are private, idle sessions all go in
time, a damaged or oversized state is a fresh start, and a wall clock that steps back
does not join a new call to an old batch (issue 30, findings 5 to 11)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hook_payloads import CLAUDE_COMMON, claude_failure, claude_post, claude_pre
from loopfuse.cli import hook_state
from loopfuse.cli.hook import MAX_CALL_TEXT, handle
from loopfuse.cli.safe_files import UnsafeFileError
from test_cli_hook import Hook, _deny_reason, _note, _only_session, _run

OUTSIDE = "precious: not the hook's\n"


@pytest.fixture
def hook(tmp_path: Path) -> Hook:
    return Hook(tmp_path / "state")


def _outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.txt"
    target.write_text(OUTSIDE)
    return target


def _bad_payload(hook: Hook) -> None:
    """A hook that logs one line (its input is not JSON) and runs the cleanup."""
    assert hook(b"not json") == ("", 0)


# --- finding 5: no link in the state folder is followed -------------------------------


def test_a_linked_hook_log_is_not_written_through(hook: Hook, tmp_path: Path) -> None:
    target = _outside(tmp_path)
    hook.root.mkdir(mode=0o700)
    (hook.root / "hook.log").symlink_to(target)
    _bad_payload(hook)
    assert target.read_text() == OUTSIDE


def test_a_linked_last_cleanup_is_not_created(hook: Hook, tmp_path: Path) -> None:
    hook.root.mkdir(mode=0o700)
    (hook.root / "last-cleanup").symlink_to(tmp_path / "created-through-the-link")
    hook.answer(claude_pre("ls", "t1"))
    assert not (tmp_path / "created-through-the-link").exists()


def test_a_linked_sessions_folder_is_refused_and_nothing_in_it_removed(
    hook: Hook, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    idle = elsewhere / "important.json"
    idle.write_text("{}")
    os.utime(idle, (0, 0))
    hook.root.mkdir(mode=0o700)
    (hook.root / "sessions").symlink_to(elsewhere)
    assert hook(claude_pre("ls", "t1")) == ("", 0)  # allowed, unguarded
    assert idle.exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["important.json"]
    err = capsys.readouterr().err
    assert "sessions" in err
    assert "link" in err


def test_temporary_and_lock_names_are_never_written_through(tmp_path: Path) -> None:
    root = tmp_path / "state"
    path = hook_state.session_path(str(root), "codex", "s1")
    os.makedirs(os.path.dirname(path), mode=0o700)
    (root).chmod(0o700)
    target = _outside(tmp_path)
    # the names an earlier version wrote to: <name>.<pid>.tmp, and the lock
    Path(os.path.dirname(path), f".codex-s1.json.{os.getpid()}.tmp").symlink_to(target)
    with hook_state.locked(path, 1.0):
        hook_state.save(path, hook_state.SessionState(next_id=3))
    assert target.read_text() == OUTSIDE
    assert hook_state.load(path).next_id == 3
    lock = path.removesuffix(".json") + ".lock"
    os.unlink(lock)
    os.symlink(tmp_path / "lock-target", lock)
    with pytest.raises(UnsafeFileError), hook_state.locked(path, 1.0):
        pass
    assert not (tmp_path / "lock-target").exists()


def test_a_state_folder_others_may_write_to_is_refused_saying_why_once(
    hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    hook.root.mkdir()
    hook.root.chmod(0o777)
    assert hook(claude_pre("ls", "t1")) == ("", 0)
    assert not (hook.root / "sessions").exists()
    assert not (hook.root / "hook.log").exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert str(hook.root) in err
    assert "others may write" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_state_folder_of_another_user_is_refused(
    hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    hook.root.mkdir(mode=0o700)
    os.chown(hook.root, 65534, 65534)
    assert hook(claude_pre("ls", "t1")) == ("", 0)
    assert not (hook.root / "sessions").exists()
    assert "another user" in capsys.readouterr().err


def test_a_state_folder_linked_by_its_user_is_used(tmp_path: Path) -> None:
    """The state folder itself may be a link its user made (dotfiles): followed."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(real)
    hook = Hook(tmp_path / "state")
    assert "noted" in _run(hook, "claude-code", 6)
    assert (real / "sessions").is_dir()


# --- finding 6: never a hang on a FIFO -----------------------------------------------------


def _fifo_run(tmp_path: Path, where: str) -> subprocess.CompletedProcess[bytes]:
    root = tmp_path / "state"
    sessions = root / "sessions"
    sessions.mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    session = Path(hook_state.session_path(str(root), "claude-code", CLAUDE_COMMON["session_id"]))
    config = tmp_path / "loopfuse.toml"
    fifo = {
        "session": session,
        "lock": session.with_suffix(".lock"),
        "log": root / "hook.log",
        "last-cleanup": root / "last-cleanup",
        "config": config,
    }[where]
    os.mkfifo(fifo, 0o600)
    argv = ["--state-dir", str(root)]
    if where == "config":
        argv += ["--config", str(config)]
    payload = json.dumps(claude_pre("ls", "t1")) if where != "log" else "not json"
    code = (
        "from loopfuse.cli.hook import handle;"
        f"print(handle({payload!r}.encode(), {argv!r}, {{}}, lambda: 1.9e9))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=30, check=False
    )


@pytest.mark.parametrize("where", ["session", "lock", "log", "last-cleanup", "config"])
def test_a_fifo_anywhere_the_hook_opens_a_file_does_not_hang_it(tmp_path: Path, where: str) -> None:
    done = _fifo_run(tmp_path, where)
    assert done.returncode == 0, done.stderr
    said = done.stdout.decode().strip()
    if where == "config":  # settings refused: the call allowed, the user told (#29 §2)
        assert said.startswith("""('{"systemMessage": "[loopfuse] The loop guard is OFF""")
        assert "loopfuse.toml: not a regular file" in said
    else:
        assert said == "('', 0)"
    if where == "session":  # a fresh start, saved as a regular file in its place
        (session,) = (tmp_path / "state" / "sessions").glob("*.json")
        assert stat.S_ISREG(session.lstat().st_mode)


# --- finding 7: every idle session is removed in time -------------------------------------


def test_idle_sessions_behind_many_busy_ones_are_all_removed_in_bounded_runs(
    tmp_path: Path,
) -> None:
    root = tmp_path / "state"
    sessions = root / "sessions"
    sessions.mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    count = hook_state.CLEANUP_BATCH * 2 + 500
    for i in range(count):
        (sessions / f"codex-s{i}.json").write_text("{}")
    order = [entry.name for entry in os.scandir(sessions)]  # the order cleanup reads
    busy = hook_state.CLEANUP_BATCH + 10  # the first ones the folder lists are busy
    now = 1_900_000_000.0
    for at, name in enumerate(order):
        age = 60.0 if at < busy else hook_state.MAX_IDLE + 1
        os.utime(sessions / name, (now - age, now - age))
    idle = set(order[busy:])
    runs = 0
    while idle & {p.name for p in sessions.glob("*.json")}:
        removed = hook_state.cleanup(str(root), now)
        assert removed <= hook_state.CLEANUP_BATCH  # each run bounded
        now += hook_state.CLEANUP_EVERY
        runs += 1
        assert runs <= 4, f"{len(idle & {p.name for p in sessions.glob('*.json')})} left"
    assert {p.name for p in sessions.glob("*.json")} == set(order[:busy])


# --- finding 8: a damaged state that loads is a fresh start -------------------------------


def _state(events: list[Any], **extra: Any) -> bytes:
    data = {
        "format": "loopfuse-hook-state",
        "version": 2,
        "events": events,
        "noted": {},
        "refused": {},
        "next_id": 5,
        "batch": None,
        **extra,
    }
    return json.dumps(data).encode()


CALL = ["call", "#0", "Bash", {"command": "ls"}, None, "t0", 0]


@pytest.mark.parametrize(
    "content",
    [
        _state([["answer"]]),
        _state([CALL, ["answer", ["#0"], {"answer": "a", "error": None}]]),
        _state([["call", ["#0"], "Bash", {}, None, None, 0]]),
        _state([["call", "#0", "Bash", {}, None, {"id": 1}, 0]]),
        _state([["call", "#0", {"n": "Bash"}, {}, None, None, 0]]),
        _state([["call", "#0", "Bash", {}, None, None, [0]]]),
        _state([CALL, ["answer", "#0", {"answer": "a", "error": "yes"}]]),
        _state([CALL, ["answer", "#0", 7]]),
        _state([CALL], noted={"repeat:x": "soon"}),
        _state([CALL], next_id=-1),
        _state(
            [CALL],
            batch={"id": 0, "done": 1, "action": "allow", "message": "", "logged": "", "closed": 1},
        ),
    ],
)
def test_a_damaged_state_that_loads_is_a_fresh_start_and_the_session_stays_guarded(
    hook: Hook, content: bytes
) -> None:
    hook.answer(claude_pre("cat missing.txt", "t0"))
    Path(_only_session(hook.root)).write_bytes(content)
    assert "noted" in _run(hook, "claude-code", 6)
    assert "internal error" not in hook.log()


def test_a_state_file_with_non_finite_times_is_a_fresh_start(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(_state([CALL], refused={"repeat:x": float("nan")}))
    assert hook_state.load(str(path)).events == []


# --- finding 9: a wall clock stepped back does not join an old batch ----------------------


class BootHook(Hook):
    """A hook on a fake wall clock and a fake boot clock, which a step of the wall clock
    does not move."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.boot = 1000.0

    def clock(self) -> float:
        self.boot += 0.001
        return super().clock()

    def boot_clock(self) -> tuple[str, float]:
        return "boot-1", self.boot

    def run(self, payload: object, started: tuple[float, float]) -> dict[str, Any]:
        raw = json.dumps(payload).encode()
        output, status = handle(
            raw,
            self.flags,
            {},
            self.clock,
            started=started[0],
            boot_clock=self.boot_clock,
            started_boot=("boot-1", started[1]),
        )
        assert status == 0
        return json.loads(output) if output else {}

    def lap(self, command: str, i: int) -> dict[str, Any]:
        """One call whose hook starts now, on both clocks, then its answer."""
        self.now += 5.0  # the model thinks
        self.boot += 5.0
        before = self.run(claude_pre(command, f"t{i}"), (self.now, self.boot))
        if not _deny_reason(before):
            self.run(claude_failure(command, f"t{i}", "No such file"), (self.now, self.boot))
        return before


@pytest.mark.parametrize("step", [10.0, 30.0, 59.0])
def test_a_wall_clock_stepped_back_does_not_join_the_next_call_to_a_refused_batch(
    tmp_path: Path, step: float
) -> None:
    hook = BootHook(tmp_path / "state")
    answers = [hook.lap("cat missing.txt", i) for i in range(6)]
    assert _deny_reason(answers[-1])  # the loop is refused
    hook.now -= step  # NTP steps the wall clock back; the boot clock goes on
    fresh = hook.lap("ls src", 99)
    assert _deny_reason(fresh) is None
    assert _note(fresh) is None


def test_the_parallel_calls_of_a_turn_still_join_on_the_boot_clock(tmp_path: Path) -> None:
    hook = BootHook(tmp_path / "state")
    for i in range(8):
        hook.now += 5.0
        hook.boot += 5.0
        started = (hook.now, hook.boot)  # both hooks started by the CLI together
        first = hook.run(claude_pre("cat a.txt", f"a{i}"), started)
        second = hook.run(claude_pre("cat b.txt", f"b{i}"), started)
        assert bool(_deny_reason(first)) == bool(_deny_reason(second))
        for name, cid in (("a", f"a{i}"), ("b", f"b{i}")):
            if not _deny_reason(first):
                hook.run(claude_failure(f"cat {name}.txt", cid, "No such file"), started)
    batches = {e[6] for e in hook_state.load(_only_session(hook.root)).events if e[0] == "call"}
    assert len(batches) <= 8  # two calls per batch, never one batch per call


# --- finding 10: large structured arguments are bounded by their total size -------------


def _multi_edit(call_id: str, post: bool = False) -> dict[str, Any]:
    edits = [
        {"old_string": f"{i:04d}" + "o" * 3000, "new_string": f"{i:04d}" + "n" * 3000}
        for i in range(200)
    ]
    payload: dict[str, Any] = {
        **CLAUDE_COMMON,
        "hook_event_name": "PostToolUse" if post else "PreToolUse",
        "tool_name": "MultiEdit",
        "tool_input": {"file_path": "/home/dev/p/app.py", "edits": edits},
        "tool_use_id": call_id,
    }
    if post:
        payload["tool_response"] = "Error: old_string not found in app.py"
    return payload


def test_a_loop_of_calls_with_large_structured_arguments_is_noted(hook: Hook) -> None:
    seen = []
    for i in range(6):
        before = hook.answer(_multi_edit(f"m{i}"))
        if _deny_reason(before):
            seen.append("refused")
            continue
        after = hook.answer(_multi_edit(f"m{i}", post=True))
        seen.append("noted" if _note(after) else "ran")
    assert "noted" in seen, seen
    size = os.path.getsize(_only_session(hook.root))
    assert size < 20 * MAX_CALL_TEXT


def test_a_state_too_large_to_read_is_never_written(tmp_path: Path) -> None:
    path = str(tmp_path / "s.json")
    events: list[list[object]] = [
        ["call", f"#{i}", "Bash", {"command": "x" * 100_000}, None, None, i] for i in range(60)
    ]
    hook_state.save(path, hook_state.SessionState(events, next_id=60))
    assert os.path.getsize(path) <= hook_state.MAX_STATE_BYTES
    kept = hook_state.load(path).events
    assert kept
    assert kept[-1][1] == "#59"


# --- finding 11: the log and the cleanup marker are private -------------------------------


def test_the_log_and_the_cleanup_marker_are_private(hook: Hook) -> None:
    _bad_payload(hook)
    hook.answer(claude_post("ls", "t1", "a.py"))
    assert (hook.root / "hook.log").stat().st_mode & 0o777 == 0o600
    assert (hook.root / "last-cleanup").stat().st_mode & 0o777 == 0o600


def test_an_older_versions_public_log_is_made_private(hook: Hook) -> None:
    hook.root.mkdir(mode=0o700)
    log = hook.root / "hook.log"
    log.write_text("old line\n")
    log.chmod(0o644)
    _bad_payload(hook)
    assert log.stat().st_mode & 0o777 == 0o600
    assert log.read_text().startswith("old line\n")
