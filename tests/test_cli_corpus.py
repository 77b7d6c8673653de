"""`loopfuse scan` on every file of the shared corpus of real trajectories (skipped if absent).

The corpus is data next to the repository (``../shared/corpus``), never copied into it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import fast_and_full
from loopfuse.cli.main import main
from loopfuse.detector import LoopDetector

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")


def every_file() -> list[Path]:
    return sorted(path for path in CORPUS.rglob("*") if path.is_file())


# warn (the default) acts, noting, on every turn its early detector flags (every count one
# notch lower: the note comes one count before the refusal); refuse on every turn the
# detector flags.
@pytest.mark.parametrize("mode", ["warn", "refuse"])
@pytest.mark.parametrize("scope", fast_and_full("sample", "folder"))
def test_scanning_the_corpus_folder_finishes_and_matches_a_live_detector(
    scope: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole folder (slow), or by default every seventh trajectory named one by one."""
    trajectories = sorted(CORPUS.rglob("*.json"))
    if scope == "sample":
        trajectories = trajectories[::7]
    paths = [str(CORPUS)] if scope == "folder" else [str(path) for path in trajectories]
    code = main(["scan", *paths, "--format", "json", "--mode", mode])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err == ""
    report = json.loads(captured.out)
    assert [Path(f["name"]) for f in report["files"]] == trajectories
    assert report["errors"] == []
    assert code == (1 if report["summary"]["found"] else 0)
    # Cross-check each file against the detector run by hand on each turn's request.
    detector = LoopDetector().earlier() if mode == "warn" else LoopDetector()
    for result in report["files"]:
        data = json.loads(Path(result["name"]).read_text(encoding="utf-8"))
        assert result["kind"] == "trajectory"
        assert result["meta"]["outcome"] == data["outcome"]
        flagged = [
            number
            for number, k in enumerate(assistant_turns(data["messages"]), start=1)
            if not detector.scan({"model": data["model"], "messages": data["messages"][:k]}).ok
        ]
        acted = [
            turn
            for finding in result["findings"]
            for span in finding["spans"]
            if span["guard"] == "detector"
            for turn in range(span["first"], span["last"] + 1)
        ]
        assert sorted(acted) == flagged, result["name"]
        assert result["requests"] == len(assistant_turns(data["messages"]))


def assistant_turns(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, message in enumerate(messages) if message.get("role") == "assistant"]


@pytest.mark.parametrize("path", every_file(), ids=lambda path: path.name)
def test_every_file_alone_never_tracebacks(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scan", str(path), "--format", "markdown", "--guards", "breaker,dedup"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    if path.suffix == ".json":
        assert code in (0, 1), captured.err
        assert captured.err == ""
    else:  # e.g. the corpus README: not a transcript, reported on one line
        assert code == 2
        [line] = captured.err.strip().splitlines()
        assert path.name in line
