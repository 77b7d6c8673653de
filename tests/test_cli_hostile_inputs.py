"""`loopfuse scan` on hostile folders and streams: a FIFO, a symbolic link to a device, an
endless line, an endless standard input. Each is refused with one line naming it, in
bounded time and memory, and the other files are still scanned.

Every test that could hang on a regression is guarded: the CLI runs in a subprocess with
a timeout, or in-process under ``signal.alarm``, so a hang fails instead of blocking the
suite. Sizes are scaled down by setting a small ``MAX_FILE_BYTES`` for the test (the
limit is read when a file is read), and endless inputs are generated, never written to
disk (a sparse file, a generator stream).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from loopfuse.cli import readers
from loopfuse.cli.main import main
from loopfuse.cli.readers import InputError, Log, read_path

GUARD = 30  # seconds: only reached when something hangs

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
needs_dev = pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")


@contextmanager
def alarm(seconds: int = GUARD) -> Iterator[None]:
    """Fail (not hang) when the block takes longer than ``seconds``."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def looping_run(laps: int = 8) -> dict[str, object]:
    messages: list[dict[str, object]] = [{"role": "user", "content": "fix the build"}]
    for i in range(laps):
        call = {"name": "bash", "arguments": json.dumps({"command": "make"})}
        messages.append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "function": call}]}
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "error: foo.h"})
    return {"outcome": "failed", "model": "m", "messages": messages}


def request_line(text: str) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    return json.dumps(body).encode() + b"\n"


