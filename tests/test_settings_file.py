"""A settings file from anywhere (a repository's pyproject.toml) costs no more than a small
one: bounded in size and nesting before tomllib reads it, every number in range, and a
mistake is a ConfigError naming the file and the key at every entry point, never a
traceback (issue 30, finding 13)."""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
import tomllib
import tracemalloc
from pathlib import Path

import pytest

from loopfuse import ConfigError, Settings, load_settings
from loopfuse._settings_file import MAX_DEPTH, MAX_FILE_BYTES, check_shape, load_toml
from loopfuse.cli.main import main
from loopfuse.fields import MAX_COUNT, MAX_SECONDS

HOSTILE = {
    "deep array": "x = " + "[" * 500 + "]" * 500 + "\n",
    "deep inline table": "x = " + "{a = " * 500 + "1" + "}" * 500 + "\n",
    "deep header": "[" + ".".join(["a"] * 500) + "]\n",
    "long dotted key": ".".join(["a"] * 15_000) + " = 1\n",  # 30 KB: 1 GB in tomllib
    "unclosed": "x = " + "[" * 5_000,
}


def write(tmp_path: Path, text: str, name: str = "loopfuse.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_deep_file_is_a_config_error_in_little_time_and_memory(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    tracemalloc.start()
    began = time.perf_counter()
    try:
        with pytest.raises(ConfigError, match="nested deeper than") as raised:
            load_settings(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(raised.value).startswith(f"{path}: line 1: ")
    assert peak < 4 * 1024 * 1024
    assert time.perf_counter() - began < 2.0


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_scan_says_a_deep_file_in_one_line_exit_2(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, text)
    log = write(tmp_path, "", "empty.jsonl")
    assert main(["scan", str(log), "--config", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(path) in err
    assert "nested deeper than" in err


def test_a_file_as_deep_as_allowed_is_read() -> None:
    key = ".".join(["k"] * (MAX_DEPTH + 1))  # MAX_DEPTH dots
    check_shape(f"{key} = 1\n", "f.toml")
    check_shape("x = " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n", "f.toml")
    with pytest.raises(ConfigError, match="nested deeper than 32"):
        check_shape(f"{key}.k = 1\n", "f.toml")


@pytest.mark.parametrize(
    "text",
    [
        'a = "[[[[" \n',
        "a = '[[[[[' # [[[[\n",
        'a = """\n[[[[\n""""\nb = 1\n',
        "a = '''\n{{{{\n'''''\n",
        'a = "\\"[[[["\n',
        'a = """\\""" [[[[ """\n',
        "# " + "[" * 100 + "\n",
        '"a.b.c.d.e.f.g" = 1\n',
    ],
)
def test_brackets_and_dots_in_strings_and_comments_are_not_counted(text: str) -> None:
    check_shape(text * 40, "f.toml")  # 40 times deeper than allowed, if they counted


def test_the_shape_check_counts_what_tomllib_nests() -> None:
    """Differential: for nested values tomllib reads, the check never counts less than
    the nesting tomllib builds, strings of every quoting in between."""
    strings = ['"]"', "']'", '"""]"""', "''']'''", '"\\"]"', '""""]"""""', "'''']'''''"]
    for depth in range(1, 40):
        for string in strings:
            text = "x = " + "[" * depth + string + "]" * depth + "\n"
            tomllib.loads(text)  # it is TOML
            if depth > MAX_DEPTH:
                with pytest.raises(ConfigError):
                    check_shape(text, "f.toml")
            else:
                check_shape(text, "f.toml")


TRICKY_STRINGS = [
    '"a\\"[["',
    "'[[\\'",
    '"""x""""',
    "'''y'''''",
    '"""a\\"""b"""',
    '"""\n[[\n"""',
    "'''\n{{ ] \n'''",
    '"\\\\"',
    '"#[["',
    "'a.b.c.d'",
    '""',
    "''",
]


def test_the_shape_check_reads_strings_as_tomllib_does_at_every_depth() -> None:
    """Random nestings of arrays and inline tables, tricky strings between their
    brackets: tomllib reads each, and the check refuses exactly those deeper than the
    bound (a string read otherwise would hide or add brackets)."""
    import random

    chance = random.Random(29)
    for _ in range(300):
        depth = chance.randint(1, MAX_DEPTH + 8)
        value = "1"
        for _ in range(depth):
            string = chance.choice(TRICKY_STRINGS)
            if chance.random() < 0.5:
                value = f"[{string}, {value}]"
            else:
                value = f"{{k = {string}, v = {value}}}"
        text = f"x = {value}\n"
        tomllib.loads(text)
        if depth > MAX_DEPTH:
            with pytest.raises(ConfigError):
                check_shape(text, "f.toml")
        else:
            check_shape(text, "f.toml")


def test_the_shape_check_is_linear_on_every_string_shape() -> None:
    for text in (
        'x = """' + "\\a" * 200_000 + '"""',
        '"""a""" ' * 50_000 + "\\",
        "x = " + '"\\\\",' * 100_000,
        '"""' * 80_000,
        "x = [" + "1.5," * 60_000 + "]",
    ):
        began = time.perf_counter()
        with contextlib.suppress(ConfigError):
            check_shape(text, "f.toml")
        assert time.perf_counter() - began < 0.5


def test_a_file_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "# " + "x" * MAX_FILE_BYTES + "\n")
    with pytest.raises(ConfigError, match=r"larger than 256 KiB"):
        load_settings(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "loopfuse.toml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_toml(fifo)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(5.0)
    if reader.is_alive():  # release it, then fail: it waited for a writer
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO waited for a writer")
    assert len(outcome) == 1
    assert isinstance(outcome[0], ConfigError)
    assert str(outcome[0]) == f"{fifo}: not a regular file"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_strikes", 2**63 - 1),
        ("detector_window", 2**64),
        ("max_repeats", MAX_COUNT + 1),
        ("cache_capacity", 2**63),
        ("max_observation_steps", 2**70),
        ("error_storm", [1, 2**63]),
        ("tool_limits", {"deploy": 2**63}),
        ("window", 1e300),
        ("cache_ttl", 1e300),
        ("warn_window", MAX_SECONDS * 2),
    ],
)
def test_a_number_out_of_range_is_refused_naming_the_key(
    tmp_path: Path, key: str, value: object
) -> None:
    import json

    rendered = json.dumps(value).replace('{"deploy": ', "{deploy = ").replace("e+300", "e300")
    path = write(tmp_path, f"{key} = {rendered}\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(path).build_guard()
    assert str(raised.value).startswith(f"{path}: {key} must ")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_strikes", MAX_COUNT),
        ("detector_window", MAX_COUNT),
        ("max_repeats", MAX_COUNT),
        ("window", MAX_SECONDS),
        ("cache_ttl", float("inf")),
        ("warn_window", float("inf")),
    ],
)
def test_the_largest_value_of_each_kind_builds_a_guard(key: str, value: object) -> None:
    settings = Settings.from_table({key: value, "guards": ["breaker", "detector", "dedup"]}, "f")
    settings.build_guard()


def test_the_library_refuses_what_the_file_would() -> None:
    from loopfuse import LoopDetector

    with pytest.raises(ConfigError, match="max_strikes must be an int <= 1000000000"):
        LoopDetector(max_strikes=2**63 - 1)


def test_a_file_within_the_bounds_parses_in_linear_time(tmp_path: Path) -> None:
    key = ".".join(["k"] * (MAX_DEPTH - 1))
    lines = [f"{key}{i} = 1.5" for i in range(MAX_FILE_BYTES // (len(key) + 12))]
    path = write(tmp_path, "\n".join(lines) + "\n", "pyproject.toml")
    tracemalloc.start()
    try:
        load_toml(path)  # another tool's tables: read, then left alone
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024


def test_a_bad_file_is_one_line_for_the_library(tmp_path: Path) -> None:
    path = write(tmp_path, "x = [[[\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    assert str(raised.value).startswith(f"{path}: not valid TOML")
    assert raised.value.__cause__ is None


def test_scan_with_a_number_out_of_range_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "max_strikes = 9223372036854775807\n")
    log = write(tmp_path, "", "empty.jsonl")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["scan", str(log), "--config", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: max_strikes must be an integer <= 1000000000" in err
    assert "Traceback" not in err
