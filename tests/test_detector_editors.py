"""Editor and file tools judged by their arguments (loopfuse.detector.editors).

The runs are written as an OpenHands CodeActAgent writes them (``str_replace_editor`` and
``execute_bash``): a view only reads; an edit whose answer is an error changed nothing;
a check that keeps failing the same way while the edits land in files it does not read
(``/workspace/…`` edited, ``/testbed/…`` imported) is weaker evidence than one whose
edits it reads. Each rule is tested through ``scan`` (every request), a live
``LoopDetector`` and the httpx ``GuardTransport``.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_runs import Step, openai_run
from loopfuse.detector import LoopDetected, LoopDetector, ToolCall, scan
from loopfuse.detector.editors import EDIT, READ, editor_call, mentions_file
from loopfuse.errors import ConfigError

WORK = "/workspace/pkg/pkg/core.py"
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/workspace/pkg/reproduce.py", line 3, in <module>\n'
    "    run()\n"
    '  File "{path}", line 41, in run\n'
    "    raise ValueError('bad value')\n"
    "ValueError: bad value\n"
    "[The command completed with exit code 1.]"
)


def check(path: str = "/testbed/pkg/core.py") -> Step:
    return ("execute_bash", {"command": "python reproduce.py"}, TRACE.format(path=path))


def edit(n: int, path: str = WORK) -> Step:
    arguments = {"command": "str_replace", "path": path, "old_str": f"a{n}", "new_str": f"b{n}"}
    return ("str_replace_editor", arguments, f"The file {path} has been edited.")


def failed_edit(n: int) -> Step:
    arguments = {"command": "str_replace", "path": WORK, "old_str": f"x{n}", "new_str": f"y{n}"}
    answer = f"ERROR:\nNo replacement was performed, old_str `x{n}` did not appear verbatim."
    return ("str_replace_editor", arguments, answer)


def view() -> Step:
    arguments = {"command": "view", "path": WORK}
    return ("str_replace_editor", arguments, "Here's the result of running `cat -n`:\n 1\tx = 1")


def edit_then_check(runs: int, path: str, traced: str) -> list[Step]:
    steps = [check(traced)]
    for n in range(runs - 1):
        steps += [edit(n, path), check(traced)]
    return steps


def first_scan_flag(steps: list[Step], detector: LoopDetector | None = None) -> Any:
    for n in range(1, len(steps) + 1):
        verdict = scan(openai_run(steps[:n]), detector)
        if not verdict.ok:
            return n, verdict.kind
    return None


def first_live_refusal(steps: list[Step], detector: LoopDetector | None = None) -> Any:
    """The first batch a live detector refuses. An answer-based signal trips on a batch's
    answers and refuses the batch after it: a view is added at the end to be refused."""
    det = detector or LoopDetector()
    for n, (name, arguments, answer) in enumerate([*steps, view()], start=1):
        calls = [ToolCall(name, arguments)]
        try:
            record = det.check(calls)
        except LoopDetected as loop:
            return n, loop.kind
        det.record_results(record, answers=[answer])
    return None


# --- what each editor call counts as ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "action", "path"),
    [
        ("str_replace_editor", {"command": "view", "path": "/r/a.py"}, READ, None),
        ("str_replace_editor", {"command": "create", "path": "/r/a.py"}, EDIT, "/r/a.py"),
        ("str_replace_editor", {"command": "insert", "path": "/r/a.py"}, EDIT, "/r/a.py"),
        ("str_replace_editor", {"command": "undo_edit", "path": "/r/a.py"}, EDIT, "/r/a.py"),
        ("mcp__fs__str_replace_editor", {"command": "view", "path": "x"}, READ, None),
        ("edit", {"command": "edit 3:4\nx\nend_of_edit"}, EDIT, None),
        ("Read", {"file_path": "/r/a.py"}, READ, None),
        ("Grep", {"pattern": "x"}, READ, None),
        ("Glob", {"pattern": "**/*.py"}, READ, None),
        ("Edit", {"file_path": "/r/a.py", "old_string": "a", "new_string": "b"}, EDIT, "/r/a.py"),
        ("MultiEdit", {"file_path": "/r/b.py", "edits": []}, EDIT, "/r/b.py"),
        ("Write", {"file_path": "/r/c.py", "content": ""}, EDIT, "/r/c.py"),
        ("apply_patch", {"input": "*** Begin Patch\n*** Add File: d.py\n+x\n"}, EDIT, "d.py"),
        ("apply_patch", ["apply_patch", "*** Update File: e.py\n"], EDIT, "e.py"),
        ("read_file", {"absolute_path": "/r/a.py"}, READ, None),
        ("replace", {"file_path": "/r/a.py", "old_string": "a"}, EDIT, "/r/a.py"),
        ("write_file", {"file_path": "/r/f.py", "content": ""}, EDIT, "/r/f.py"),
    ],
)
def test_editor_calls_are_read_by_their_arguments(
    name: str, arguments: object, action: str, path: str | None
) -> None:
    found = editor_call(name, arguments)
    assert found is not None
    assert (found.action, found.path) == (action, path)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("bash", {"command": "cat a.py"}),
        ("str_replace_editor", {"command": "explode"}),
        ("str_replace_editor", "not an object"),
        ("str_replace_editor", {"command": ["view"]}),  # not text: unhashable, no crash
        ("str_replace_editor", {"command": None}),
        ("open", {"command": "open a.java"}),  # SWE-agent's open moves its edit window
        ("search_dir", {"command": "search_dir foo"}),  # judged by its command, as before
        ("multiedit", {"file_path": "a"}),  # Claude Code's names are exact (pi's is "read")
        (None, {}),
    ],
)
def test_other_calls_are_left_to_their_names(name: Any, arguments: object) -> None:
    assert editor_call(name, arguments) is None


def test_a_file_is_named_by_its_path_not_by_its_name_elsewhere() -> None:
    assert mentions_file('File "/workspace/pkg/core.py", line 3', WORK) is False
    assert mentions_file('File "/workspace/pkg/pkg/core.py", line 3', WORK) is True
    assert mentions_file("FAILED pkg/core.py::test_a - ValueError", WORK) is True
    assert mentions_file("python core.py", WORK) is True
    assert mentions_file("python core.pyc", WORK) is None  # no file of that name
    assert mentions_file("anything", "/") is None


def test_hostile_text_is_read_within_its_bounds() -> None:
    """Many occurrences of the name, each behind a long run of path characters: only the
    first occurrences are looked at, each a bounded way back."""
    hostile = "a" * 100_000 + " /x/core.py" * 10_000
    assert mentions_file(hostile, WORK) is False  # only twins elsewhere
    assert mentions_file(" /x/core.py" * 10_000 + " pkg/core.py", WORK) is False  # not read
    assert mentions_file("pkg/core.py" + " /x/core.py" * 10_000, WORK) is True
    assert mentions_file("a" * 100_000 + " pkg/core.py", WORK) is True


# --- a view only reads ------------------------------------------------------------------


def test_the_same_view_gets_the_read_only_allowance() -> None:
    steps = [view()] * 6
    assert first_scan_flag(steps) == (6, "repeat")  # by its name it was refused at the 4th
    assert first_live_refusal(steps) == (6, "repeat")
    off = LoopDetector(editor_aware=False)
    assert first_scan_flag(steps, off) == (4, "repeat")
    assert first_live_refusal(steps, LoopDetector(editor_aware=False)) == (4, "repeat")


# --- a failed edit changed nothing --------------------------------------------------------


def test_checks_between_failed_edits_are_not_runs_across_edits() -> None:
    steps = [check(WORK)]
    for n in range(5):
        steps += [failed_edit(n), check(WORK)]
    # Six failing runs of the check, but nothing was ever changed between them.
    assert first_scan_flag(steps) is None
    assert first_live_refusal(steps) is None
    off = LoopDetector(editor_aware=False)
    assert first_scan_flag(steps, off) == (9, "no_progress")  # the 5th run
    assert first_live_refusal(steps, LoopDetector(editor_aware=False)) == (10, "no_progress")


# --- edits the check does not read --------------------------------------------------------


def test_edits_the_check_reads_trip_no_progress_at_its_limit() -> None:
    steps = edit_then_check(6, WORK, WORK)  # the traceback runs through the edited file
    assert first_scan_flag(steps) == (9, "no_progress")  # the 5th run
    assert first_live_refusal(steps) == (10, "no_progress")


def test_edits_landing_where_the_check_does_not_read_need_more_runs() -> None:
    steps = edit_then_check(10, WORK, "/testbed/pkg/core.py")
    # Five runs stop it when it reads the edits; the agent may yet find where they land.
    assert first_scan_flag(steps[:17]) is None
    assert first_live_refusal(steps[:17]) is None
    assert first_scan_flag(steps) == (19, "no_progress")  # the 10th run
    assert first_live_refusal(steps) == (20, "no_progress")
    off = LoopDetector(max_unread_edit_checks=None)
    assert first_scan_flag(steps, off) == (9, "no_progress")
    assert first_live_refusal(steps, LoopDetector(max_unread_edit_checks=None)) == (
        10,
        "no_progress",
    )


def test_a_live_detector_given_digests_counts_every_edit() -> None:
    """A digest carries no text: which file the check reads is unknown, so every edit
    counts, as before."""
    from loopfuse.detector import results_digest

    steps = edit_then_check(6, WORK, "/testbed/pkg/core.py")
    det = LoopDetector()
    refused = None
    for n, (name, arguments, answer) in enumerate([*steps, view()], start=1):
        calls = [ToolCall(name, arguments)]
        try:
            record = det.check(calls)
        except LoopDetected as loop:
            refused = (n, loop.kind)
            break
        det.record_results(record, results_digest(calls, [answer]))
    assert refused == (10, "no_progress")  # tripped by the 5th run, refused the next batch


@pytest.mark.parametrize(
    "options",
    [{"max_unread_edit_checks": 0}, {"max_unread_edit_checks": "9"}, {"editor_aware": 1}],
)
def test_bad_settings_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        LoopDetector(**options)


# --- through a real integration -----------------------------------------------------------


def test_the_httpx_transport_lets_edits_elsewhere_go_on_then_stops_them() -> None:
    httpx = pytest.importorskip("httpx", reason="httpx is not installed")
    from loopfuse.integrations.httpx import GuardTransport

    sent: list[Any] = []

    def upstream(request: Any) -> Any:
        sent.append(request)
        return httpx.Response(200, json={"ok": True})

    transport = GuardTransport(httpx.MockTransport(upstream), mode="refuse", breaker=None)
    http = httpx.Client(transport=transport)
    url = "https://llm.example/v1/chat/completions"
    steps = edit_then_check(10, WORK, "/testbed/pkg/core.py")
    statuses = [http.post(url, json=openai_run(steps[:n])).status_code for n in range(1, 20)]
    assert statuses[:18] == [200] * 18  # the 6th to 9th runs went on
    assert statuses[18] == 400  # the 10th run is refused
