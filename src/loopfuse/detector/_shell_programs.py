"""The read-only programs and sub-commands, and the argument rules that keep them read-only.

:data:`DEFAULT_READ_ONLY_COMMANDS` is the documented list (docs/shell.md). An entry is a
program, or a program and the sub-command words that must begin its arguments (``git
log``, ``gh run view``). The guards below apply whenever their program (or sub-command)
is named by a configured entry: they encode options that make a reading program write
(``sort -o``, ``find -delete``, ``git diff --output``), so a custom list cannot lose them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from loopfuse.detector._shell_lex import SAFE_SINKS
from loopfuse.detector._shell_scripts import awk_is_read_only, sed_is_read_only

__all__ = [
    "DEFAULT_READ_ONLY_COMMANDS",
    "OPTION_SPECS",
    "PROGRAM_GUARDS",
    "SUB_COMMAND_GUARDS",
    "Guard",
]

Guard = Callable[[Sequence[str]], bool]

_CONTAINER_SUBS: Final = (
    "ps", "logs", "inspect", "images", "stats", "version", "info", "top", "port", "history",
    "container ls", "container list", "container ps", "container inspect", "container logs",
    "container top", "container port", "container stats", "image ls", "image list",
    "image inspect", "image history", "network ls", "network inspect", "volume ls",
    "volume inspect",
)  # fmt: skip
_COMPOSE_SUBS: Final = ("ps", "logs", "config", "images", "ls", "top", "version")

DEFAULT_READ_ONLY_COMMANDS: Final[tuple[str, ...]] = (
    # reading files and text
    "cat", "head", "tail", "less", "more", "ls", "tree", "find", "grep", "egrep", "fgrep",
    "rg", "ag", "wc", "stat", "file", "du", "df", "nl", "cut", "tr", "sort", "uniq",
    "column", "diff", "cmp", "comm", "jq", "sed", "awk", "gawk", "mawk", "tac", "rev", "od",
    "hexdump", "strings", "paste", "join", "fold", "expand", "seq", "md5sum", "sha1sum",
    "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "realpath",
    "dirname", "basename", "readlink", "tee",
    # the shell itself and the machine
    "pwd", "cd", "pushd", "popd", "dirs", "echo", "printf", "true", "false", ":", "test",
    "[", "[[", "sleep", "wait", "jobs", "which", "type", "whereis", "printenv", "set", "ps",
    "pgrep", "top", "free", "uptime", "date", "whoami", "id", "uname", "hostname", "nproc",
    "lscpu", "lsof", "ss", "netstat", "nvidia-smi", "squeue", "sinfo", "sacct",
    # version control and CI
    "git status", "git log", "git diff", "git show", "git branch", "git tag", "git remote",
    "git rev-parse", "git ls-files", "git ls-tree", "git blame", "git shortlog",
    "git describe", "git grep", "git cat-file", "git rev-list", "git merge-base",
    "git name-rev", "git for-each-ref", "git show-ref", "git reflog", "git config",
    "git stash list", "git stash show", "git worktree list", "git submodule status",
    "git check-ignore", "git count-objects", "git version",
    "gh run view", "gh run list", "gh run watch", "gh pr checks", "gh pr view", "gh pr list",
    "gh pr diff", "gh pr status", "gh issue view", "gh issue list", "gh issue status",
    "gh repo view", "gh release view", "gh release list", "gh workflow view",
    "gh workflow list", "gh api", "gh status", "gh auth status",
    # clusters, containers, packages
    "kubectl get", "kubectl describe", "kubectl logs", "kubectl top", "kubectl explain",
    "kubectl events", "kubectl version", "kubectl api-resources", "kubectl api-versions",
    "kubectl config view", "kubectl config current-context", "kubectl config get-contexts",
    "kubectl rollout status", "kubectl rollout history", "kubectl auth can-i", "kubectl wait",
    *(f"{tool} {sub}" for tool in ("docker", "podman") for sub in _CONTAINER_SUBS),
    *(f"{tool} {sub}" for tool in ("docker compose", "docker-compose") for sub in _COMPOSE_SUBS),
    *(f"{pip} {sub}" for pip in ("pip", "pip3") for sub in ("list", "show", "freeze", "check")),
)  # fmt: skip
"""Programs and sub-commands that only read; see docs/shell.md for the argument rules."""


def _options(flags: str = "", values: str = "") -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(flags.split()), frozenset(values.split())


_DOCKER_OPTIONS: Final = _options(
    "-D --debug --tls --tlsverify",
    "-H --host -c --context --config -l --log-level --tlscacert --tlscert --tlskey",
)
_COMPOSE_OPTIONS: Final = _options(
    "--compatibility --dry-run --all-resources",
    "-f --file -p --project-name --profile --env-file --project-directory --ansi --progress",
)
OPTION_SPECS: Final[dict[tuple[str, ...], tuple[frozenset[str], frozenset[str]]]] = {
    ("git",): _options(
        "--no-pager -P --paginate -p --no-optional-locks --literal-pathspecs --bare "
        "--glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-replace-objects",
        "-C --git-dir --work-tree --namespace",
    ),
    ("kubectl",): _options(
        "--insecure-skip-tls-verify --match-server-version --warnings-as-errors",
        "-n --namespace --context --kubeconfig --cluster --user -s --server --token --as "
        "--as-group --as-uid --request-timeout --cache-dir --certificate-authority "
        "--client-certificate --client-key --tls-server-name -v --v",
    ),
    ("docker",): _DOCKER_OPTIONS,
    ("podman",): _DOCKER_OPTIONS,
    ("docker", "compose"): _COMPOSE_OPTIONS,
    ("docker-compose",): _COMPOSE_OPTIONS,
}
"""Options a sub-command may follow (``git -C repo log``, ``kubectl -n prod get pods``):
flags, then options that take a value. Another option there makes the line unreadable."""


def _none_of(*prefixes: str) -> Guard:
    """A guard refusing any argument that starts with one of ``prefixes``."""
    return lambda args: not any(arg.startswith(prefixes) for arg in args)


def _short_cluster_has(letter: str, stops: str) -> Guard:
    """A guard refusing a short-option cluster holding ``letter`` before a value letter."""

    def guard(args: Sequence[str]) -> bool:
        for arg in args:
            if arg.startswith("-") and not arg.startswith("--"):
                for flag in arg[1:]:
                    if flag == letter:
                        return False
                    if flag in stops:
                        break
        return True

    return guard


def _positionals_at_most(limit: int, value_options: str) -> Guard:
    takes_value = frozenset(value_options.split())

    def guard(args: Sequence[str]) -> bool:
        count, i = 0, 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                count += len(args) - i - 1
                break
            if arg in takes_value:
                i += 1
            elif not arg.startswith("-") or arg == "-":
                count += 1
            i += 1
        return count <= limit

    return guard


def _only_options(allowed: str, value_options: str = "") -> Guard:
    """A guard accepting the listed options (``--name=value`` too) and the values of
    ``value_options``; any other option or word is refused."""
    names = frozenset(allowed.split())
    takes_value = frozenset(value_options.split())

    def guard(args: Sequence[str]) -> bool:
        expect_value = False
        for arg in args:
            if expect_value and not arg.startswith("-"):
                expect_value = False
                continue
            name = arg.split("=", 1)[0]
            if name not in names:
                return False
            expect_value = name in takes_value and "=" not in arg
        return True

    return guard


def _listing(flags: str, letters: str, value_options: str) -> Guard:
    """``git branch`` / ``git tag``: read-only while they list (a name without
    ``-l``/``--list`` creates one)."""
    names = frozenset(flags.split())
    takes_value = frozenset(value_options.split())
    short = re.compile(f"-[{letters}]+[0-9]*")

    def guard(args: Sequence[str]) -> bool:
        listing = "-l" in args or "--list" in args
        expect_value = False
        for arg in args:
            if not arg.startswith("-"):
                if not (expect_value or listing):
                    return False
            else:
                name = arg.split("=", 1)[0]
                if name not in names and name not in takes_value and not short.fullmatch(arg):
                    return False
            expect_value = arg in takes_value
        return True

    return guard


def _find(args: Sequence[str]) -> bool:
    unsafe = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint")
    return not any(arg.startswith(unsafe) for arg in args)


def _tee(args: Sequence[str]) -> bool:
    flags = ("-a", "--append", "-i", "--ignore-interrupts", "-p", "--output-error")
    return all(arg.split("=", 1)[0] in flags or arg in SAFE_SINKS for arg in args)


def _date(args: Sequence[str]) -> bool:
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-d", "--date", "-r", "--reference", "-f", "--file"):
            skip = True
        elif arg.startswith("--set") or (arg[:1] == "-" and arg[1:2] != "-" and "s" in arg):
            return False
        elif not arg.startswith(("-", "+")):
            return False  # "date MMDDhhmm" sets the clock
    return True


def _set(args: Sequence[str]) -> bool:
    """``set -euo pipefail``: shell options only (no positional parameters)."""
    option_name = False
    for arg in args:
        if option_name and re.fullmatch(r"[a-z-]+", arg):
            option_name = False
        elif re.fullmatch(r"[-+][a-zA-Z]+", arg):
            option_name = arg.endswith("o")
        else:
            return False
    return True


def _git_remote(args: Sequence[str]) -> bool:
    rest = [arg for arg in args if arg not in ("-v", "--verbose")]
    return not rest or rest[0] in ("show", "get-url")


_GIT_CONFIG_READS: Final = frozenset(
    [
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
        "--list",
        "-l",
        "get",
        "list",
    ]
)
_GIT_CONFIG_WRITES: Final = frozenset(
    [
        "--add",
        "--unset",
        "--unset-all",
        "--replace-all",
        "--rename-section",
        "--remove-section",
        "-e",
        "--edit",
        "set",
        "unset",
        "rename-section",
        "remove-section",
        "edit",
    ]
)


def _git_config(args: Sequence[str]) -> bool:
    used = frozenset(arg.split("=", 1)[0] for arg in args)
    return bool(used & _GIT_CONFIG_READS) and not used & _GIT_CONFIG_WRITES


def _git_reflog(args: Sequence[str]) -> bool:
    first = next((arg for arg in args if not arg.startswith("-")), "show")
    return first not in ("expire", "delete", "drop")


def _gh_api(args: Sequence[str]) -> bool:
    """``gh api`` only as a GET: no ``-X``/``--method`` but GET, no fields, no input."""
    for i, arg in enumerate(args):
        if arg in ("-X", "--method"):
            method = args[i + 1] if i + 1 < len(args) else ""
        elif arg.startswith("--method="):
            method = arg[len("--method=") :]
        elif arg.startswith("-X"):
            method = arg[2:]
        elif arg.startswith(("-f", "-F", "--field", "--raw-field", "--input")):
            return False
        else:
            continue
        if method.upper() != "GET":
            return False
    return True


def _any_of(*needed: str) -> Guard:
    return lambda args: any(arg in needed for arg in args)


_NO_OUTPUT_FILE: Final = _none_of("-o", "--output")
_SORT_LONG: Final = _none_of("--output", "--compress-program")
_SORT_SHORT: Final = _short_cluster_has("o", "kStT")  # -o FILE, possibly as in "-ro"
_TREE_SHORT: Final = _short_cluster_has("R", "LPIoHT")
_SS_LONG: Final = _none_of("--kill")
_SS_SHORT: Final = _short_cluster_has("K", "AfFN")

PROGRAM_GUARDS: Final[dict[str, Guard]] = {
    "find": _find,
    "sed": sed_is_read_only,
    "awk": awk_is_read_only,
    "gawk": awk_is_read_only,
    "mawk": awk_is_read_only,
    "sort": lambda args: _SORT_LONG(args) and _SORT_SHORT(args),
    "uniq": _positionals_at_most(1, "-f -s -w --skip-fields --skip-chars --check-chars"),
    "less": _none_of("-o", "-O", "--log-file", "--LOG-FILE", "+"),
    # -o writes a file; -R runs tree again in each directory with "-o 00Tree.html"
    "tree": lambda args: _NO_OUTPUT_FILE(args) and _TREE_SHORT(args),
    "file": _none_of("-C", "--compile"),
    "rg": _none_of("--pre"),
    "ag": _none_of("--pager"),
    "ss": lambda args: _SS_LONG(args) and _SS_SHORT(args),  # -K / --kill closes sockets
    "tee": _tee,
    "date": _date,
    "set": _set,
    "top": lambda args: any(re.match(r"-[a-zA-Z]*b", arg) for arg in args),
    "hostname": _only_options(
        "-s --short -f --fqdn --long -d --domain -i --ip-address -I --all-ip-addresses "
        "-A --all-fqdns -a --alias"
    ),
    "nvidia-smi": _only_options(
        "-L --list-gpus -q --query -x --xml-format -i --id --query-gpu --query-compute-apps "
        "--format -l --loop -lms --loop-ms -d --display -u --unit",
        "-i --id -l --loop -lms --loop-ms -d --display",
    ),
    "git": _none_of("--output", "-O", "--open-files-in-pager"),
    "kubectl": _none_of("--log-file", "--log_file", "--log-dir", "--log_dir"),
}
"""Argument rules for every use of a program (``args``: everything after its name)."""

SUB_COMMAND_GUARDS: Final[dict[tuple[str, ...], Guard]] = {
    ("git", "branch"): _listing(
        "--all --remotes --verbose --list --show-current --column --no-column --color "
        "--no-color --ignore-case --omit-empty",
        "arvli",
        "--merged --no-merged --contains --no-contains --points-at --sort --format --abbrev",
    ),
    ("git", "tag"): _listing(
        "--list --column --no-column --color --ignore-case --omit-empty",
        "lni",
        "--contains --no-contains --points-at --merged --no-merged --sort --format",
    ),
    ("git", "remote"): _git_remote,
    ("git", "config"): _git_config,
    ("git", "reflog"): _git_reflog,
    ("gh", "api"): _gh_api,
    **{
        (*tool.split(), *sub.split()): _any_of("--no-stream")
        for tool in ("docker", "podman")
        for sub in ("stats", "container stats")
    },
    ("docker", "compose", "config"): _NO_OUTPUT_FILE,
    ("docker-compose", "config"): _NO_OUTPUT_FILE,
}
"""Argument rules for one sub-command (``args``: the arguments after its words)."""
