"""The read-only programs and sub-commands, and the argument rules that keep them read-only.

:data:`~loopfuse.harness.generic.DEFAULT_READ_ONLY_COMMANDS` is the documented list
(docs/shell.md). An entry is a program, or a program and the sub-command words that must
begin its arguments (``git log``, ``gh run view``). The guards below apply whenever their
program (or sub-command) is named by a configured entry: they encode options that make a
reading program write (``sort -o``, ``find -delete``, ``git diff --output``), so a custom
list cannot lose them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from loopfuse.detector._shell_lex import SAFE_SINKS
from loopfuse.detector._shell_scripts import awk_is_read_only, sed_is_read_only

__all__ = [
    "ANY_ARGUMENTS",
    "OPTION_SPECS",
    "PROGRAM_GUARDS",
    "SUB_COMMAND_GUARDS",
    "Guard",
]

Guard = Callable[[Sequence[str]], bool]

ANY_ARGUMENTS: Final = frozenset(
    ("cat", "head", "tail", "grep", "egrep", "fgrep", "wc", "ls", "stat", "du", "df", "tac",
     "nl", "cmp", "diff", "comm", "cut", "paste", "fold", "expand", "rev", "od", "hexdump",
     "strings", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum",
     "b2sum", "cksum", "echo", "basename", "dirname", "realpath", "readlink", "pwd", "cd",
     "pushd", "popd", "sleep", "true", "false", ":", "which", "type", "whereis", "printenv")
)  # fmt: skip
"""Programs that stay read-only whatever words they are given: no option of theirs writes
a file or runs a command, and neither does a second file. Only they may take words nobody
has seen: the ones ``xargs`` appends, and expanding words (``$X``, ``*.py``, ``{a,b}``)."""


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


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


def short_options(arg: str, takes_value: str = "") -> str:
    """The option letters of a short-option cluster: each letter up to the first one that
    takes a value (the rest of the word is that value); ``""`` for any other word.

    >>> short_options("-ro", "kot"), short_options("-to", "kot"), short_options("--output")
    ('ro', 't', '')
    """
    if len(arg) < 2 or arg[0] != "-" or arg[1] == "-":
        return ""
    for end in range(1, len(arg)):
        if arg[end] in takes_value:
            return arg[1 : end + 1]
    return arg[1:]


def long_option_is(arg: str, names: Sequence[str]) -> bool:
    """True when ``arg`` is one of the long options ``names`` as GNU ``getopt_long`` and
    git read it: the name, with ``=value`` or not, or any abbreviation of it (``--outp``
    is ``--output``). A longer name that starts with one of them counts too.

    >>> [long_option_is(a, ["--output"]) for a in ("--o", "--outp=x", "--output-x", "--on")]
    [True, True, True, False]
    """
    if arg[:2] != "--" or len(arg) < 3:
        return False
    given = arg.partition("=")[0]
    return any(name.startswith(given) or given.startswith(name) for name in names)


def _refusing(
    short: str = "", takes_value: str = "", long: Sequence[str] = (), prefixes: str = ""
) -> Guard:
    """A guard refusing the short options ``short`` (also inside a cluster, before a
    letter of ``takes_value``), the long options ``long`` (also abbreviated), and any
    word starting with one of the characters of ``prefixes``."""
    refused_letters = frozenset(short)
    starts = tuple(prefixes)

    def guard(args: Sequence[str]) -> bool:
        for arg in args:
            if arg[:2] == "--":
                if long_option_is(arg, long):
                    return False
            elif (
                refused_letters and not refused_letters.isdisjoint(short_options(arg, takes_value))
            ) or (starts and arg.startswith(starts)):
                return False
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


def _only_options(allowed: str, value_options: str = "", operands: bool = False) -> Guard:
    """A guard accepting the listed options (``--name=value`` too), the values of
    ``value_options`` and, with ``operands``, words that are not options; anything else
    (an abbreviation or a cluster included) is refused."""
    names = frozenset(allowed.split())
    takes_value = frozenset(value_options.split())

    def guard(args: Sequence[str]) -> bool:
        expect_value = False
        for arg in args:
            if expect_value and not arg.startswith("-"):
                expect_value = False
                continue
            if operands and (not arg.startswith("-") or arg == "-"):
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
    """No ``-s``/``--set`` (also ``-us``, ``--se``) and no operand but ``+FORMAT``."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--date", "--reference", "--file"):
            skip = True
        elif arg[:2] == "--":
            if long_option_is(arg, ("--set",)):
                return False
        elif arg[:1] == "-" and len(arg) > 1:
            letters = short_options(arg, "dfrI")
            if "s" in letters:
                return False
            skip = letters[-1:] in ("d", "f", "r") and arg.endswith(letters[-1])
        elif not arg.startswith("+"):
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


