"""``benchmarks/corpus_eval.py --all / --loso``: every population judged by ``loopfuse
scan``'s own reader and guard decisions, per CLI and per held-out source.

The real populations are never part of the project: these tests build small synthetic
sets in the layouts of the real ones (a CLI-sessions set with its ``manifest.tsv`` and a
labels file; a trajectory set with its ``index.tsv``), as a folder and as a tarball.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent_transcripts import claude_session, codex_session, healthy, looping, write_lines

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"


def _module(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def populations() -> ModuleType:
    return _module("scan_populations")


@pytest.fixture(scope="module")
def corpus_eval() -> ModuleType:
    return _module("corpus_eval")


# A record of no format loopfuse knows (a Copilot CLI session of a future release, say):
# the session must be counted unreadable, never clean.
COPILOT_EVENT = {"kind": "frame", "payload": {"tool": "bash", "args": {"command": "ls"}}}
FILES = {
    "codex/own-tool/a/0/full.jsonl": ("codex", "own/tool", "healthy"),
    "codex/own-tool/a/1/full.jsonl": ("codex", "own/tool", "loop"),
    "claude-code/other-app/b/0/full.jsonl": ("claude-code", "other/app", "healthy"),
    "copilot-cli/own-tool/c/0/full.jsonl": ("copilot-cli", "own/tool", "healthy"),
}


def _cli_set(folder: Path, *, healthy_loop: bool = False) -> tuple[Path, Path]:
    """A CLI-sessions set: a healthy and a looping Codex session, a healthy Claude Code
    one, a Copilot CLI one loopfuse cannot read; ``healthy_loop`` labels the looping
    Codex session healthy (a healthy session the guard stops)."""
    root = folder / "cli-calibration"
    write_lines(root / "codex/own-tool/a/0/full.jsonl", codex_session("t0", healthy()))
    write_lines(root / "codex/own-tool/a/1/full.jsonl", codex_session("t1", looping()))
    claude = claude_session("5e1f0a3c-0000-4000-8000-000000000001", healthy())
    write_lines(root / "claude-code/other-app/b/0/full.jsonl", claude)
    write_lines(root / "copilot-cli/own-tool/c/0/full.jsonl", [COPILOT_EVENT])
    manifest = ["cli\trepo\tcommit\tsource_path\toutput_path"]
    labels = ["file\tcli\thalf\tverdict\tfirst_loop_turn\tevidence\trun"]
    for name, (cli, repo, verdict) in FILES.items():
        manifest.append(f"{cli}\t{repo}\tc0ffee\tx/full.jsonl\t{name}")
        if healthy_loop and verdict == "loop":
            verdict = "healthy"
        turn = "1" if verdict == "loop" else "-"
        labels.append(f"{name}\t{cli}\tvisible\t{verdict}\t{turn}\tsynthetic\t*")
    (root / "manifest.tsv").write_text("\n".join(manifest) + "\n")
    (folder / "labels.tsv").write_text("\n".join(labels) + "\n")
    return root, folder / "labels.tsv"


def _tarball(root: Path) -> Path:
    target = root.parent / f"{root.name}.tar.xz"
    with tarfile.open(target, "w:xz") as tar:
        tar.add(root, arcname=root.name)
    return target


def _settings(populations: ModuleType) -> dict[str, Any]:
    return {mode: populations.settings_for(mode) for mode in populations.MODES}


def test_cli_sessions_are_read_as_scan_reads_them(populations: ModuleType, tmp_path: Path) -> None:
    root, labels = _cli_set(tmp_path)
    sessions = populations.read_cli_sessions(root, labels, _settings(populations))
    by_name = {s.name: s for s in sessions}
    assert set(by_name) == set(FILES)
    loop = by_name["codex/own-tool/a/1/full.jsonl"]
    assert loop.source == "own/tool"
    assert loop.label == "loop"
    assert loop.first_loop_turn == 1
    assert loop.outcomes["refuse"].stop is not None
    assert loop.outcomes["refuse"].kinds
    assert loop.outcomes["warn"].note is not None  # warn notes before it stops
    for name in ("codex/own-tool/a/0/full.jsonl", "claude-code/other-app/b/0/full.jsonl"):
        for outcome in by_name[name].outcomes.values():
            assert outcome.read == "ok"
            assert outcome.acted is None
            assert outcome.calls == len(healthy())
    copilot = by_name["copilot-cli/own-tool/c/0/full.jsonl"]
    assert {o.read for o in copilot.outcomes.values()} == {"unreadable"}
    assert all(o.error for o in copilot.outcomes.values())


def test_a_tarball_gives_what_its_folder_gives(populations: ModuleType, tmp_path: Path) -> None:
    root, labels = _cli_set(tmp_path)
    settings = _settings(populations)
    folder = populations.read_cli_sessions(root, labels, settings)
    packed = populations.read_cli_sessions(_tarball(root), labels, settings)
    assert [(s.name, s.source, s.outcomes) for s in packed] == [
        (s.name, s.source, s.outcomes) for s in folder
    ]


def test_a_reader_that_raises_makes_the_file_unreadable_not_a_crash(
    populations: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(name: str, data: bytes, *, log: bool = False) -> None:
        raise RuntimeError("reader bug")

    monkeypatch.setattr(populations, "read_bytes", broken)
    outcomes = populations.judge("x.jsonl", b"{}\n", _settings(populations))
    assert {o.read for o in outcomes.values()} == {"unreadable"}
    assert all("reader bug" in o.error for o in outcomes.values())


def test_a_file_with_no_conversation_is_empty_not_clean(populations: ModuleType) -> None:
    only_notes = {
        "sessionId": "s",
        "projectHash": "p",
        "startTime": "2026-01-01T00:00:00Z",
        "messages": [{"id": "i", "timestamp": "t", "type": "info", "content": "hi"}],
    }
    outcomes = populations.judge("s.json", json.dumps(only_notes).encode(), _settings(populations))
    assert {o.read for o in outcomes.values()} == {"empty"}


def test_the_gate_fails_on_a_source_with_a_healthy_session_stopped(
    populations: ModuleType, tmp_path: Path
) -> None:
    settings = _settings(populations)
    root, labels = _cli_set(tmp_path / "ok")
    text, holds = populations.loso_table(
        populations.read_cli_sessions(root, labels, settings), populations.MODES
    )
    assert holds, text
    root, labels = _cli_set(tmp_path / "bad", healthy_loop=True)
    text, holds = populations.loso_table(
        populations.read_cli_sessions(root, labels, settings), populations.MODES
    )
    assert not holds
    assert "FAILS: own/tool (refuse: 1), own/tool (warn: 1)" in text
    assert "| other/app | cli | 1 | 0 of 1 |" in text


def _trajectory(calls: list[str], outcome: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for k, command in enumerate(calls):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "bash"}}
        call["function"]["arguments"] = json.dumps({"command": command})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"out of {command}"})
    messages.append({"role": "assistant", "content": "done"})
    return {"messages": messages, "outcome": outcome, "exit_reason": "submitted"}


def test_trajectories_take_their_pool_from_the_index(
    populations: ModuleType, tmp_path: Path
) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    good = _trajectory([f"sed -n {i}p a.py" for i in range(6)], "resolved")
    (folder / "h-good.json").write_text(json.dumps(good))
    (folder / "h-stuck.json").write_text(json.dumps(_trajectory(["pytest"] * 8, "failed")))
    (folder / "index.tsv").write_text("file\tpool\nh-good.json\tpool-a\nh-stuck.json\tpool-b\n")
    sessions = populations.read_trajectories("calibration", folder, _settings(populations))
    by_name = {s.name: s for s in sessions}
    assert by_name["h-good"].source == "pool-a"
    assert by_name["h-good"].healthy
    assert by_name["h-good"].outcomes["refuse"].stop is None
    stuck = by_name["h-stuck"]
    assert stuck.source == "pool-b"
    assert stuck.looping
    assert stuck.outcomes["refuse"].stop is not None
    assert stuck.outcomes["refuse"].calls_after > 0


def test_loso_exit_status_is_the_gate(
    corpus_eval: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, labels = _cli_set(tmp_path / "ok")
    argv = ["--loso", "--only", "cli", "--cli", str(root), "--labels", str(labels)]
    assert corpus_eval.main(argv) == 0
    out = capsys.readouterr()
    assert "| copilot-cli | refuse | 1 | 0 (0) | 0 | 1 |" in out.out  # unreadable, apart
    assert "release gate" in out.out
    assert "seconds: cli" in out.err
    root, labels = _cli_set(tmp_path / "bad", healthy_loop=True)
    argv = ["--loso", "--only", "cli", "--cli", str(root), "--labels", str(labels)]
    assert corpus_eval.main(argv) == 1
    capsys.readouterr()
    assert corpus_eval.main([*argv, "--clis", "claude-code"]) == 0  # the Codex one left out
    assert "| codex |" not in capsys.readouterr().out
    assert corpus_eval.main([*argv, "--clis", "cobol"]) == 2
    assert corpus_eval.main(["--all", "--only", "nothing"]) == 2


def test_a_population_that_is_missing_is_a_usage_error(
    corpus_eval: ModuleType, tmp_path: Path
) -> None:
    assert corpus_eval.main(["--all", "--only", "corpus", "--corpus", str(tmp_path / "no")]) == 2
