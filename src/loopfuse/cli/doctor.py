"""``loopfuse doctor``: is each coding-agent CLI guarded, and does its guard work?

For every place ``loopfuse init`` can install ``loopfuse hook`` (each CLI's
:attr:`~loopfuse.harness.agent_cli.AgentCli.scopes`: the user's settings, and this
folder's where the CLI reads a project's), it says:

- **installed**: the CLI's settings file holds loopfuse's hook for each of the CLI's
  events (:func:`~loopfuse.cli.init.settings_path`, read as ``init`` writes it);
- **settings**: the hook's flags and the settings file they (or ``$LOOPFUSE_CONFIG``)
  name are read as the hook reads them (:func:`~loopfuse.cli.hook_check.
  check_hook_command`, the loader of every entry point);
- **state folder**: the folder the hook keeps its sessions in is a folder of this user's
  that no one else may write to, its ``sessions/`` not a link, or can be created;
- **runs**: the installed command, run with a test event of the CLI's shape (a call of
  a tool named ``loopfuse-doctor``, in a session of its own), answers as the hook
  answers an allowed call, and writes that session's state; the test session's files
  are removed after.

It reads the environment it is run in as the hook's (the CLI passes its own to the
hook: a variable set only there is not seen). It never writes outside the state folder,
opens no network connection, and takes about a hook's start per installed CLI.

Exit status: 0 the hook is installed somewhere and every installed one works; 1 a
problem (or installed nowhere); 2 usage error. ``--format json`` prints the same as one
JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final, TextIO

from loopfuse.cli.agents import AGENTS
from loopfuse.cli.hook_check import check_hook_command
from loopfuse.cli.hook_state import session_path, state_root
from loopfuse.cli.init import InitError, is_our_command, settings_path
from loopfuse.cli.safe_files import private_folder, read_regular
from loopfuse.errors import ConfigError
from loopfuse.harness.agent_cli import PROBE_TOOL, agent_cli
from loopfuse.harness.installers import InstallError

__all__ = ["Check", "Place", "build_parser", "diagnose", "main"]

RUN_TIMEOUT: Final = 20.0
"""Seconds the test event may take (a hook waits up to its lock timeout, 60 s at most:
past this one, the hook is reported as hanging)."""
MAX_SETTINGS_BYTES: Final = 4 * 1024 * 1024
"""A CLI settings file larger than this is not read."""
TEST_TOOL: Final = PROBE_TOOL
"""The tool of the test event: a name no CLI has, so no session's loop is touched."""


@dataclass(frozen=True, slots=True)
class Check:
    """One thing checked: its name, whether it is fine, and what was found."""

    name: str
    ok: bool
    detail: str


@dataclass(slots=True)
class Place:
    """One settings file a CLI reads hooks from, and what was found there."""

    agent: str
    scope: str
    settings_file: str
    installed: bool = False
    commands: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether loopfuse's hook is installed here and every check passed."""
        return self.installed and all(check.ok for check in self.checks)


def diagnose(env: Mapping[str, str], cwd: Path, agents: Sequence[str] = AGENTS) -> list[Place]:
    """Every place of ``agents`` (user and project scope), each checked."""
    places: list[Place] = []
    seen: set[Path] = set()
    places_of = ((agent, scope) for agent in AGENTS for scope in agent_cli(agent).scopes)
    for agent, scope in places_of:
        if agent not in agents:
            continue
        path = settings_path(agent, scope == "project", env, cwd)
        key = Path(os.path.abspath(path))
        if key in seen:  # the project is the home folder: one file, checked once
            continue
        seen.add(key)
        places.append(_place(agent, scope, path, env))
    return places


def _place(agent: str, scope: str, path: Path, env: Mapping[str, str]) -> Place:
    place = Place(agent, scope, str(path))
    events = agent_cli(agent).events
    try:
        found = _our_commands(path, agent)
    except InitError as exc:
        place.checks.append(Check("installed", False, str(exc)))
        return place
    by_event = {event: found[event] for event in events if found.get(event)}
    commands = list(dict.fromkeys(c for found in by_event.values() for c in found))
    if not commands:
        return place
    place.installed = True
    place.commands = commands
    missing = [event for event in events if not by_event.get(event)]
    if missing:
        again = f"loopfuse init --agent {agent}{' --project' if scope == 'project' else ''}"
        detail = f"not for {', '.join(missing)} (an older install?): run {again}"
        place.checks.append(Check("installed", False, detail))
    else:
        place.checks.append(Check("installed", True, f"for its {len(events)} events"))
    for command in commands:
        place.checks.extend(_check_command(agent, command, env))
    return place