_GIT_CONFIG_MODIFIERS: Final = _names(
    "--global --system --local --worktree --includes --no-includes --show-origin "
    "--show-scope --name-only --null -z --bool --int --bool-or-int --path --expiry-date "
    "--fixed-value --all --regexp --url"
)
_GIT_CONFIG_VALUES: Final = _names("-f --file --blob --type --default")


def _git_config(args: Sequence[str]) -> bool:
    """A read (``--get``, ``--list``, ``get``, ``list``) with only the options that
    qualify it: a write option, abbreviated or not (``--unset-al``), is refused."""
    reading, expect_value = False, False
    first_operand: str | None = None
    for arg in args:
        if expect_value:
            expect_value = False
        elif arg.startswith("-"):
            name = arg.split("=", 1)[0]
            if name in _GIT_CONFIG_READS:
                reading = True
            elif name in _GIT_CONFIG_VALUES:
                expect_value = "=" not in arg
            elif name not in _GIT_CONFIG_MODIFIERS:
                return False
        elif first_operand is None:
            first_operand = arg
    if first_operand in _GIT_CONFIG_WRITES:
        return False
    return reading or first_operand in ("get", "list")


def _git_reflog(args: Sequence[str]) -> bool:
    first = next((arg for arg in args if not arg.startswith("-")), "show")
    return first not in ("expire", "delete", "drop")


_GH_API_FLAGS: Final = _names("--include --paginate --slurp --silent --verbose")
_GH_API_VALUES: Final = _names("--method --header --preview --jq --template --hostname --cache")
_GH_API_SHORT_VALUES: Final = "XHpqt"


def _gh_api(args: Sequence[str]) -> bool:
    """``gh api`` only as a GET: no ``-X``/``--method`` but GET (also in a cluster such as
    ``-iXDELETE``), no ``-f``/``-F`` fields, no ``--input``; an option not known here is
    refused. gh reads flags as pflag does: exact long names, clustered short ones."""
    i = 0
    while i < len(args):
        arg, method = args[i], "GET"
        i += 1
        if arg == "--":
            break
        if arg[:2] == "--":
            name, equals, value = arg.partition("=")
            if name in _GH_API_VALUES:
                if not equals:
                    value = args[i] if i < len(args) else ""
                    i += 1
                method = value if name == "--method" else method
            elif name not in _GH_API_FLAGS:
                return False
        elif arg[:1] == "-" and len(arg) > 1:
            letters = short_options(arg, _GH_API_SHORT_VALUES)
            if not set(letters[:-1]) <= {"i"} or letters[-1] not in "i" + _GH_API_SHORT_VALUES:
                return False
            if letters[-1] != "i":
                value = arg[len(letters) + 1 :].removeprefix("=")
                if not value:
                    value = args[i] if i < len(args) else ""
                    i += 1
                method = value if letters[-1] == "X" else method
        if method.upper() != "GET":
            return False
    return True


def _printf(args: Sequence[str]) -> bool:
    """Not ``printf -v NAME``: assigning to ``a[$(…)]`` runs the command in it."""
    return not args or not args[0].startswith("-") or args[0] == "--"


_ARITHMETIC_TESTS: Final = frozenset(("-eq", "-ne", "-lt", "-le", "-gt", "-ge"))
_INTEGER: Final = re.compile(r"[-+]?[0-9]+")


def _test(args: Sequence[str]) -> bool:
    """``test``/``[``: not ``-v NAME`` (it evaluates an array subscript in NAME)."""
    return "-v" not in args


