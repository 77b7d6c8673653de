"""loopfuse.Settings and load_settings: one settings file, read by `loopfuse scan --config`
and by production, builds the same guard; every guard's settings declared once."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args

import pytest

import loopfuse
from loopfuse import (
    BreakerSettings,
    CacheSettings,
    ConfigError,
    DedupCache,
    DetectorSettings,
    Guard,
    GuardSettings,
    LoopBreaker,
    Settings,
    load_settings,
)
from loopfuse.cli.main import main
from loopfuse.cli.options import MODES as HOOK_MODES
from loopfuse.fields import SettingError, fields_of
from loopfuse.guard.guard import MODES, Mode
from loopfuse.settings import DEFAULT_GUARDS, GUARDS, PARTS, key_table
from loopfuse.stores.redis import RedisStore

httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from loopfuse.integrations.httpx import GuardTransport  # noqa: E402

CHAT = "/v1/chat/completions"


# --- one file drives both ------------------------------------------------------------------


def detector_loop() -> list[dict[str, Any]]:
    """A proxy log: one session's requests, the agent re-running a failing build."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "make the build pass"}]
    entries = []
    for i in range(8):
        body = {"model": "m", "messages": list(messages)}
        entries.append({"session": "s1", "path": CHAT, "time": 2.0 * i, "body": body})
        call = {"name": "bash", "arguments": '{"command": "make"}'}
        tool_call = {"id": f"c{i}", "type": "function", "function": call}
        messages.append({"role": "assistant", "tool_calls": [tool_call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "error: failed"})
    return entries


def retry_storm() -> list[dict[str, Any]]:
    """A proxy log: one session sending the same request again and again."""
    body = {"model": "m", "messages": [{"role": "user", "content": "status?"}]}
    return [{"session": "s1", "path": CHAT, "time": 1.0 * i, "body": body} for i in range(8)]


def scanned(log: Path, config: Path) -> tuple[int, str] | None:
    """Where ``loopfuse scan --config`` says the guard first refused a request: the line
    and the kind (the stretches the cache answered, or the guard only noted, went on)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["scan", str(log), "--config", str(config), "--format", "json", "--no-progress"])
    findings = json.loads(out.getvalue())["files"][0]["findings"]
    refused = [
        (span["first"], span["kind"])
        for finding in findings
        for span in finding["spans"]
        if span["guard"] != "dedup" and not span["noted"]
    ]
    return min(refused, default=None)


def served(entries: list[dict[str, Any]], config: Path) -> tuple[int, str] | None:
    """Where the guard ``load_settings(config)`` builds refuses the same requests, sent
    through ``GuardTransport`` to a fake upstream: the request's number and kind."""
    now = [0.0]
    guard = load_settings(config).build_guard(clock=lambda: now[0])

    def upstream(request: Any) -> Any:
        return httpx2.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    transport = GuardTransport(httpx2.MockTransport(upstream), guard=guard)
    with httpx2.Client(transport=transport) as http:
        for number, entry in enumerate(entries, start=1):
            now[0] = entry["time"]
            response = http.post(
                f"https://llm.example{entry['path']}",
                json=entry["body"],
                headers={"x-session-id": entry["session"]},
            )
            refused = response.headers.get("x-loopfuse-refused")
            if refused is not None:
                assert response.status_code == 400
                return number, refused
    return None


@pytest.mark.parametrize(
    ("entries", "settings", "wanted"),
    [
        (detector_loop(), 'mode = "refuse"\n', (4, "repeat")),
        (detector_loop(), 'mode = "refuse"\nmax_strikes = 1\n', (3, "repeat")),
        (detector_loop(), 'mode = "refuse"\nmax_strikes = 2\nmax_repeats = 3\n', (4, "repeat")),
        (detector_loop(), 'mode = "refuse"\nmax_strikes = 5\n', (5, "error_streak")),
        # warn: noted at the 3rd (one count early), refused where refuse refuses
        (detector_loop(), "[tool.loopfuse]\nmax_strikes = 2\n", (4, "repeat")),
        # ... or, without the early note, noted at the 4th and refused at the 5th
        (detector_loop(), "[tool.loopfuse]\nmax_strikes = 2\nnote_early = false\n", (5, "repeat")),
        (retry_storm(), 'mode = "refuse"\n', (6, "repeated_request")),
        (retry_storm(), 'mode = "refuse"\nmax_repeats = 2\n', (3, "repeated_request")),
        (retry_storm(), 'mode = "refuse"\nmax_repeats = 2\nwindow = 1.5\n', None),  # 2 in 1.5 s
        (retry_storm(), 'mode = "refuse"\nguards = ["detector"]\n', None),
    ],
)
def test_one_file_drives_the_scan_and_the_production_guard(
    tmp_path: Path, entries: list[dict[str, Any]], settings: str, wanted: tuple[int, str] | None
) -> None:
    """The same file and the same requests: `loopfuse scan` and the guard every integration
    takes stop at the same request, with the same kind; a threshold changed in the file
    moves both."""
    config = tmp_path / "pyproject.toml" if "[tool" in settings else tmp_path / "loopfuse.toml"
    config.write_text(settings + '\n[hook]\nmode = "refuse"\n')
    log = tmp_path / "proxy.jsonl"
    log.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    assert served(entries, config) == scanned(log, config) == wanted


# --- the loader ----------------------------------------------------------------------------


def test_a_file_that_says_nothing_is_the_production_defaults(tmp_path: Path) -> None:
    (tmp_path / "empty.toml").write_text("")
    settings = load_settings(tmp_path / "empty.toml")
    assert settings == Settings()
    assert settings.guards == DEFAULT_GUARDS == ("breaker", "detector")
    assert settings.guard.mode == "warn"  # the integrations' default
    guard = settings.build_guard()
    assert guard.cache is None  # a cache is an explicit choice
    assert isinstance(guard.breaker, LoopBreaker)
    assert guard.detector is not None
    assert guard.mode == "warn"


def test_the_file_says_which_guards_run_and_a_cache_is_named(tmp_path: Path) -> None:
    path = tmp_path / "loopfuse.toml"
    path.write_text('guards = ["dedup", "detector"]\ncache_ttl = 5\ncache-capacity = 8\n')
    guard = load_settings(str(path)).build_guard(clock=lambda: 0.0)
    assert guard.breaker is None
    assert isinstance(guard.cache, DedupCache)
    assert (guard.cache.default_ttl, guard.cache.capacity) == (5.0, 8)


def test_every_section_of_a_file_is_read_and_the_hook_table_skipped(tmp_path: Path) -> None:
    for text in (
        "max_strikes = 2\n",
        "[loopfuse]\nmax_strikes = 2\n",
        "[tool.loopfuse]\nmax_strikes = 2\n[hook]\nmode = 'note'\n",
    ):
        (tmp_path / "f.toml").write_text(text)
        assert Settings.from_toml(tmp_path / "f.toml").detector.max_strikes == 2


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_repeat = 3\n", "f.toml: unknown key 'max_repeat'"),
        ("max_repeats = -1\n", "f.toml: max_repeats must be an integer >= 0, got -1"),
        ("window = 'long'\n", "f.toml: window must be a positive number of seconds"),
        ("mode = 'later'\n", "f.toml: mode must be one of refuse, warn, note, got 'later'"),
        ("cache_capacity = 0\n", "f.toml: cache_capacity must be an integer >= 1, got 0"),
        ("fail_closed = 1\n", "f.toml: fail_closed must be true or false, got 1"),
        ("shared_session = ' '\n", "f.toml: shared_session must be a non-empty string"),
        ("guards = ['fuse']\n", "f.toml: guards must name some of breaker, detector, dedup"),
        (
            "max_error_streak = 60\n",
            "f.toml: detector settings: max_error_streak must be < detector_window (48), got 60",
        ),
        ("max_strikes = \n", "f.toml: not valid TOML"),
    ],
)
def test_a_bad_file_names_the_file_and_the_key(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "f.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert str(caught.value).startswith(str(tmp_path))
    assert problem in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"none\.toml: no such file"):
        load_settings(tmp_path / "none.toml")


