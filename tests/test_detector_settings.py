"""DetectorSettings is the one source of every detector setting: LoopDetector, the signals,
``loopfuse scan``'s and ``loopfuse hook``'s options and the docs all read its fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopfuse.cli.config import OPTIONS
from loopfuse.cli.options import detector_options
from loopfuse.detector import DetectorSettings, LoopDetector, ToolCall
from loopfuse.detector.signals import ANSWER_SIGNALS, SIGNALS
from loopfuse.errors import ConfigError
from loopfuse.fields import NO_OFF, Flag, fields_of

DOCS = Path(__file__).resolve().parent.parent / "docs"
FIELDS = fields_of(DetectorSettings)


def test_every_setting_has_a_help_line_and_a_unique_key() -> None:
    keys = [s.key for s in FIELDS if s.key is not None]
    assert len(keys) == len(set(keys))
    for declared in FIELDS:
        assert declared.help
        assert "\n" not in declared.help
    assert {s.name for s in FIELDS if s.key is None} == {"enabled"}  # Python only
    assert {s.name: s.key for s in FIELDS if s.key != s.name} == {
        "window": "detector_window",  # the breaker has a window too
        "enabled": None,
    }


def test_every_signal_reads_a_setting_that_none_switches_off() -> None:
    by_name = {s.name: s for s in FIELDS}
    for signal in SIGNALS:
        assert by_name[signal.setting].off is None, signal
        off = DetectorSettings(**{signal.setting: None})
        assert signal.threshold(off) is None
    assert {s.setting for s in ANSWER_SIGNALS} == {
        "max_error_streak",
        "max_near_repeats",
        "max_unchanged_checks",
        "error_storm",
    }


def test_the_detector_takes_settings_and_overrides() -> None:
    assert LoopDetector().settings == DetectorSettings()
    assert LoopDetector(max_strikes=2).settings == DetectorSettings(max_strikes=2)
    base = DetectorSettings(max_strikes=1, window=20)
    both = LoopDetector(base, max_cycle_period=None, ignore_tools=["think"]).settings
    assert (both.max_strikes, both.window, both.max_cycle_period) == (1, 20, None)
    assert both.ignore_tools == frozenset({"think"})
    assert LoopDetector(base).settings is base
    assert LoopDetector(tool_limits={"deploy": 1}).settings.tool_limits == (("deploy", 1),)


def test_an_unknown_setting_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"no setting max_strike \(did you mean max_strikes"):
        LoopDetector(max_strike=2)
    with pytest.raises(ConfigError, match="no setting reader"):
        LoopDetector(reader=None)  # a field, but not a setting
    with pytest.raises(ConfigError, match="settings must be a DetectorSettings, got 3"):
        LoopDetector(3)  # type: ignore[arg-type]


def test_a_refused_override_names_its_keyword() -> None:
    with pytest.raises(ConfigError, match=r"^max_error_streak must be < window \(20\), got 30$"):
        LoopDetector(DetectorSettings(window=20), max_error_streak=30)


def test_the_detector_options_are_the_fields_with_a_key() -> None:
    options = detector_options()
    assert [o.name for o in options] == [s.key for s in FIELDS if s.key is not None]
    for option in options:
        assert option.setting is not None
        assert (option.kind, option.help) == (option.setting.kind, option.setting.help)
        assert option in OPTIONS


def _table(text: str, heading: str) -> list[list[str]]:
    section = text.split(heading, 1)[1].split("\n\n", 2)[1]
    rows = [line.strip("|").split(" | ") for line in section.splitlines()]
    return [[cell.strip() for cell in row] for row in rows[2:]]


def test_the_parameters_table_of_the_docs_matches_the_declaration() -> None:
    """docs/detector.md's table: one row per setting (two settings may share a row), with
    the declared default."""
    rows = _table((DOCS / "detector.md").read_text(), "## Parameters and defaults")
    named: dict[str, str] = {}
    for row in rows:
        for name in re.findall(r"`(\w+)`", row[0]):
            named[name] = row[1]
    assert sorted(named) == sorted(s.name for s in FIELDS)
    for declared in FIELDS:
        default = declared.default
        shown = named[declared.name]
        if isinstance(declared.kind, Flag):
            assert shown == ("**on**" if default else "**off**"), declared.name
        elif isinstance(default, int) or (isinstance(default, tuple) and len(default) == 2):
            assert shown == f"**{default}**", declared.name
        elif isinstance(default, str):  # a choice (harness)
            assert shown == f"**`{default}`**", declared.name
        elif default:
            assert shown == "`DEFAULT_…`", declared.name
        else:
            assert shown in ("`{}`", "`()`"), declared.name


def _cli_default(declared_default: object, extends: bool) -> str:
    if extends or declared_default in ((), frozenset()):
        return "-"
    if declared_default is True:
        return "on"
    if isinstance(declared_default, tuple):
        return ",".join(map(str, declared_default))
    return str(declared_default)


def test_the_cli_table_of_the_docs_matches_the_declaration() -> None:
    """docs/cli.md's table of flags: every detector option with its flag, key and default."""
    rows = _table((DOCS / "cli.md").read_text(), "Every threshold has a flag")
    by_key = {row[1].strip("`"): row for row in rows}
    for option in detector_options():
        declared = option.setting
        assert declared is not None
        row = by_key[option.name]
        flag = f"--[no-]{option.flag[2:]}" if option.kind.switch else option.flag
        assert row[0] == f"`{flag}`", option.name
        assert row[2] == _cli_default(declared.default, declared.extends), option.name
        assert row[3].startswith("LoopDetector: "), option.name


def test_every_signal_says_how_its_count_reads() -> None:
    assert {s.kind for s in SIGNALS if s.per_lap} == {"cycle", "no_progress"}
    assert {s.kind: s.unit for s in SIGNALS if s.unit != "in a row"} == {"cycle": "laps"}


def test_off_values_are_kinds_off_values() -> None:
    assert {s.name for s in FIELDS if s.off is None} == {
        "max_strikes",
        "max_observation_steps",
        "max_cycle_period",
        "max_error_streak",
        "max_near_repeats",
        "max_unchanged_checks",
        "max_unread_edit_checks",
        "error_storm",
        "max_stagnation_steps",
        "max_waits",
    }
    assert all(s.off in (None, False, NO_OFF) for s in FIELDS)


def test_settings_off_for_every_signal_pass_every_batch() -> None:
    off = {signal.setting: None for signal in SIGNALS}
    det = LoopDetector(**off)
    calls = [ToolCall("bash", {"command": "make"})]
    for _ in range(20):
        det.record_results(det.check(calls), answers=["error: failed"])
