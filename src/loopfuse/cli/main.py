"""``loopfuse``: the command line. ``loopfuse scan PATH...`` and ``loopfuse demo``
(``loopfuse hook``, ``loopfuse init`` and ``loopfuse doctor``: :mod:`loopfuse.cli.hook`,
:mod:`loopfuse.cli.init`, :mod:`loopfuse.cli.doctor`).

Exit status (a CI gate can test for 1):

- 0: every file was read, understood, and the guard would not have acted;
- 1: the guard would have acted somewhere, whatever else happened (a loop found is
  never hidden by another file being unreadable);
- 2: no loop found, and a usage error, a path missing, or a file or log line that could
  not be read or whose format is not understood (each reported on stderr, one line
  naming it; the other files are still scanned; when no file is left to scan, no
  report is printed).

>>> main(["--version"])  # doctest: +ELLIPSIS
loopfuse ...
0
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import loopfuse
from loopfuse.cli import demo
from loopfuse.cli.agent_sessions import sessions_folder
from loopfuse.cli.config import GROUPS, OPTIONS, Settings, apply, value_of
from loopfuse.cli.decisions import scan_file
from loopfuse.cli.escape import printable
from loopfuse.cli.html import render_html
from loopfuse.cli.markdown import render_markdown
from loopfuse.cli.names import scanned_folder
from loopfuse.cli.progress import Progress
from loopfuse.cli.readers import STDIN, InputError, collect, read_path, read_stdin
from loopfuse.cli.report import Style, render_json, render_text
from loopfuse.cli.results import FileResult
from loopfuse.cli.summary import Summary
from loopfuse.errors import ConfigError
from loopfuse.fields import Choice
from loopfuse.harness.agent_cli import AGENT_CLIS, agent_cli
from loopfuse.harness.transcripts import scanned_agents

__all__ = ["build_parser", "command_list", "main", "run_scan"]

_TITLES = {
    "scan": "what to scan",
    "breaker": "LoopBreaker (the same request again and again)",
    "detector": "LoopDetector (the same tool call with the same answer)",
    "dedup": "DedupCache (identical requests answered from the cache)",
    "guard": "Guard (what a loop gets, the cache plan, sessions, failures)",
    "output": "output",
}


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (exit status 2); a parser that has
    commands knows each one's one-line summary (:func:`_command`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, str] = {}

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _command(
    parser: _Parser,
    commands: argparse._SubParsersAction[_Parser],
    name: str,
    summary: str,
    **kwargs: Any,
) -> _Parser:
    """Add the command ``name``: its line in ``loopfuse --help`` and in the list bare
    ``loopfuse`` prints are both ``summary``, so no command can miss either."""
    parser.commands[name] = summary
    return commands.add_parser(name, help=summary, **kwargs)


def build_parser() -> _Parser:
    """The ``loopfuse`` parser: ``scan`` with a flag per option, ``demo``, and ``init``
    and ``hook``, listed (their own parsers are in :mod:`loopfuse.cli.init` and
    :mod:`loopfuse.cli.hook`)."""
    parser = _Parser(prog="loopfuse", description="Stop LLM agents from burning money in loops.")
    parser.add_argument("--version", action="version", version=f"loopfuse {loopfuse.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    scan = _command(
        parser,
        commands,
        "scan",
        "replay recorded agent traffic through the guards",
        description="Replay recorded agent traffic (request bodies, JSON Lines logs, "
        "trajectories, Claude Code, Codex, Gemini CLI and Copilot CLI transcripts, OpenCode "
        "exports, folders of them) "
        "through LoopBreaker, LoopDetector and DedupCache, and report where each would have "
        "acted. A file whose format it does not understand is reported as such, never as "
        "clean. Exit status: 1 a loop found (whatever else happened), 0 nothing found, 2 "
        "usage or input error (a file unreadable or not understood) and no loop found.",
    )
    scan.add_argument("paths", nargs="*", metavar="PATH", help="file, folder, or - for stdin")
    scan.add_argument(
        "--agent",
        metavar="NAME",
        help="scan every session the CLI kept, where it keeps them, instead of PATHs: "
        f"{', '.join(scanned_agents())} (several: comma-separated), or all (those that kept any)",
    )
    scan.add_argument("--config", metavar="FILE", help="TOML file with the same keys as the flags")
    groups = {name: scan.add_argument_group(_TITLES[name]) for name in GROUPS}
    for option in OPTIONS:
        help_text = f"{option.help} (default: {_shown(value_of(Settings(), option))})"
        group = groups[option.group]
        kind = option.kind
        if kind.switch:
            group.add_argument(
                option.flag, dest=option.name, action=argparse.BooleanOptionalAction, help=help_text
            )
        else:
            group.add_argument(
                option.flag,
                dest=option.name,
                metavar=None if kind.choices else kind.metavar,
                choices=kind.choices if isinstance(kind, Choice) else None,
                help=help_text,
            )
    demo_parser = _command(
        parser,
        commands,
        "demo",
        "replay the bundled example runs and explain what each guard did",
        description="Replay four small synthetic runs bundled with loopfuse (a looping "
        "agent, an edit/test cycle, a retry storm in a proxy log, a healthy run) through "
        "the guards, print the report and what happened to each, and check each result: "
        "a smoke test of an installation. Exit status: 0 every example came out as "
        "expected, 1 otherwise.",
    )
    demo_parser.add_argument(
        "--format",
        choices=("text", "json", "markdown", "html"),
        default="text",
        help="the report's format, as scan's (default: text, with the explanation)",
    )
    demo_parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text report (default: auto, on a terminal unless NO_COLOR is set)",
    )
    # `init`, `hook` and `doctor` have parsers of their own (`loopfuse init --help`):
    # main() hands them their arguments before this parser reads any; they are here to
    # be listed.
    _command(
        parser,
        commands,
        "init",
        "install `loopfuse hook` in Claude Code, Codex or Gemini CLI",
        add_help=False,
    )
    _command(
        parser,
        commands,
        "hook",
        "what the agent CLIs run at each tool call (installed by init)",
        add_help=False,
    )
    _command(
        parser,
        commands,
        "doctor",
        "say whether each CLI's hook is installed, reads its settings and runs",
        add_help=False,
    )
    return parser


def command_list(parser: _Parser) -> str:
    """Every command of ``parser`` on a line of its own, with its summary."""
    width = max(map(len, parser.commands), default=0)
    return "".join(f"  {name:<{width}}  {summary}\n" for name, summary in parser.commands.items())


def _shown(default: object) -> str:
    if default is None:
        return "none"
    if isinstance(default, tuple):
        items = ("=".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in default)
        return ",".join(items) or "-"
    return str(default) or "-"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    args_given = list(sys.argv[1:] if argv is None else argv)
    # `hook` and `init` run on their own parsers (the console script,
    # loopfuse.cli.entry, hands them over without importing this module).
    if args_given[:1] == ["hook"]:
        from loopfuse.cli import hook

        return hook.main(args_given[1:])
    if args_given[:1] == ["init"]:
        from loopfuse.cli import init

        return init.main(args_given[1:])
    if args_given[:1] == ["doctor"]:
        from loopfuse.cli import doctor

        return doctor.main(args_given[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(args_given)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else 2
    stdout, stderr = sys.stdout, sys.stderr
    _tolerate_unencodable(stdout)
    _tolerate_unencodable(stderr)
    if args.command == "demo":
        report = io.StringIO()
        status = demo.run(report, _style(args.color, stdout), args.format, _width(stdout))
        _emit(stdout, report.getvalue())
        return status
    if args.command != "scan":
        stderr.write("loopfuse: error: choose a command (loopfuse COMMAND --help says more):\n")
        stderr.write(command_list(parser))
        return 2
    agents = _agents(args.agent, bool(args.paths))
    if isinstance(agents, str):
        stderr.write(f"loopfuse scan: error: {agents} (see loopfuse scan --help)\n")
        return 2
    try:
        settings = Settings.from_toml(args.config) if args.config else Settings()
        flags = {o.name: getattr(args, o.name) for o in OPTIONS}
        settings = apply({k: v for k, v in flags.items() if v is not None}, settings, "flags")
    except ConfigError as exc:
        stderr.write(f"loopfuse scan: error: {_one_line(str(exc))}\n")
        return 2
    return run_scan(args.paths, settings, stdout, stderr, agents)


def _agents(raw: str | None, paths: bool) -> tuple[str, ...] | str:
    """The CLIs ``--agent`` names, or what is wrong with the command line."""
    if raw is None:
        return () if paths else "the following arguments are required: PATH (or --agent NAME)"
    if paths:
        return "--agent finds the CLI's transcripts itself: give it no PATH"
    names = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    readable = scanned_agents()
    unknown = [name for name in names if name not in (*readable, *AGENT_CLIS, "all")]
    if unknown or not names:
        known = ", ".join((*readable, "all"))
        return f"--agent: unknown CLI {', '.join(unknown) or repr(raw)}; one of {known}"
    unread = [name for name in names if name not in (*readable, "all")]
    if unread:  # a CLI loopfuse guards whose transcripts it has no reader for (yet)
        told = ", ".join(agent_cli(name).title for name in unread)
        return f"--agent: scan has no reader for {told} transcripts; it reads {', '.join(readable)}"
    return ("all",) if "all" in names else names


def _agent_targets(agents: Sequence[str]) -> list[Path | InputError]:
    """Every transcript the CLIs kept, in their own folders: an error for a CLI whose
    folder is missing or empty (with ``all``: only when no CLI has any)."""
    every = tuple(agents) == ("all",)
    targets: list[Path | InputError] = []
    for agent in scanned_agents() if every else agents:
        folder = sessions_folder(agent)
        where = str(folder.roots[0])
        if not any(root.is_dir() for root in folder.roots):
            problem = f"no {agent} transcripts: no such folder (set {folder.setting} if "
            targets.append(InputError(where, problem + "the CLI keeps them elsewhere)"))
            continue
        found = list(folder.files())
        looked = ", ".join(str(root) for root in folder.roots if root.is_dir())
        problem = f"no {agent} transcripts where it keeps them (looked in {looked})"
        targets.extend(found or [InputError(where, problem)])
    if every and any(not isinstance(target, InputError) for target in targets):
        return [target for target in targets if not isinstance(target, InputError)]
    return targets


def _agent_folders(agents: Sequence[str]) -> list[str]:
    """The folders where the CLIs named in ``agents`` keep their sessions (with ``all``,
    those of the CLIs that have one)."""
    every = tuple(agents) == ("all",)
    roots = [
        root
        for agent in (scanned_agents() if every else agents)
        for root in sessions_folder(agent).roots
    ]
    kept = [root for root in roots if root.is_dir()] if every else roots
    return [str(root) for root in kept or roots]


def run_scan(
    paths: Sequence[str],
    settings: Settings,
    stdout: TextIO,
    stderr: TextIO,
    agents: Sequence[str] = (),
) -> int:
    """Scan ``paths`` (or every transcript of the CLIs named in ``agents``) and write
    the report; returns the exit status.

    A path that is missing, or a folder that holds nothing to scan (a CLI's folder
    without transcripts), is reported on stderr and is not a file scanned: when no file
    is left, the scan ends there (exit status 2) without an all-zero report."""
    targets = _agent_targets(agents) if agents else list(collect(paths))
    places = [target for target in targets if isinstance(target, InputError)]
    files = [target for target in targets if not isinstance(target, InputError)]
    if not files:
        for place in places:
            stderr.write(f"loopfuse scan: error: {_one_line(str(place))}\n")
        return 2
    enabled = settings.progress and _isatty(stderr)
    sizes = [_size(target) for target in files] if enabled else []
    progress = Progress(
        stderr, len(files), enabled=enabled, width=_width(stderr), total_bytes=sum(sizes)
    )
    results: list[FileResult] = []
    errors: list[InputError] = []
    problems: list[str] = []

    def complain(text: str) -> None:
        progress.clear()
        stderr.write(f"loopfuse scan: error: {_one_line(text)}\n")

    sized = iter(sizes)
    for target in targets:
        if isinstance(target, InputError):  # in its place among the files
            complain(str(target))
            continue
        name = "<stdin>" if target == STDIN else str(target)
        progress.step(name, next(sized, 0))
        try:
            source = read_path(target) if isinstance(target, Path) else read_stdin(sys.stdin.buffer)
            scanned, found = scan_file(source, settings, progress.within)
        except InputError as exc:
            errors.append(exc)
            complain(str(exc))
            continue
        except Exception as exc:  # a bug must not hide the other files' results
            problem = f"internal error while replaying ({type(exc).__name__}: {exc})"
            errors.append(InputError(name, problem + "; please report it"))
            complain(str(errors[-1]))
            continue
        results.extend(scanned)
        for problem in found:
            problems.append(f"{name}: {problem}")
            complain(problems[-1])
    progress.clear()
    summary = Summary.of(
        results, errors, settings.guards, settings.price_per_mtok, mode=settings.guard.mode
    )
    if agents:
        folder = scanned_folder(_agent_folders(agents), folders=True)
    else:
        folder = scanned_folder(paths)
    errors = places + errors  # listed in the report, counted apart from the files
    if settings.format == "json":
        output = render_json(results, errors, summary, settings, problems, folder)
    elif settings.format == "markdown":
        output = render_markdown(results, errors, summary, problems, folder)
    elif settings.format == "html":
        output = render_html(results, errors, summary, problems, folder)
    else:
        style = _style(settings.color, stdout)
        width = _width(stdout)
        output = render_text(results, errors, summary, style, width, settings.verbose, folder)
    _emit(stdout, output.rstrip("\n") + "\n")
    if summary.found:
        return 1
    return 2 if errors or problems else 0


def _size(target: Path | str) -> int:
    """A file's size, for the progress bar (``0`` for standard input, or when unknown)."""
    if not isinstance(target, Path):
        return 0
    try:
        return target.stat().st_size
    except OSError:
        return 0


def _emit(stream: TextIO, text: str) -> None:
    """Write the report; a reader that went away (``| head``) is not an error."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        # Point the descriptor at /dev/null so that the interpreter's own flush at exit
        # does not raise again; the exit status still tells what the scan found.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _style(color: str, stream: TextIO) -> Style:
    if color == "always":
        return Style(True)
    if color == "never":
        return Style(False)
    wanted = not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return Style(wanted and _isatty(stream))


def _width(stream: TextIO) -> int:
    if not _isatty(stream):
        return 80
    return shutil.get_terminal_size((80, 24)).columns


def _one_line(text: str) -> str:
    return printable(text.replace("\r", "\\r").replace("\n", "\\n"))


def _tolerate_unencodable(stream: TextIO) -> None:
    # A transcript may hold text the terminal's encoding cannot show: replace, don't crash.
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="replace")