def test_build_guard_hands_every_guard_the_clock_and_the_guard_the_events() -> None:
    seen: list[loopfuse.GuardEvent] = []
    refuse = GuardSettings(mode="refuse")
    settings = Settings(guards=GUARDS, breaker=BreakerSettings(max_repeats=1), guard=refuse)
    guard = settings.build_guard(clock=lambda: 7.0, on_event=seen.append)
    assert guard.breaker is not None
    assert guard.cache is not None
    assert guard.breaker.clock() == guard.clock() == 7.0
    body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
    context = loopfuse.RequestContext(session_id="s")
    assert [guard.check(body, context).action for _ in range(2)] == ["forward", "refuse"]
    assert [event.action for event in seen] == ["request_forwarded", "loop_refused"]


def test_settings_hold_settings_objects() -> None:
    with pytest.raises(ConfigError, match="breaker must be a BreakerSettings"):
        Settings(breaker={"max_repeats": 3})  # type: ignore[arg-type]


# --- one declaration per setting -----------------------------------------------------------


def test_every_key_is_unique_and_says_whose_where_two_guards_share_a_name() -> None:
    table = key_table(Settings)
    names = [declared.name for _, declared in table.values()]
    shared = {name for name in names if names.count(name) > 1}
    assert shared == {"window", "fail_closed"}
    by_key = {key: (part, declared.name) for key, (part, declared) in table.items()}
    assert by_key["window"] == ("breaker", "window")
    assert by_key["detector_window"] == ("detector", "window")
    assert by_key["cache_ttl"] == ("cache", "default_ttl")
    assert by_key["cache_capacity"] == ("cache", "capacity")
    assert by_key["fail_closed"] == ("guard", "fail_closed")
    assert by_key["breaker_fail_closed"] == ("breaker", "fail_closed")
    assert by_key["cache_fail_closed"] == ("cache", "fail_closed")


