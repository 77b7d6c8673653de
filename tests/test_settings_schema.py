"""One settings file for scan, the hooks and production (issue 29 §3): one schema (the
guards' keys at the top level, `[scan]` and `[hook]` for what one entry point reads
alone), checked by one loader at every entry point (load_settings, scan --config, the
hook, init) with the same errors: a key is unknown everywhere or nowhere."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from hook_payloads import claude_pre
from loopfuse import ConfigError, load_settings
from loopfuse.cli import hook_config
from loopfuse.cli import init as init_command
from loopfuse.cli.config import Settings as ScanSettings
from loopfuse.cli.hook import LOCK_TIMEOUT, handle, settings_of
from loopfuse.cli.hook_config import MEMO_FOLDER, HookOptions, checked_table
from loopfuse.cli.main import main

DOCS = Path(__file__).resolve().parent.parent / "docs"

GOOD = {
    "scan's keys at the top level": 'price_per_mtok = [3, 15]\nturn_seconds = 1\nformat = "json"\n',
    "a [scan] table": '[scan]\nprice_per_mtok = 3\nformat = "markdown"\n',
    "a [hook] table": 'max_strikes = 4\n[hook]\nmode = "refuse"\nend_session = true\n',
    "pyproject": "[tool.loopfuse]\nmax_strikes = 2\n[tool.loopfuse.scan]\nverbose = true\n",
}

BAD = {
    "misspelt key": ("max_strike = 3\n", "unknown key 'max_strike' (did you mean max_strikes?)"),
    "misspelt scan key": ("[scan]\nfromat = 'json'\n", "unknown key 'scan.fromat' (did you mean"),
    "a guard's key in [scan]": ("[scan]\nmax_strikes = 2\n", "'scan.max_strikes' (it goes at"),
    "scan key refused": ('turn_seconds = "soon"\n', "turn_seconds must be a positive number"),
    "scan table key refused": ("[scan]\nformat = 'yaml'\n", "scan.format must be one of text"),
    "hook mode refused": ('[hook]\nmode = "warm"\n', "hook.mode must be one of refuse, warn"),
    "misspelt hook key": (
        '[hook]\nmdoe = "warn"\n',
        "unknown key 'hook.mdoe' (did you mean mode?)",
    ),
    "hook timeout refused": (
        "[hook]\nlock_timeout = 600\n",
        "hook.lock_timeout must be at most 60",
    ),
    "a key given twice": ('format = "json"\n[scan]\nformat = "text"\n', "format is given twice"),
    "hook not a table": ("hook = 3\n", "hook must be a table ([hook]), got 3"),
    "a count past the bound": ("max_strikes = 9223372036854775807\n", "max_strikes must be an"),
    "nested too deep": ("x = " + "[" * 500 + "]" * 500 + "\n", "line 1: nested deeper than 32"),
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "loopfuse.toml"
    path.write_text(text, encoding="utf-8")
    return path


def library(path: Path) -> str | None:
    try:
        load_settings(path)
    except ConfigError as exc:
        return str(exc)
    return None


def scan(path: Path) -> str | None:
    log = path.with_name("request.json")
    log.write_text('{"model": "m", "messages": [{"role": "user", "content": "hi"}]}')
    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        status = main(["scan", str(log), "--config", str(path), "--no-progress"])
    if status == 2:
        return errors.getvalue().removeprefix("loopfuse scan: error: ").strip()
    assert status == 0, errors.getvalue()
    return None


def hook(path: Path) -> str | None:
    try:
        settings_of({"config": str(path)}, {}, None)
    except ConfigError as exc:
        return str(exc)
    return None


def init(path: Path) -> str | None:
    errors = io.StringIO()
    status = init_command.main(
        ["--agent", "claude-code", "--dry-run", "--config", str(path)],
        env={},
        cwd=path.parent,
        stdout=io.StringIO(),
        stderr=errors,
        executable="loopfuse",
    )
    if status == 2:
        return errors.getvalue().removeprefix("loopfuse init: error: ").strip()
    assert status == 0, errors.getvalue()
    return None


ENTRY_POINTS = {"load_settings": library, "scan --config": scan, "hook": hook, "init": init}


@pytest.mark.parametrize("text", GOOD.values(), ids=GOOD.keys())
def test_a_good_file_is_read_by_every_entry_point(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    said = {name: read(path) for name, read in ENTRY_POINTS.items()}
    assert said == dict.fromkeys(ENTRY_POINTS), said


@pytest.mark.parametrize(("text", "problem"), BAD.values(), ids=BAD.keys())
def test_a_bad_file_is_the_same_error_at_every_entry_point(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path, text)
    said = {name: read(path) for name, read in ENTRY_POINTS.items()}
    assert len(set(said.values())) == 1, said
    message = said["load_settings"]
    assert message is not None
    assert message.startswith(f"{path}: ")
    assert problem in message


def _toml_blocks(page: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^( *)```toml\n(.+?)\n *```", text, re.DOTALL | re.MULTILINE)
    return [textwrap.dedent(indent + block) for indent, block in blocks]


@pytest.mark.parametrize(
    "text",
    [block for page in ("cli.md", "agents.md", "tuning.md") for block in _toml_blocks(page)],
)
def test_every_settings_file_of_the_docs_is_read_by_every_entry_point(
    tmp_path: Path, text: str
) -> None:
    path = write(tmp_path, text + "\n")
    said = {name: read(path) for name, read in ENTRY_POINTS.items()}
    assert said == dict.fromkeys(ENTRY_POINTS), said


def test_the_scan_reads_its_table_and_production_leaves_it(tmp_path: Path) -> None:
    path = write(tmp_path, 'max_strikes = 2\n[scan]\nformat = "json"\nturn_seconds = 0.5\n')
    scanned = ScanSettings.from_toml(path)
    assert (scanned.format, scanned.turn_seconds, scanned.detector.max_strikes) == ("json", 0.5, 2)
    assert load_settings(path).detector.max_strikes == 2


def test_the_hook_takes_the_file_s_mode_unless_its_table_says_another(tmp_path: Path) -> None:
    path = write(tmp_path, 'mode = "refuse"\nmax_strikes = 4\n')
    settings = settings_of({"config": str(path)}, {}, None)
    assert (settings.mode, settings.detector) == ("refuse", {"max_strikes": 4})
    path.write_text('mode = "refuse"\n[hook]\nmode = "note"\n')
    assert settings_of({"config": str(path)}, {}, None).mode == "note"
    assert settings_of({"config": str(path), "mode": "warn"}, {}, None).mode == "warn"


def test_the_hook_reads_its_table_s_values_as_every_entry_point_reads_them(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[hook]\nend-session = "yes"\nlock_timeout = "2.5"\n')
    assert {name: read(path) for name, read in ENTRY_POINTS.items()} == dict.fromkeys(ENTRY_POINTS)
    settings = settings_of({"config": str(path)}, {}, None)
    assert (settings.end_session, settings.lock_timeout) == (True, 2.5)


def test_the_hook_s_table_and_its_flags_have_the_same_defaults() -> None:
    assert HookOptions().lock_timeout == LOCK_TIMEOUT
    assert settings_of({}, {}).mode == HookOptions().mode == "warn"


# --- the hook checks a version of the file once ---------------------------------------------


def _counting_loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    read: list[Path] = []
    real = hook_config.load_toml

    def counted(path: Path) -> dict[str, object]:
        read.append(path)
        return real(path)

    monkeypatch.setattr(hook_config, "load_toml", counted)
    return read


def test_the_hook_checks_a_version_of_the_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = write(tmp_path, "max_strikes = 4\n")
    read = _counting_loads(monkeypatch)
    for _ in range(3):
        assert checked_table(str(path), str(state)) == {"max_strikes": 4}
    assert len(read) == 1
    (memo,) = (state / MEMO_FOLDER).iterdir()
    assert memo.suffix == ".json"
    path.write_text("max_strikes = 5\n")  # another version: checked again
    assert checked_table(str(path), str(state)) == {"max_strikes": 5}
    assert len(read) == 2


def test_a_refused_version_is_remembered_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = write(tmp_path, "max_strike = 4\n")
    read = _counting_loads(monkeypatch)
    errors = []
    for _ in range(2):
        with pytest.raises(ConfigError) as raised:
            checked_table(str(path), str(state))
        errors.append(str(raised.value))
    assert len(read) == 1
    assert errors == [library(path)] * 2


def test_a_memo_is_never_trusted_where_others_may_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "shared"
    state.mkdir()
    state.chmod(0o777)
    path = write(tmp_path, "max_strikes = 4\n")
    read = _counting_loads(monkeypatch)
    for _ in range(2):
        checked_table(str(path), str(state))
    assert len(read) == 2
    assert not (state / MEMO_FOLDER).exists()


@pytest.mark.parametrize("damage", [b"", b"[" * 100_000, b'{"identity": 1}', b"\xff"])
def test_a_damaged_memo_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: bytes
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = write(tmp_path, "max_strikes = 4\n")
    checked_table(str(path), str(state))
    (memo,) = (state / MEMO_FOLDER).iterdir()
    memo.write_bytes(damage)
    read = _counting_loads(monkeypatch)
    assert checked_table(str(path), str(state)) == {"max_strikes": 4}
    assert len(read) == 1


def test_a_memo_that_is_a_link_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = write(tmp_path, "max_strikes = 4\n")
    checked_table(str(path), str(state))
    (memo,) = (state / MEMO_FOLDER).iterdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(memo.read_text())
    memo.unlink()
    memo.symlink_to(elsewhere)
    read = _counting_loads(monkeypatch)
    checked_table(str(path), str(state))
    assert len(read) == 1  # the link was not read
    assert not memo.is_symlink()  # and is replaced, never written through
    assert json.loads(elsewhere.read_text())["table"] == {"max_strikes": 4}


def test_the_hook_says_a_bad_file_in_its_log_and_allows_the_call(tmp_path: Path) -> None:
    path = write(tmp_path, "price_per_mtok = 3\nmax_strike = 4\n")
    state = tmp_path / "state"
    argv = ["--state-dir", str(state), "--config", str(path)]
    raw = json.dumps(claude_pre("ls", "t1")).encode()
    # The call is allowed; the first event of the session also shows the user why
    # (issue 29 §2: a systemMessage, tests/test_cli_hook_settings_message.py).
    told, status = handle(raw, argv, {}, lambda: 0.0)
    assert status == 0
    assert "unknown key 'max_strike'" in json.loads(told)["systemMessage"]
    assert handle(raw, argv, {}, lambda: 0.0) == ("", 0)
    log = (state / "hook.log").read_text()
    assert log.count("unknown key 'max_strike' (did you mean max_strikes?)") == 2
    assert os.stat(state).st_mode & 0o077 == 0


def test_the_scan_table_is_declared_once_below_the_loader() -> None:
    """``[scan]``'s keys are ScanOptions' fields: the scan's settings take them from
    there (not a copy), and none of them is a guard's key, which would be read twice."""
    from loopfuse._sections import ScanOptions
    from loopfuse.fields import keys_of
    from loopfuse.settings import Settings, key_table, scan_keys

    assert issubclass(ScanSettings, ScanOptions)
    assert scan_keys() == keys_of(ScanOptions)
    library = key_table(Settings)
    assert not set(scan_keys()) & set(library)
    assert set(key_table(ScanSettings)) == set(library) | set(scan_keys())
