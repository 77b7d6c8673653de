"""Every script in ``benchmarks/`` runs at its smallest and prints its table.

A benchmark that nothing runs breaks without a sound: ``bench_agent_sessions.py`` called
caches that had been replaced and failed for a whole session before anyone noticed.
Here each script runs as a child process, as a developer runs it (``python
benchmarks/NAME.py ...``), with its smallest sizes and rounds, on inputs it builds
itself or that these tests write (synthetic: never the real populations, which CI does
not have), and must exit 0 having printed its header and its ratio rows.

No figure is judged: on a loaded machine any speed is possible, and a smoke run's
figures are noise. These tests prove that the benchmarks still run against the code
as it is, and print what the docs quote from them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent_clis import needs
from agent_transcripts import claude_session, codex_session, healthy, looping, write_lines
from opencode_cli import needs_opencode
from store_helpers import REDIS_REQUIRED, REDIS_SERVER

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
# A hung child is a failure, not a stuck suite; no test asserts anything about time.
HANG = 600.0
RATIO = r"\d+\.\d\dx"  # a figure as a multiple of the run's own baseline, e.g. "1.23x"


def run(script: str, *args: str | Path) -> str:
    """Run ``benchmarks/SCRIPT`` with ``args``; its stdout, after checking it exited 0."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout


def printed(out: str, *patterns: str) -> None:
    """Every pattern (a regular expression) is found in ``out``."""
    missing = [pattern for pattern in patterns if not re.search(pattern, out, re.MULTILINE)]
    assert not missing, f"not printed: {missing}\n--- output:\n{out[-4000:]}"


# Each script, its smallest run, and what it must print (its header and ratio rows).
SMOKE: dict[str, tuple[list[str], list[str]]] = {
    "bodies.py": ([], [r"^\d+ bytes$"]),
    "bench_dedup.py": (
        ["--rounds", "1"],
        [
            r"json\.loads \(baseline\) .* 1\.00x",
            rf"RequestKey\.from_request, body .* {RATIO}",
            rf"capacity 100,000: .* {RATIO} of capacity 100",
        ],
    ),
    "bench_guard.py": (
        ["--rounds", "1"],
        [
            r"json\.loads \(baseline\) .* 1\.00x",
            rf"Guard\(\)\.check, fresh session .* {RATIO}",
            rf"GuardTransport\(mock\), no session .* {RATIO}",
        ],
    ),
    "bench_intent.py": (
        ["--rounds", "1"],
        [
            r"json\.loads \(baseline\) .* 1\.00x",
            rf"loopfuse\.scan \[\w+ (\+C|py)\] .* {RATIO}",
            rf"LoopBreaker\.check, 100,000 live sessions .* {RATIO}",
        ],
    ),
    "bench_scan.py": (
        ["--turns", "24", "--repeat", "1"],
        [
            r"^\| body \| size \| json\.loads \| extract_intent \| scan \| scan / json\.loads \|$",
            rf"^\| anthropic \| .* \*\*{RATIO}\*\* \|$",
            rf"^\| openai_chat, last 6 turns loop \| .* \*\*{RATIO}\*\* \|$",
        ],
    ),
    "bench_agent_sessions.py": (
        ["--turns", "20,200"],
        [
            r"^\| turns \| input \| size \| requests \| scan \| vs the request body \|$",
            *(
                rf"^\| 200 \| {name} \| .* {RATIO} \|$"
                for name in ("request body \\(baseline\\)", "Claude Code", "Codex", "Gemini CLI")
            ),
        ],
    ),
    "bench_hook.py": (
        ["--rounds", "1", "--calls", "1"],
        [
            r"^agent +state +before +after +no-op +before-noop +<=80ms$",
            *(rf"^{agent} +\d+ " for agent in ("claude-code", "codex", "gemini", "opencode")),
            r"^crush +\d+ +[\d.]+ \[ *[\d.]+\] +- ",  # no hook after a call
        ],
    ),
    "shell_eval.py": (
        ["--worst", "--repeat", "1"],
        [
            r"^\| shape \| answer \| classifier ms \| shlex\.split ms \| ratio \|$",
            r"^\| commands 'ls;' \| (True|False) \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$",
            r"^worst: ",
        ],
    ),
}


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_benchmark_runs_at_its_smallest(script: str) -> None:
    args, patterns = SMOKE[script]
    printed(run(script, *args), *patterns)


def test_bench_cli_runs_at_its_smallest(tmp_path: Path) -> None:
    """The trajectories and the proxy log ``loopfuse scan`` reads (the log in a child
    process, which must find the log's loop); ``--keep`` so that the inputs land in the
    test's own folder."""
    out = run("bench_cli.py", "--turns", "20,200", "--log-mb", "1", "--keep", tmp_path)
    printed(
        out,
        r"^\| trajectory \| size \| requests \| scan \| per turn \| vs 10x shorter \|$",
        r"^\| 200 turns \| .* \| \d+\.\dx for 10x the turns \|$",
        r"^JSON Lines log: .* `loopfuse scan` .* \(exit 1\), peak memory",
    )
    assert (tmp_path / "proxy.jsonl").is_file()