@pytest.mark.parametrize("cls", list(PARTS.values()))
def test_each_part_is_declared_with_a_default_that_passes_its_check(cls: type) -> None:
    declared = fields_of(cls)
    assert declared, cls
    assert cls() == cls(**{s.name: s.default for s in declared})
    assert all(s.help and s.help == s.help.strip() for s in declared)


def test_the_guards_take_their_settings_as_the_detector_does() -> None:
    breaker = LoopBreaker(window=timedelta(minutes=1), max_repeats=3)
    assert breaker.settings == BreakerSettings(window=60, max_repeats=3)
    assert (breaker.window, breaker.max_repeats) == (60.0, 3)
    again = LoopBreaker(breaker.settings, max_repeats=4)
    assert (again.window, again.max_repeats) == (60.0, 4)
    cache: DedupCache[str] = DedupCache(capacity=2, default_ttl=math.inf, clock=lambda: 0.0)
    assert cache.settings == CacheSettings(capacity=2, default_ttl=math.inf)
    guard = Guard(GuardSettings(mode="note"), breaker=None, cache_streams=True)
    assert (guard.mode, guard.cache_streams, guard.settings.mode) == ("note", True, "note")
    assert DedupCache(CacheSettings(capacity=3)).capacity == 3


@pytest.mark.parametrize(
    ("build", "example"),
    [
        (lambda: LoopBreaker(30), "LoopBreaker(window=30, max_repeats=5)"),  # type: ignore[arg-type]
        (lambda: DedupCache(128), "DedupCache(capacity=1024, default_ttl=60.0)"),  # type: ignore[arg-type]
        (lambda: Guard("warn"), "Guard(mode='warn')"),  # type: ignore[arg-type]
    ],
)
def test_a_setting_by_position_is_a_config_error_showing_the_call_by_name(
    build: Any, example: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        build()
    assert f"give each setting by name: {example}" in str(caught.value)
    with pytest.raises(TypeError):
        LoopBreaker(30, 5)  # type: ignore[arg-type, call-arg]


@pytest.mark.parametrize(
    "build",
    [
        lambda value: LoopBreaker(fail_closed=value),
        lambda value: DedupCache(fail_closed=value),
        lambda value: Guard(fail_closed=value),
        lambda value: RedisStore(_FakeRedis(), fail_closed=value),
    ],
)
@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_fail_closed_is_a_bool_for_every_class(build: Any, value: object) -> None:
    with pytest.raises(ConfigError, match=f"fail_closed must be a bool, got {value!r}"):
        build(value)


class _FakeRedis:
    """Just enough of a redis-py client for RedisStore's constructor."""

    connection_pool = None

    def register_script(self, script: str) -> object:
        return object()


def test_an_unknown_setting_is_named_with_the_closest_one() -> None:
    with pytest.raises(SettingError, match=r"BreakerSettings has no setting max_repeat \(did"):
        LoopBreaker(max_repeat=3)
    with pytest.raises(SettingError, match=r"GuardSettings has no setting modes \(did you"):
        Guard(modes="warn")


def test_the_hook_s_modes_are_the_guard_s() -> None:
    assert HOOK_MODES == MODES == get_args(Mode)


def test_a_detector_setting_of_the_file_is_the_detector_s(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text('observation_tools = ["jira_search"]\ntool_limits = {deploy = 1}\n')
    detector = load_settings(path).detector
    assert detector.observation_tools[-1] == "jira_search"  # added to the defaults
    assert detector.observation_tools[:-1] == DetectorSettings().observation_tools
    assert detector.tool_limits == (("deploy", 1),)


def _shown(value: object) -> str:
    """A default as docs/cli.md writes it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "none"
    if value == "":
        return "(empty)"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "-"
    return str(value)


def test_the_options_table_of_the_docs_lists_every_option_with_its_default() -> None:
    """docs/cli.md's table of `loopfuse scan`'s options: one row per option (the flags
    and keys made from the fields), in the order `--help` lists them, with the default
    and whose setting it is."""
    from loopfuse.cli.config import OPTIONS, value_of
    from loopfuse.cli.config import Settings as ScanSettings

    text = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    section = text.split("Every threshold has a flag", 1)[1].split("\n\n", 2)[1]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in section.split("\n")]
    rows = rows[2:]
    assert [row[1].strip("`") for row in rows] == [option.name for option in OPTIONS]
    owner = {
        "breaker": "LoopBreaker: ",
        "detector": "LoopDetector: ",
        "dedup": "DedupCache: ",
        "guard": "Guard: ",
    }
    for row, option in zip(rows, OPTIONS, strict=True):
        flag = f"--[no-]{option.flag[2:]}" if option.kind.switch else option.flag
        assert row[0] == f"`{flag}`", option.name
        assert row[2].strip("`") == _shown(value_of(ScanSettings(), option)), option.name
        assert row[3].startswith(owner.get(option.group, "")), option.name


def test_one_default_mode_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 29 §4: `Guard()` refused at the first loop while every other entry point
    noted first; now each starts in warn, the measured default."""
    from loopfuse.cli.config import Settings as ScanSettings
    from loopfuse.cli.hook import HookSettings

    empty = tmp_path / "loopfuse.toml"
    empty.write_text("")
    transport = GuardTransport(httpx2.MockTransport(lambda request: httpx2.Response(200)))
    modes = {
        "Guard()": Guard().mode,
        "GuardSettings()": GuardSettings().mode,
        "GuardTransport": transport.guard.mode,
        "build_guard": load_settings(empty).build_guard().mode,
        "scan": ScanSettings().guard.mode,
        "hook": HookSettings().mode,
    }
    assert main(["demo", "--format", "json"]) == 0
    modes["demo"] = json.loads(capsys.readouterr().out)["summary"]["mode"]
    assert set(modes.values()) == {"warn"}, modes