def _double_bracket(args: Sequence[str]) -> bool:
    """``[[ … ]]``: no ``-v``, and both sides of ``-eq``, ``-lt``, … plain integers (bash
    evaluates them as arithmetic, which reads variables and runs a subscript's ``$(…)``)."""
    if "-v" in args:
        return False
    for i, arg in enumerate(args):
        if arg in _ARITHMETIC_TESTS and not (
            0 < i < len(args) - 1
            and _INTEGER.fullmatch(args[i - 1])
            and _INTEGER.fullmatch(args[i + 1])
        ):
            return False
    return True


def _only_letters(letters: str) -> Guard:
    """A guard accepting options made of ``letters`` (``-ln``) and any other word."""
    allowed = frozenset(letters)

    def guard(args: Sequence[str]) -> bool:
        return all(
            arg == "--" or not arg.startswith("-") or allowed.issuperset(arg[1:]) for arg in args
        )

    return guard


_PIP_OPTIONS: Final = (
    "-v --verbose -q --quiet -h --help -V --version --isolated --no-input --no-color "
    "--disable-pip-version-check --no-python-version-warning --require-virtualenv "
    "--no-cache-dir "
)
_PIP_INDEX: Final = "-i --index-url --extra-index-url -f --find-links"


def _any_of(*needed: str) -> Guard:
    return lambda args: any(arg in needed for arg in args)


_NO_OUTPUT_FILE: Final = _refusing("o", long=("--output",))

PROGRAM_GUARDS: Final[dict[str, Guard]] = {
    "find": _find,
    "sed": sed_is_read_only,
    "awk": awk_is_read_only,
    "gawk": awk_is_read_only,
    "mawk": awk_is_read_only,
    # -o FILE, also in a cluster ("-ro"; in "-to" the "o" is -t's value) or abbreviated
    "sort": _refusing("o", "kStTy", ("--output", "--compress-program")),
    "uniq": _positionals_at_most(1, "-f -s -w --skip-fields --skip-chars --check-chars"),
    "less": _refusing("oO", long=("--log-file", "--LOG-FILE"), prefixes="+"),
    # -o writes a file; -R runs tree again in each directory with "-o 00Tree.html"; tree
    # reads an option's value from the next word, so the whole cluster is its letters
    "tree": _refusing("oR", long=("--output",)),
    "file": _refusing("C", "efFmP", ("--compile",)),
    "rg": _none_of("--pre"),
    "ag": _refusing(long=("--pager",)),
    # -K / --kill closes sockets, -D / --diag writes a file
    "ss": _refusing("KD", "AfFN", ("--kill", "--diag")),
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
    # "git grep -O" runs a pager on the files found, also as in "-iOrm" (the pager: rm)
    "git": _refusing("O", long=("--output", "--open-files-in-pager")),
    "kubectl": _refusing(
        # --profile writes profile.pprof (or --profile-output) in the working folder
        long=("--log-file", "--log_file", "--log-dir", "--log_dir", "--profile")
    ),
    "printf": _printf,
    "test": _test,
    "[": _test,
    "[[": _double_bracket,
    "wait": _only_letters("nf"),  # not -p NAME: the name may hold a subscript
    "jobs": _only_letters("lnprs"),  # not -x: it runs a command
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
    # "compose wait --down-project" stops the project once the services it waits on stop
    ("docker", "compose", "wait"): _none_of("--down-project"),
    ("docker-compose", "wait"): _none_of("--down-project"),
    # pip takes its general options (--log FILE, --python PROGRAM) after the sub-command
    # too: only the options listed here, written in full
    **{
        (pip, sub): guard
        for pip in ("pip", "pip3")
        for sub, guard in (
            (
                "list",
                _only_options(
                    _PIP_OPTIONS + "-o --outdated -u --uptodate -e --editable -l --local "
                    "--user --pre --not-required --exclude-editable --include-editable "
                    "--no-index --path --format --exclude " + _PIP_INDEX,
                    "--path --format --exclude " + _PIP_INDEX,
                ),
            ),
            ("show", _only_options(_PIP_OPTIONS + "-f --files", operands=True)),
            (
                "freeze",
                _only_options(
                    _PIP_OPTIONS + "-l --local --user --all --exclude-editable -r "
                    "--requirement --path --exclude",
                    "-r --requirement --path --exclude",
                ),
            ),
            ("check", _only_options(_PIP_OPTIONS)),
        )
    },
}
"""Argument rules for one sub-command (``args``: the arguments after its words)."""