def scan_subprocess(*args: str, stdin: int | None = subprocess.DEVNULL) -> tuple[int, str, str]:
    """``loopfuse scan ARGS`` in a subprocess, killed (and failed) after :data:`GUARD` s."""
    with subprocess.Popen(
        [sys.executable, "-m", "loopfuse", "scan", *args, "--no-progress"],
        stdin=stdin if stdin is not None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            # With stdin=None the pipe is held open and never written: a reader of it hangs.
            out, err = process.communicate(timeout=GUARD) if stdin is not None else _wait(process)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            pytest.fail(f"loopfuse scan {' '.join(args)} still running after {GUARD} s: a hang")
    assert "Traceback" not in err
    return process.returncode, out, err


def _wait(process: subprocess.Popen[str]) -> tuple[str, str]:
    assert process.stdout is not None
    assert process.stderr is not None
    process.wait(timeout=GUARD)
    return process.stdout.read(), process.stderr.read()


def sparse_log(path: Path, line: int) -> Path:
    """A log whose second line is ``line`` bytes long, written sparse (no disk used):
    a request, the long line (text first, then zeros), a request."""
    with path.open("wb") as handle:
        handle.write(request_line("before"))
        handle.write(b'{"model": "m", "messages": [{"role": "user", "content": "')
        handle.write(b"x" * 16384)  # what is looked at first is text
        handle.truncate(handle.tell() + line)
        handle.seek(0, os.SEEK_END)
        handle.write(b'"}]}\n' + request_line("after"))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with one looping run in it (so the other files must not stop its scan)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a-loop.json").write_text(json.dumps(looping_run()), encoding="utf-8")
    return runs


def assert_refused(code: int, out: str, err: str, name: str) -> None:
    lines = err.strip().splitlines()
    assert lines == [f"loopfuse scan: error: {name}: not a regular file"], err
    assert code == 1  # the loop in the other file is still found
    assert "a-loop.json" in out
    assert "1 unreadable" in out
    assert "internal error" not in out + err


@needs_fifo
def test_a_fifo_in_a_folder_is_refused_not_waited_on(folder: Path) -> None:
    fifo = folder / "run.json"
    os.mkfifo(fifo)
    code, out, err = scan_subprocess(str(folder))
    assert_refused(code, out, err, str(fifo))


@needs_dev
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/stdin", "/dev/null"])
def test_a_link_to_a_device_in_a_folder_is_refused(folder: Path, device: str) -> None:
    link = folder / "run.json"
    link.symlink_to(device)
    # stdin is a pipe held open and never written: reading /dev/stdin would hang.
    code, out, err = scan_subprocess(str(folder), stdin=None)
    assert_refused(code, out, err, str(link))


@needs_fifo
def test_a_fifo_is_refused_even_when_it_replaces_a_checked_file(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race: the path was a regular file when it was looked at and is a FIFO when it
    # is opened. The opened descriptor is what is checked, and it is opened without
    # waiting for a writer.
    fifo = folder / "run.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setattr(readers, "_looks_regular", lambda path: True)
    for name in ("run.jsonl", "run.json"):
        if not (folder / name).exists():
            os.mkfifo(folder / name)
        with alarm(), pytest.raises(InputError, match="not a regular file"):
            read_path(folder / name)


@needs_fifo
def test_a_log_swapped_for_a_fifo_after_it_was_recognised_is_refused(folder: Path) -> None:
    # A log is read line by line after it was recognised: it is opened (and checked)
    # again then, so a FIFO put in its place is refused, not waited on.
    log = folder / "run.jsonl"
    log.write_bytes(request_line("hi") * 3)
    source = read_path(log)
    assert isinstance(source, Log)
    log.unlink()
    os.mkfifo(log)
    with alarm(), pytest.raises(InputError, match="not a regular file"):
        list(source.open())


def scan_measured(path: Path) -> tuple[int, int]:
    """``loopfuse scan PATH`` as JSON under an alarm: its exit status, and the most memory
    Python held meanwhile (tracemalloc's peak)."""
    tracemalloc.start()
    try:
        with alarm():
            code = main(["scan", str(path), "--format", "json", "--no-progress"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return code, peak


def test_a_line_longer_than_the_limit_is_skipped_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    limit = 1024 * 1024
    monkeypatch.setattr(readers, "MAX_FILE_BYTES", limit)
    log = sparse_log(tmp_path / "proxy.jsonl", 64 * limit)
    code, peak = scan_measured(log)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [
        f"loopfuse scan: error: {log}: line 2: longer than 1 MiB (the limit of one request)"
    ]
    report = json.loads(captured.out)
    assert report["files"][0]["requests"] == 2  # the lines before and after it
    assert report["files"][0]["bad_lines"] == 1
    assert peak < 8 * limit, f"peak {peak:,} bytes for a line cut at {limit:,}"


class Endless(io.RawIOBase):
    """A stream that never ends: what a reader without a limit never finishes."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        chunk = (
            b'{"model": "m", "messages": [{"role": "user", "content": "' if not self.served else b""
        )
        size = len(buffer)
        data = (chunk + b"x" * size)[:size]
        buffer[:size] = data
        self.served += size
        return size


def test_stdin_is_bounded_as_a_file_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    limit = 1024 * 1024
    monkeypatch.setattr(readers, "MAX_FILE_BYTES", limit)
    endless = Endless()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BufferedReader(endless)))
    tracemalloc.start()
    try:
        with alarm():
            code = main(["scan", "-", "--no-progress"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [
        "loopfuse scan: error: <stdin>: too large (over the limit of 1 MiB; "
        "save a log as a .jsonl file and scan that)"
    ]
    assert endless.served <= 2 * limit  # it stopped reading at the limit
    assert peak < 8 * limit


def test_stdin_under_the_limit_is_read_whole(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.dumps(looping_run()).encode()
    monkeypatch.setattr(readers, "MAX_FILE_BYTES", len(data))  # exactly at the limit
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["scan", "-", "--no-progress"]) == 1
    assert "<stdin>" in capsys.readouterr().out


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="no /proc")
def test_what_is_read_is_bounded_not_only_what_stat_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /proc files are regular files whose size says 0: the read itself is bounded.
    monkeypatch.setattr(readers, "MAX_FILE_BYTES", 100)
    assert Path("/proc/self/maps").stat().st_size == 0
    link = tmp_path / "maps.json"
    link.symlink_to("/proc/self/maps")
    with pytest.raises(InputError, match=r"too large \(over the limit of 100 bytes"):
        read_path(link)


@pytest.mark.slow
def test_a_real_line_of_1_5_gb_stays_within_the_file_limit(tmp_path: Path) -> None:
    # The default limit, in a real process: a sparse 1.5 GB line costs at most the
    # limit's worth of memory, not twice the line. What the reader holds is measured with
    # tracemalloc (every allocation Python makes), not the process's RSS, which moves
    # with the machine's allocator and huge-page settings (CI once saw 460 MB of RSS
    # where this machine sees 290-310 MB for the same run).
    log = sparse_log(tmp_path / "huge.jsonl", 1536 * 1024 * 1024)
    probe = (
        "import sys, tracemalloc\n"
        "from loopfuse.cli.main import main\n"
        "tracemalloc.start()\n"
        "code = main(['scan', sys.argv[1], '--no-progress'])\n"
        "peak = tracemalloc.get_traced_memory()[1]\n"
        "print('PEAK', peak, 'CODE', code, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(log)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "line 2: longer than 256 MiB" in done.stderr, done.stderr[-2000:]
    peak = int(done.stderr.split("PEAK ")[1].split()[0])
    limit = readers.MAX_FILE_BYTES
    assert peak < limit + 32 * 1024 * 1024, f"peak {peak:,} bytes for a limit of {limit:,}"


def test_a_cli_transcript_is_read_with_the_same_bounds_as_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Claude Code transcript (recognised by its content) holding one line past the
    limit: that line is skipped in bounded memory, the session around it is scanned; a
    transcript swapped for a FIFO after it was recognised is refused, not waited on."""
    from agent_transcripts import claude_session, looping

    limit = 1024 * 1024
    monkeypatch.setattr(readers, "MAX_FILE_BYTES", limit)
    lines = claude_session("6d3f0d5a-7f0e-4d2a-9d59-2d3c6f1b0a11", looping())
    path = tmp_path / "session.jsonl"
    with path.open("wb") as handle:
        handle.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines[:3]))
        handle.write(b'{"type": "user", "message": "' + b"x" * (8 * limit) + b'"}\n')
        handle.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines[3:]))
    source = read_path(path)
    assert not isinstance(source, Log)  # read as a CLI's session, not as a proxy log
    code, peak = scan_measured(path)
    captured = capsys.readouterr()
    assert code == 1  # the loop around the long line is still found
    assert "line 4: longer than 1 MiB" in captured.err
    assert peak < 8 * limit, f"peak {peak:,} bytes for a line cut at {limit:,}"
    path.unlink()
    os.mkfifo(path)
    with alarm(), pytest.raises(InputError, match="not a regular file"):
        source.open()  # type: ignore[union-attr]
