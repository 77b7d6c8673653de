"""loopfuse.fields: a setting's field as data, its kinds, the one check of every field."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, fields
from typing import Any

import pytest

from loopfuse.errors import ConfigError
from loopfuse.fields import (
    NO_OFF,
    Choice,
    Flag,
    Integer,
    Limits,
    Names,
    Pair,
    Seconds,
    SettingError,
    Text,
    check_fields,
    fields_of,
    replace,
    setting,
)


@dataclass(frozen=True, slots=True)
class Sample:
    """A settings object of every kind, as a guard would declare one."""

    retries: int | None = setting(3, Integer(minimum=1, off=True), "tries (none: no cap)")
    verbose: bool = setting(False, Flag(), "say more")
    tools: tuple[str, ...] = setting(("read",), Names("tool names"), "tools", extends=True)
    ignored: frozenset[str] = setting(frozenset(), Names(into=frozenset), "never counted")
    storm: tuple[int, int] | None = setting((2, 3), Pair(off=True), "ERRORS,CALLS")
    caps: tuple[tuple[str, int], ...] = setting((), Limits(), "NAME=N,...")
    window: float = setting(30.0, Seconds(), "seconds", key="sample_window")
    mode: str = setting("a", Choice(("a", "b")), "which")
    label: str = setting("", Text(), "a label", key=None)
    scratch: int = 0  # not a setting: no Setting, never checked

    def __post_init__(self) -> None:
        check_fields(self)
        if self.storm is not None and self.storm[0] > self.storm[1]:
            raise SettingError(
                "{0} must hold errors <= calls, got {storm}", "storm", storm=self.storm
            )


def test_fields_of_reads_each_declared_setting_in_order() -> None:
    declared = fields_of(Sample)
    assert [s.name for s in declared] == [f.name for f in fields(Sample)][:-1]
    by_name = {s.name: s for s in declared}
    assert by_name["window"].key == "sample_window"
    assert by_name["window"].flag == "--sample-window"
    assert by_name["label"].key is None
    assert by_name["label"].flag is None
    assert by_name["retries"].off is None
    assert by_name["verbose"].off is False
    assert by_name["tools"].off is NO_OFF
    assert by_name["tools"].extends
    assert not by_name["caps"].extends
    assert fields_of(Sample) is declared  # read once per class


def test_the_defaults_pass_their_own_check() -> None:
    assert Sample() == Sample(**{s.name: s.default for s in fields_of(Sample)})


def test_a_kind_coerces_and_accepts_what_it_kept() -> None:
    sample = Sample(tools=["grep", "read"], ignored=["x"], caps={"z": 1, "a": 2})
    assert sample.tools == ("grep", "read")
    assert sample.ignored == frozenset({"x"})
    assert sample.caps == (("a", 2), ("z", 1))
    again = replace(sample, {"verbose": True})  # dataclasses.replace hands the kept values back
    assert (again.tools, again.ignored, again.caps, again.verbose) == (
        sample.tools,
        sample.ignored,
        sample.caps,
        True,
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"retries": 0}, "retries must be an int >= 1 or None, got 0"),
        ({"retries": True}, "retries must be an int >= 1 or None, got True"),
        ({"retries": 2.0}, "retries must be an int >= 1 or None, got 2.0"),
        ({"verbose": "yes"}, "verbose must be a bool, got 'yes'"),
        ({"tools": "read"}, "tools must be a collection of tool names, not 'read'"),
        ({"tools": ["read", ""]}, "tools must hold non-empty str tool names, got ''"),
        ({"storm": [2, 3]}, "storm must be None or a tuple of two ints >= 1, got [2, 3]"),
        ({"storm": (3, 2)}, "storm must hold errors <= calls, got (3, 2)"),
        ({"caps": ["deploy"]}, "caps must be a mapping of tool name to int, not ['deploy']"),
        ({"caps": {"": 1}}, "caps must map non-empty str tool names to ints"),
        ({"caps": {"deploy": -1}}, "caps['deploy'] must be an int >= 0, got -1"),
        ({"window": 0}, "window must be a positive number of seconds, got 0"),
        ({"window": float("inf")}, "window must be a positive number of seconds, got inf"),
        ({"mode": "c"}, "mode must be one of a, b, got 'c'"),
        ({"label": 3}, "label must be a str, got 3"),
    ],
)
def test_a_refused_value_is_a_setting_error_naming_it(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(SettingError) as caught:
        Sample(**changes)
    assert str(caught.value) == message
    assert isinstance(caught.value, ConfigError)
    assert next(iter(changes)) in caught.value.settings


def test_a_message_names_settings_by_the_name_the_user_wrote() -> None:
    error = SettingError("{0} must be < {1} ({w}), got {v}", "streak", "window", w=4, v=9)
    assert str(error) == "streak must be < window (4), got 9"
    keys = {"window": "detector_window"}
    assert error.named(lambda name: keys.get(name, name)) == (
        "streak must be < detector_window (4), got 9"
    )
    braces = SettingError("{0} got {got!r}", "caps", got={"a": "{0}"})
    assert str(braces) == "caps got {'a': '{0}'}"  # a value is never read as a template


def test_a_setting_error_pickles_with_its_fields() -> None:
    error = SettingError("{0} must be < {1} ({w})", "streak", "window", w=4)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.settings, copy.values) == (
        SettingError,
        str(error),
        error.settings,
        error.values,
    )


def test_replace_names_an_unknown_setting_and_the_closest_known_one() -> None:
    with pytest.raises(SettingError, match="Sample has no setting retry \\(did you mean retries"):
        replace(Sample(), {"retry": 2})
    with pytest.raises(SettingError, match="Sample has no setting scratch"):
        replace(Sample(), {"scratch": 1})  # a field, but not a setting
    assert replace(Sample(), {"retries": None}).retries is None


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        (Integer(), "7", 7),
        (Integer(), 7, 7),
        (Integer(off=True), "none", None),
        (Integer(off=True), "None ", None),
        (Integer(off=True), False, None),  # TOML `false`
        (Integer(off=True), None, None),
        (Flag(), "yes", True),
        (Flag(), "0", False),
        (Flag(), True, True),
        (Names(), "a, b,,a", ("a", "b")),
        (Names(), ["a", "b"], ("a", "b")),
        (Pair(off=True), "10,12", (10, 12)),
        (Pair(off=True), [10, 12], (10, 12)),
        (Pair(off=True), "none", None),
        (Limits(), "deploy=1, x=3", (("deploy", 1), ("x", 3))),
        (Limits(), {"x": 3, "deploy": 1}, (("deploy", 1), ("x", 3))),
        (Seconds(), "1.5", 1.5),
        (Seconds(), 2, 2.0),
        (Choice(("a", "b")), "b", "b"),
        (Text(), "x", "x"),
    ],
)
def test_a_kind_reads_a_flag_and_a_toml_value(kind: Any, raw: object, value: object) -> None:
    assert kind.parse(raw) == value
    assert kind.check(value, "x") == value  # what text gives, Python accepts


@pytest.mark.parametrize(
    ("kind", "raw", "message"),
    [
        (Integer(), "-1", "must be an integer >= 0, got '-1'"),
        (Integer(), "none", "must be an integer >= 0, got 'none'"),
        (Integer(minimum=1, off=True), "0", "must be an integer >= 1 or none, got '0'"),
        (Integer(minimum=2, note="why"), "1", "must be an integer >= 2 (why), got '1'"),
        (Flag(), "maybe", "must be true or false, got 'maybe'"),
        (Names(), 3, "must be a list of names, got 3"),
        (Names(), [""], "must be a list of names, got ['']"),
        (Names(choices=("a",)), "b", "must name some of a, got b"),
        (Names(choices=("a",)), "", "must name some of a, got []"),
        (Pair(off=True), "10", "must be two integers >= 1 (e.g. 10,12) or none, got '10'"),
        (Limits(), "deploy", "must be NAME=N pairs with N >= 0 (e.g. deploy=1), got 'deploy'"),
        (Seconds(), "0", "must be a positive number of seconds, got '0'"),
        (Choice(("a",)), "b", "must be one of a, got 'b'"),
        (Choice(("a",)), 3, "must be a string, got 3"),
        (Text(), 3, "must be a string, got 3"),
    ],
)
def test_a_kind_says_what_a_raw_value_must_be(kind: Any, raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        kind.parse(raw)
    assert str(caught.value) == message


def test_a_kind_tells_the_command_line_how_to_show_it() -> None:
    assert (Flag().switch, Integer().switch) == (True, False)
    assert (Integer().metavar, Integer(minimum=1).metavar, Pair().metavar) == (
        "INT",
        "COUNT",
        "PAIR",
    )
    assert Choice(("x", "y")).choices == ("x", "y")
    assert Names(choices=("g",)).choices == ("g",)