def _read_settings(path: Path) -> str:
    """The text of ``path`` (``""``: no file), read as ``init`` reads it (a regular file,
    never waited on as a FIFO; a link the user made to their dotfiles is followed:
    reading changes nothing); :class:`InitError` for one that cannot be read."""
    try:
        raw = read_regular(str(path), MAX_SETTINGS_BYTES, follow=True)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise InitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise InitError(f"{path}: larger than {MAX_SETTINGS_BYTES} bytes, not read")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InitError(f"{path}: not valid JSON ({exc})") from None


def _our_commands(path: Path, agent: str) -> dict[str, list[str]]:
    """The ``loopfuse hook`` commands of each event in the file ``path``, as
    ``agent``'s installer reads them (with ``init``'s own test of "ours");
    :class:`InitError` for a file it cannot read."""
    text = _read_settings(path)
    try:
        return agent_cli(agent).installer.commands(text, is_our_command)
    except InstallError as exc:
        raise InitError(f"{path}: {exc}") from None


def _check_command(agent: str, command: str, env: Mapping[str, str]) -> list[Check]:
    """The settings, state folder and test-run checks of one installed command."""
    words = shlex.split(command)
    flags = words[[i for i, w in enumerate(words) if w == "hook"][-1] + 1 :]
    checks: list[Check] = []
    given: str | None = None
    try:
        settings = check_hook_command(flags, env)
        config = _config_of(flags, env)
        said = f"{config}: read" if config else "no settings file (the defaults)"
        checks.append(Check("settings", True, f"{said}; mode {settings.mode}"))
        given = settings.state_dir
    except ConfigError as exc:
        detail = f"refused, so the hook allows every call: {exc}"
        checks.append(Check("settings", False, detail))
    if given is None:
        with contextlib.suppress(ConfigError, ValueError):
            from loopfuse.cli.hook import read_flags

            state_flag = read_flags(flags).get("state_dir")
            given = state_flag if isinstance(state_flag, str) else None
    root = state_root(given, env)
    checks.append(_check_state(root))
    checks.append(_check_runs(agent, words, root, env))
    return checks


def _config_of(flags: Sequence[str], env: Mapping[str, str]) -> str | None:
    from loopfuse.cli.hook import read_flags

    config = read_flags(flags).get("config") or env.get("LOOPFUSE_CONFIG")
    return config if isinstance(config, str) and config else None


def _check_state(root: str) -> Check:
    """Whether the hook can keep its state in ``root``, by the hook's own rules
    (:func:`~loopfuse.cli.safe_files.private_folder`, as
    :func:`~loopfuse.cli.hook_state.state_folders` applies them): the folder (which may
    be a link the user made) and its ``sessions/`` (never a link) are this user's and
    writable by no one else; a folder not made yet must be creatable. Looked at only:
    nothing is made, no link followed but the user's own ``root``."""
    sessions = os.path.join(root, "sessions")
    try:
        private_folder(root, create=False, link_ok=True)
        private_folder(sessions, create=False)
    except FileNotFoundError as exc:
        if exc.filename == sessions or os.path.abspath(str(exc.filename)) == sessions:
            return Check("state folder", True, root)
        parent = os.path.dirname(os.path.abspath(root))
        while parent and not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if os.access(parent, os.W_OK | os.X_OK):
            return Check("state folder", True, f"{root} (made at the first call)")
        return Check("state folder", False, f"{root}: cannot be made ({parent} not writable)")
    except OSError as exc:
        where = exc.filename or root
        problem = f"{where}: {exc.strerror or exc}"
        return Check("state folder", False, f"{problem}: the hook allows every call")
    if not os.access(root, os.W_OK | os.X_OK):
        return Check("state folder", False, f"{root}: not writable: the hook allows every call")
    return Check("state folder", True, root)


def probe_event(agent: str, session: str) -> dict[str, object]:
    """A before-tool event of ``agent``'s shape, for the tool :data:`TEST_TOOL`."""
    return agent_cli(agent).probe_event(session)