def test_bench_store_runs_at_its_smallest() -> None:
    """Against its own ``redis-server``: skipped without one, a failure in CI
    (``LOOPFUSE_REQUIRE_REDIS=1``), as the store tests are."""
    if REDIS_SERVER is None:
        reason = "redis-server is not installed (Debian: apt-get install redis-server)"
        if REDIS_REQUIRED:
            pytest.fail(f"LOOPFUSE_REQUIRE_REDIS=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    pytest.importorskip("redis", reason="the redis package is not installed")
    out = run("bench_store.py", "--seconds", "0.1", "--rounds", "1")
    printed(
        out,
        r"^round trips per step",
        r"^  LoopBreaker\.check +1\.00$",
        r"json\.loads of the 50 KB body \(baseline\) .* 1\.00x",
        rf"LoopBreaker\.check, Redis store .* {RATIO}",
        r"^  4 process\(es\): +[\d,]+ checks/s$",
        r"^  1000 tasks on \d+ connections: .* 0 failures",
    )


@pytest.mark.slow
@needs_opencode
def test_bench_opencode_runs_at_its_smallest() -> None:
    """The real OpenCode (skipped without it, a failure in CI), two calls a run: three
    OpenCode runs, so with the slow tests (which CI runs too)."""
    out = run("bench_opencode.py", "--runs", "1", "--calls", "2")
    printed(
        out,
        r"^set-up +in the plugin: before +after +a call +per call \(model\)$",
        r"^no plugin +0\.0 +0\.0 +0\.0 +[\d.]+$",
        r"^plugin, loopfuse hook +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ \(\+-?[\d.]+\)$",
    )


# --- the population scripts, on synthetic sets in the real ones' layouts -----------------


def trajectory_set(folder: Path) -> Path:
    """Four trajectories in two pools (OpenAI Chat, ``outcome``, ``exit_reason``; pools
    from ``index.tsv``): per pool a resolved run and a failed run ending in a loop."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bench_scan import build_turns, openai_body
    finally:
        sys.path.remove(str(BENCHMARKS))
    folder.mkdir()
    index = ["file\tpool"]
    for pool, seed in (("alpha", 3), ("beta", 5)):
        for outcome, tail in (("resolved", 0), ("failed", 10)):
            name = f"{pool}__{outcome}"
            body = json.loads(openai_body(build_turns(30, seed=seed, loop_tail=tail)))
            run = {"outcome": outcome, "exit_reason": "submitted", **body}
            (folder / f"{name}.json").write_text(json.dumps(run), encoding="utf-8")
            index.append(f"{name}.json\t{pool}")
    (folder / "index.tsv").write_text("\n".join(index) + "\n", encoding="utf-8")
    return folder


def cli_set(folder: Path) -> tuple[Path, Path]:
    """A CLI-sessions set (``manifest.tsv``, one folder per CLI) and its labels file: a
    healthy and a looping Codex session, a healthy Claude Code one."""
    root = folder / "cli-calibration"
    files = {
        "codex/own-tool/a/0/full.jsonl": ("codex", codex_session("t0", healthy()), "healthy"),
        "codex/own-tool/a/1/full.jsonl": ("codex", codex_session("t1", looping()), "loop"),
        "claude-code/app/b/0/full.jsonl": (
            "claude-code",
            claude_session("5e1f0a3c-0000-4000-8000-000000000001", healthy()),
            "healthy",
        ),
    }
    manifest = ["cli\trepo\tcommit\tsource_path\toutput_path"]
    labels = ["file\tcli\thalf\tverdict\tfirst_loop_turn\tevidence\trun"]
    for name, (cli, lines, verdict) in files.items():
        write_lines(root / name, lines)
        manifest.append(f"{cli}\t{name.split('/')[1]}\tc0ffee\tx/full.jsonl\t{name}")
        turn = "1" if verdict == "loop" else "-"
        labels.append(f"{name}\t{cli}\tvisible\t{verdict}\t{turn}\tsynthetic\t*")
    (root / "manifest.tsv").write_text("\n".join(manifest) + "\n", encoding="utf-8")
    (folder / "labels.tsv").write_text("\n".join(labels) + "\n", encoding="utf-8")
    return root, folder / "labels.tsv"


def test_corpus_eval_replays_a_trajectory_set(tmp_path: Path) -> None:
    """Every table of the trajectory replay: the configurations, the pools, each signal
    alone and the leave-one-pool-out selection, in both modes."""
    source = trajectory_set(tmp_path / "runs")
    out = run("corpus_eval.py", source, "--pools", "--signals", "--lopo", "--list")
    for mode in ("refuse", "warn"):
        printed(
            out,
            rf"^\| {mode}: configuration \| resolved stopped \(of 2\) \|",
            rf"^\| {mode}: pool \| runs \(resolved / failed\) \|",
            rf"^\| {mode}: signal alone \| threshold \|",
            rf"^\| {mode}: held-out pool \| chosen on the other pools \|",
            r"^\| \*\*defaults\*\* \| 0 \| 0 \| 0 \| 2 \| ",  # both loops stopped, no good run
        )


def test_corpus_eval_judges_every_population_with_scan_populations(tmp_path: Path) -> None:
    """``--loso`` (``scan_populations``: loopfuse scan's own readers and decisions) on a
    trajectory set and a CLI-sessions set: the tables and the release gate, which holds."""
    source = trajectory_set(tmp_path / "runs")
    sessions, labels = cli_set(tmp_path)
    out = run(
        "corpus_eval.py",
        "--loso",
        "--list",
        "--only",
        "corpus,cli",
        "--corpus",
        source,
        "--cli",
        sessions,
        "--labels",
        labels,
    )
    printed(
        out,
        r"^\| population \| mode \| files \| unreadable / empty \| healthy stopped ",
        r"^\| corpus \| refuse \| 4 \| 0 / 0 \| 0 of 2 \| 0 of 0 \| 2 of 2 \|",
        r"^\| CLI \| mode \| sessions \| read \(calls\) \|",
        r"^\| codex \| refuse \| 2 \| 2 \(\d+\) \|",
        r"^\| judged loop \| first loop turn \|",
        r"^\| held-out source \| population \| files \|",
        r"^release gate .*: holds;",
    )


def test_answerless_eval_replays_the_sets_without_their_answers(tmp_path: Path) -> None:
    """Crush's reading (no answer ever known) on a trajectory set and a CLI-sessions set:
    the table, each population's row, and the healthy runs stopped by source."""
    source = trajectory_set(tmp_path / "runs")
    sessions, labels = cli_set(tmp_path)
    out = run(
        "answerless_eval.py",
        "--only",
        "corpus,cli",
        "--corpus",
        source,
        "--cli",
        sessions,
        "--labels",
        labels,
    )
    printed(
        out,
        r"^\| population \| files \(unread\) \| healthy \| healthy stopped refuse / warn \|",
        r"^\| corpus \| 4 \(0\) \| 2 \| 0 / 0 \| 2 \| ",
        r"^\| cli \| 3 \(0\) \| 2 \| 0 / 0 \| 1 \| ",
        r"^healthy stopped \(refuse\) by source: \{\}$",
    )


def test_shell_eval_reads_a_folder_of_trajectories(tmp_path: Path) -> None:
    """The classifier over every tool call of a folder (synthetic, not the real ones the
    script defaults to), with samples of each class."""
    source = trajectory_set(tmp_path / "runs")
    out = run("shell_eval.py", source, "--samples", "2")
    printed(
        out,
        r"^tool calls: \d+; shell tools by name: [1-9]\d*$",
        r"^cost uncached \(\d+ commands\): median [\d.]+ us, p99 ",
        r"^--- 2 random read-only commands$",
    )


@pytest.mark.slow
@needs("pi")
def test_bench_pi_extension_runs_at_its_smallest() -> None:
    """The real pi (``.ci/agent-clis``), one run of one call for each hook: skipped
    without pi, a failure in CI (``LOOPFUSE_REQUIRE_AGENT_CLIS=1``), as pi's own tests."""
    out = run("bench_pi_extension.py", "--rounds", "1", "--calls", "1")
    printed(
        out,
        r"^pi, 1 tool calls a run, median of 1 runs$",
        *(rf"^{name} +[\d.]+ \[ *[\d.]+\] +-?[\d.]+ \[ *-?[\d.]+\]$" for name in PI_HOOKS),
    )


PI_HOOKS = ("no extension", "/bin/true", "python -c pass", "loopfuse hook")


def test_every_script_is_run() -> None:
    """A new benchmark gets its smoke run here; the helper modules are run through the
    scripts that import them."""
    helpers = {"timing.py", "scan_populations.py"}  # run by the bench_* / corpus_eval.py
    own_tests = {"bench_cli.py", "bench_store.py", "corpus_eval.py", "shell_eval.py"}
    own_tests.add("bench_pi_extension.py")
    own_tests.add("bench_opencode.py")
    own_tests.add("answerless_eval.py")
    scripts = {path.name for path in BENCHMARKS.glob("*.py")}
    assert scripts == set(SMOKE) | own_tests | helpers, "a benchmark this file does not run"
    for name in helpers:
        assert '__name__ == "__main__"' not in (BENCHMARKS / name).read_text(encoding="utf-8")
