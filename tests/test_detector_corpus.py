"""The shipped defaults hold on the real trajectories of ../shared/corpus.

Not a benchmark: it asserts what the defaults were chosen for (docs/detector.md), so a
change that stops a good run, or stops fewer loops, fails here. Skipped when the corpus
is not beside the repository.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from loopfuse import LoopDetector

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not present")


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


def test_defaults_meet_the_corpus_targets() -> None:
    evaluation = corpus_eval()
    trajectories = evaluation.load(CORPUS)
    assert len(trajectories) >= 50
    row = evaluation.evaluate("defaults", LoopDetector(), trajectories)
    assert row.resolved_own <= 1, row.flagged  # good runs that ended on their own
    assert row.failed >= 14, row.flagged
    assert row.after >= 290
    assert evaluation.meets_targets(row)