def _check_runs(agent: str, words: list[str], root: str, env: Mapping[str, str]) -> Check:
    """Run the installed command on a test event: it must exit 0 with an answer that
    allows the call, and have written the test session's state (which is removed)."""
    if env.get("LOOPFUSE_HOOK", "").strip().lower() in ("off", "0", "false", "no"):
        return Check("runs", False, "switched off here: LOOPFUSE_HOOK is set to off")
    session = f"loopfuse-doctor-{uuid.uuid4().hex[:12]}"
    state = session_path(root, agent, session)
    payload = json.dumps(probe_event(agent, session)).encode()
    started = time.monotonic()
    try:
        done = subprocess.run(
            words,
            input=payload,
            capture_output=True,
            timeout=RUN_TIMEOUT,
            env=dict(env),
            check=False,
        )
    except FileNotFoundError:
        return Check("runs", False, f"{words[0]}: no such program (reinstall loopfuse?)")
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("runs", False, f"{words[0]}: {exc}")
    finally:
        elapsed = (time.monotonic() - started) * 1000
    try:
        wrote = os.path.isfile(state)
    finally:
        for name in (state, state.removesuffix(".json") + ".lock"):
            with contextlib.suppress(OSError):
                os.unlink(name)
    stderr = " ".join(done.stderr.decode("utf-8", "replace").split())[-300:]
    if done.returncode != 0:
        return Check("runs", False, f"exit status {done.returncode}: {stderr or 'no message'}")
    answer = done.stdout.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(answer) if answer else {}
    except ValueError:
        return Check("runs", False, f"its answer is not JSON: {answer[:200]!r}")
    if not isinstance(parsed, dict) or set(parsed) - {"systemMessage"}:
        return Check("runs", False, f"it did not allow the test call: {answer[:200]}")
    if "systemMessage" in parsed:
        return Check("runs", False, f"it allows every call and says: {parsed['systemMessage']}")
    if not wrote:
        why = _last_logged(root)
        return Check("runs", False, f"it wrote no state in {root}{': ' + why if why else ''}")
    return Check("runs", True, f"a test call answered in {elapsed:.0f} ms, its state written")


def _last_logged(root: str) -> str:
    """The last line of the hook's log in ``root`` (what went wrong), else ``""``."""
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(os.path.join(root, "hook.log"), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as log:
            log.seek(max(0, os.fstat(log.fileno()).st_size - 2000))
            lines = log.read().decode("utf-8", "replace").splitlines()
            return lines[-1].split(": ", 1)[-1] if lines else ""
    return ""


def build_parser() -> argparse.ArgumentParser:
    """The ``loopfuse doctor`` parser."""
    parser = argparse.ArgumentParser(
        prog="loopfuse doctor",
        description="Say, for each coding-agent CLI loopfuse can guard (user and project "
        "settings), whether `loopfuse hook` is installed, reads its settings, can write "
        "its state folder, and runs. Exit status: 0 installed and working wherever it is "
        "installed, 1 a problem (or installed nowhere), 2 usage error.",
    )
    parser.add_argument(
        "--agent", choices=AGENTS, action="append", help="check this CLI only (repeatable)"
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output (default: text)"
    )
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Run ``loopfuse doctor``; returns the exit status."""
    out = stdout or sys.stdout
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    environment = os.environ if env is None else env
    places = diagnose(environment, cwd or Path.cwd(), tuple(args.agent or AGENTS))
    fine = any(place.installed for place in places) and all(
        place.ok for place in places if place.installed or place.checks
    )
    if args.format == "json":
        report = {"ok": fine, "places": [{**asdict(p), "ok": p.ok} for p in places]}
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        out.write(render_text(places, fine))
    return 0 if fine else 1


def render_text(places: Sequence[Place], fine: bool) -> str:
    """The human report: each place, and each check of an installed hook."""
    lines = []
    for place in places:
        head = f"{place.agent}, {place.scope}: {place.settings_file}"
        if not place.installed and not place.checks:
            lines.append(f"{head}: not installed")
            continue
        lines.append(head)
        for command in place.commands:
            lines.append(f"  hook   {command}")
        for check in place.checks:
            mark = "ok  " if check.ok else "FAIL"
            lines.append(f"  {mark}   {check.name}: {check.detail}")
    guarded = sum(place.ok for place in places)
    problems = sum(not check.ok for place in places for check in place.checks)
    if not any(place.installed for place in places):
        install = f"loopfuse init --agent {'|'.join(AGENTS)}"
        lines.append(f"loopfuse hook is installed nowhere: {install}")
    else:
        lines.append(f"{guarded} guarded, {problems} problem{'s' * (problems != 1)}")
    if fine:
        lines[-1] += ": all good"
    return "\n".join(lines) + "\n"
