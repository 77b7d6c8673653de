"""The shipped defaults hold on real agent trajectories.

Not a benchmark: it asserts what the defaults were chosen for (docs/detector.md), so a
change that stops a good run, or stops fewer loops, fails here. The trajectories are
never part of the project: the dev corpus (``../shared/corpus``) and the calibration set
(``../shared/calibration.tar.xz``) are read where they lie, and each test is skipped,
saying so, when its data is not beside the repository.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from loopfuse import LoopDetector
from loopfuse.detector import scan_intent

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
CALIBRATION = ROOT.parent / "shared" / "calibration.tar.xz"
OPENHANDS = ROOT.parent / "shared" / "openhands-calibration.tar.xz"


def corpus_eval() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "corpus_eval", ROOT / "benchmarks" / "corpus_eval.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_eval"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not present")
def test_defaults_meet_the_dev_corpus_targets() -> None:
    evaluation = corpus_eval()
    trajectories = evaluation.load(CORPUS)
    assert len(trajectories) >= 50
    row = evaluation.score(evaluation.flags_of(trajectories, LoopDetector()), trajectories, "")
    assert row.resolved_own == 0, row.flagged  # no good run that ended on its own is stopped
    assert row.failed >= 14, row.flagged
    assert row.after >= 290, row.flagged


@pytest.mark.skipif(not CALIBRATION.is_file(), reason="../shared/calibration.tar.xz is absent")
def test_defaults_meet_the_calibration_targets() -> None:
    evaluation = corpus_eval()
    trajectories = evaluation.load(CALIBRATION)
    assert len(trajectories) >= 600
    row = evaluation.score(evaluation.flags_of(trajectories, LoopDetector()), trajectories, "")
    assert row.resolved == 0, row.flagged  # no resolved run stopped, budget or not
    assert row.failed >= 30, row.flagged
    assert row.after >= 600, row.flagged
    # Issue 20's targets, in both modes of the integrations' guard; warn's raised by
    # issue 27 (a note ignored: a loop in any shape, or the noted failure again, after it;
    # the note one count before the refusal).
    verdicts = evaluation.all_verdicts(trajectories, LoopDetector())
    for mode, failed, after in (("refuse", 36, 879), ("warn", 36, 870)):
        row = evaluation.score(evaluation.stops(verdicts, mode), trajectories, mode)
        assert row.resolved == 0, (mode, row.flagged)
        assert row.failed >= failed, (mode, row.flagged)
        assert row.after >= after, (mode, row.after)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not present")
def test_the_one_pass_replay_gives_what_scan_gives_on_every_request() -> None:
    """The evaluation replays each run once; a proxy scans each request: same verdicts."""
    evaluation = corpus_eval()
    det = LoopDetector()
    for t in evaluation.load(CORPUS)[::6]:
        walk = evaluation.Replay(det.settings)
        steps = set(t.steps)
        for k, message in enumerate(t.messages):
            walk.add(message, k)
            if k in steps:
                request = {"messages": t.messages[: k + 1]}
                assert walk.verdict() == scan_intent(request, det), (t.name, k)


@pytest.mark.slow
@pytest.mark.skipif(not OPENHANDS.is_file(), reason="../shared/openhands-calibration is absent")
@pytest.mark.parametrize("mode", ["refuse", "warn"])
def test_no_openhands_run_that_succeeded_on_its_own_is_stopped(mode: str) -> None:
    """A harness the defaults were not first chosen on (OpenHands CodeActAgent: its
    edits land in /workspace while its checks import /testbed)."""
    evaluation = corpus_eval()
    trajectories = evaluation.load(OPENHANDS)
    assert len(trajectories) >= 200
    flags = evaluation.flags_of(trajectories, LoopDetector(), mode)
    row = evaluation.score(flags, trajectories, "")
    assert row.resolved_own == 0, row.flagged
    assert row.failed >= 5, row.flagged
    if mode == "warn":  # issue 20's targets
        assert row.failed >= 12, row.flagged
        assert row.after >= 200, row.flagged
