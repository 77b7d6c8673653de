"""How ``loopfuse init`` puts ``loopfuse hook`` into a coding-agent CLI's file: the kinds
of :class:`~loopfuse.harness.agent_cli.HookInstaller`, each a pure text transform.

An installer never reads or writes a file: ``loopfuse init`` does (links refused, the
backup, the atomic replace, ``--dry-run``, the original put back on ``--remove``) and
hands it the file's text. Which commands are loopfuse's is the caller's to say (an
:data:`Ours` test: ``loopfuse init`` knows the hook's flags), so that the kinds name no CLI
and import nothing of :mod:`loopfuse.cli`.

The kinds:

- :class:`HooksMap`: the ``"hooks": {Event: [...]}`` map of a JSON settings file, edited
  as text (:mod:`loopfuse.harness.settings_text`): every byte that is not one of
  loopfuse's entries stays as it was. Claude Code, Codex, Gemini CLI and Qwen Code;
- :class:`WholeFile`: a file that is loopfuse's alone (a plugin, an extension, a hooks
  file of its own): written whole from a template, removed whole, and a file at its
  place that is not one loopfuse wrote is refused;
- :class:`TomlTables`: ``[[hooks]]`` tables of a TOML settings file, added as text
  between two marker comments and taken out again (Kimi Code's ``config.toml``);
- :class:`FailOpen`: another kind's entries, whose command line ends ``|| true``, for a
  CLI that reads any exit status but 0 as a refusal (Copilot CLI).

>>> mine = lambda command: command.startswith("loopfuse hook")
>>> HooksMap(("PreToolUse",)).install('{"model": "x"}', "loopfuse hook --agent x", mine)
'{"model": "x", "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", \
"command": "loopfuse hook --agent x"}]}]}}'
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from loopfuse.errors import LoopfuseError
from loopfuse.harness import settings_text

if TYPE_CHECKING:
    from loopfuse.harness.agent_cli import HookInstaller

__all__ = [
    "ARGV",
    "BEGIN",
    "COMMAND",
    "END",
    "FAIL_OPEN",
    "FailOpen",
    "HooksMap",
    "InstallError",
    "Ours",
    "TomlTables",
    "WholeFile",
    "toml_string",
]

Ours = Callable[[str], bool]
"""Whether a command line is one of loopfuse's hook commands (``loopfuse init`` says:
:func:`loopfuse.cli.init.is_our_command`)."""


class InstallError(LoopfuseError, ValueError):
    """The text cannot be edited safely (the message says why; the caller names the file)."""


@dataclass(frozen=True, slots=True)
class HooksMap:
    """The Claude Code-style ``"hooks"`` map of a JSON settings file:
    ``{"hooks": {Event: [{"matcher": "*", "hooks": [{"type": "command", "command": CMD}]}]}}``.

    ``events`` are the events loopfuse's entry goes under (one entry each); ``untargeted``
    those of them that are not about one tool (a user's prompt, a batch), so have no
    ``matcher``; ``comments``: the CLI reads ``//`` and ``/* */`` comments in the file
    (Gemini CLI, Qwen Code); ``command_key``: the handler's field holding the command
    line; ``grouped``: ``False`` for a map whose event lists hold the handlers
    themselves (``{Event: [{"type": "command", COMMAND_KEY: CMD}]}``, no matcher level).

    What is there is kept, byte for byte; a second install changes nothing; uninstall
    takes out loopfuse's handlers, and the groups, event lists and ``hooks`` object that
    only held them. Each edit is checked: the edited text must read as the same edit
    made on the parsed value, or :class:`InstallError`.
    """

    events: tuple[str, ...]
    untargeted: frozenset[str] = frozenset()
    comments: bool = False
    command_key: str = "command"
    grouped: bool = True

    def check(self, text: str) -> None:
        """:class:`InstallError` if ``text`` is not a JSON object these edits can read
        (duplicate keys refused); a blank text is an empty file."""
        if not text.strip():
            return
        try:
            value = settings_text.load(text, self.comments)
            self._root(text)  # its shape, as the edits read it
        except settings_text.SettingsTextError as exc:
            raise InstallError(f"not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise InstallError("not a JSON object")

    def install(self, text: str, command: str, ours: Ours) -> str:
        """``text`` with one ``command`` entry for each of :attr:`events`; an entry of
        loopfuse's already there is replaced where it is (the lists and the ``hooks``
        object it was in stay), the others are kept. A blank ``text`` (no file) gets a
        new file's text."""
        wanted = self._install_value(self._value(text), command, ours)
        if not text.strip():
            return json.dumps(wanted, indent=2, ensure_ascii=False) + "\n"
        edited = self._install_text(text, command, ours)
        self._verify(edited, wanted)
        return edited

    def uninstall(self, text: str, ours: Ours) -> str:
        """``text`` without loopfuse's entries (``text`` itself when it has none)."""
        value = self._value(text)
        wanted = self._uninstall_value(value, ours)
        if wanted == value:
            return text
        edited = self._uninstall_text(text, ours)
        self._verify(edited, wanted)
        return edited

    def commands(self, text: str, ours: Ours) -> dict[str, list[str]]:
        """loopfuse's commands in ``text``, by event (any event of the map, each
        command in the order found); read leniently: a map of another shape has none.
        :class:`InstallError` for a text that is not a JSON object."""
        if not text.strip():
            return {}
        try:
            value = settings_text.load(text, self.comments)
        except settings_text.SettingsTextError as exc:
            raise InstallError(f"not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise InstallError("not a JSON object")
        hooks = value.get("hooks")
        found: dict[str, list[str]] = {}
        for event, groups in hooks.items() if isinstance(hooks, dict) else ():
            for group in groups if isinstance(groups, list) else ():
                for handler in self._handlers(group) or ():
                    if self._is_ours(handler, ours):
                        found.setdefault(event, []).append(handler[self.command_key])
        return found

    def same(self, text: str, other: str) -> bool:
        """Whether the CLI reads the two texts alike (a blank one as ``{}``)."""
        try:
            return bool(self._load(text) == self._load(other))
        except settings_text.SettingsTextError:
            return False

    def same_but_spacing(self, text: str, other: str) -> bool:
        """Whether the two texts differ at most in spacing outside their strings (a
        blank text reads as ``{}``, as the CLIs read it)."""
        if (re.sub(r"\s+", "", text) or "{}") != (re.sub(r"\s+", "", other) or "{}"):
            return False
        return self.same(text, other)

    # -- the parsed value ---------------------------------------------------------------

    def _load(self, text: str) -> Any:
        return settings_text.load(text, self.comments) if text.strip() else {}

    def _value(self, text: str) -> dict[str, Any]:
        self.check(text)
        value: dict[str, Any] = self._load(text)
        hooks = value.get("hooks", {})
        if not isinstance(hooks, dict):
            raise InstallError("'hooks' is not a JSON object; fix it by hand first")
        for event, groups in hooks.items():
            if not isinstance(groups, list):
                raise InstallError(f"hooks.{event} is not a list; fix it by hand first")
        return value

    def _entry(self, event: str, command: str) -> dict[str, Any]:
        handler: dict[str, Any] = {"type": "command", self.command_key: command}
        if not self.grouped:
            return handler
        entry: dict[str, Any] = {"hooks": [handler]}
        if event not in self.untargeted:  # a prompt has no tool to match
            entry = {"matcher": "*", **entry}
        return entry

    def _handlers(self, element: object) -> list[Any] | None:
        """The handlers of one element of an event's list (itself, when not grouped)."""
        if not self.grouped:
            return [element]
        handlers = element.get("hooks") if isinstance(element, dict) else None
        return handlers if isinstance(handlers, list) else None

    def _is_ours(self, handler: object, ours: Ours) -> bool:
        if not isinstance(handler, dict) or handler.get("type") != "command":
            return False
        command = handler.get(self.command_key)
        return isinstance(command, str) and ours(command)

    def _install_value(self, value: dict[str, Any], command: str, ours: Ours) -> dict[str, Any]:
        result = self._uninstall_value(value, ours)
        hooks = dict(result.get("hooks", {}))
        for event in self.events:
            hooks[event] = [*hooks.get(event, []), self._entry(event, command)]
        return {**result, "hooks": hooks}

    def _uninstall_value(self, value: dict[str, Any], ours: Ours) -> dict[str, Any]:
        hooks = value.get("hooks", {})
        if not hooks:
            return value
        kept: dict[str, Any] = {}
        for event, groups in hooks.items():
            remaining = []
            for group in groups:
                handlers = self._handlers(group)
                if handlers is None or not any(self._is_ours(h, ours) for h in handlers):
                    remaining.append(group)
                    continue
                others = [h for h in handlers if not self._is_ours(h, ours)]
                if others:
                    remaining.append({**group, "hooks": others})
            if remaining or not groups:  # a list that only held loopfuse's entry goes
                kept[event] = remaining
        result = {k: v for k, v in value.items() if k != "hooks"}
        if kept:
            result["hooks"] = kept
        return result

    def _verify(self, text: str, wanted: dict[str, Any]) -> None:
        """The edited text must read as the edit wanted, or nothing is written."""
        got: object
        try:
            got = self._load(text)
        except settings_text.SettingsTextError as exc:
            got = exc
        if got != wanted:
            raise InstallError(f"could not be edited in place ({got!r}); nothing was changed")

    # -- the text -----------------------------------------------------------------------

    def _root(self, text: str) -> settings_text.Container:
        start = len(text) - len(text.lstrip())
        return settings_text.outline(text, start, self.comments)

    def _install_text(self, text: str, command: str, ours: Ours) -> str:
        """``text`` with loopfuse's entries (and none other of loopfuse's) spliced in.
        Entries of an earlier run are replaced where they are: the lists and the
        ``hooks`` object they were in stay, so that a re-run with other options differs
        from the first run only in the command."""
        comments = self.comments
        text = self._uninstall_text(text, ours, keep=frozenset(self.events))
        entries = {event: self._entry(event, command) for event in self.events}
        root = self._root(text)
        at = root.find("hooks")
        if at is None:
            return settings_text.append(text, root, {e: [v] for e, v in entries.items()}, "hooks")
        for event, entry in entries.items():
            hooks = settings_text.outline(text, root.values[at][0], comments)
            where = hooks.find(event)
            if where is None:
                text = settings_text.append(text, hooks, [entry], event)
            else:
                groups = settings_text.outline(text, hooks.values[where][0], comments)
                text = settings_text.append(text, groups, entry)
            root = self._root(text)
        return text

    def _uninstall_text(self, text: str, ours: Ours, keep: frozenset[str] = frozenset()) -> str:
        """``text`` without loopfuse's entries, one at a time: a group that held only
        loopfuse's handler goes, so does an event's list and the ``hooks`` object that
        held only loopfuse's groups, but the lists of the events in ``keep`` (about to be
        filled again) and then the ``hooks`` object, which stay."""
        while True:
            edited = self._remove_one(text, ours, keep)
            if edited is None:
                return text
            text = edited

    def _remove_one(self, text: str, ours: Ours, keep: frozenset[str]) -> str | None:
        """``text`` without the first of loopfuse's entries, else ``None``."""
        comments = self.comments
        plain = settings_text.strip_comments(text, comments)
        root = self._root(text)
        at = root.find("hooks")
        if at is None or text[root.values[at][0]] != "{":
            return None
        hooks = settings_text.outline(text, root.values[at][0], comments)
        for event, (start, _) in enumerate(hooks.values):
            if text[start] != "[":
                continue
            groups = settings_text.outline(text, start, comments)
            for index, (group_start, group_end) in enumerate(groups.values):
                handlers = self._handlers(json.loads(plain[group_start:group_end]))
                if handlers is None or not any(self._is_ours(h, ours) for h in handlers):
                    continue
                if all(self._is_ours(h, ours) for h in handlers):  # the group was loopfuse's
                    if len(groups.elements) > 1 or hooks.keys[event] in keep:
                        return settings_text.delete(text, groups, index)
                    if len(hooks.elements) > 1 or keep:  # the event's list held only ours
                        return settings_text.delete(text, hooks, event)
                    return settings_text.delete(text, root, at)  # so did the hooks object
                table = settings_text.outline(text, group_start, comments)
                inner = settings_text.outline(
                    text, table.values[table.keys.index("hooks")][0], comments
                )
                mine = next(i for i, h in enumerate(handlers) if self._is_ours(h, ours))
                return settings_text.delete(text, inner, mine)
        return None


COMMAND: Final = "@LOOPFUSE_COMMAND@"
"""In a :class:`WholeFile` template: the hook's command line, as a JSON string (also a
JavaScript / TypeScript string literal)."""
ARGV: Final = "@LOOPFUSE_ARGV@"
"""In a :class:`WholeFile` template: the hook's command line split into its words, as a
JSON array of strings (for a plugin that starts the process without a shell)."""

_PLACEHOLDER: Final = re.compile(f"({re.escape(COMMAND)}|{re.escape(ARGV)})")


@dataclass(frozen=True, slots=True)
class WholeFile:
    """A file that is loopfuse's alone: a plugin, an extension, a hooks file of its own.

    ``template`` is the file's text, with :data:`COMMAND` and / or :data:`ARGV` where
    the hook's command goes; ``events`` the CLI's events the file hooks (what ``loopfuse
    doctor`` reports it installed for); ``previous`` the templates earlier releases of
    loopfuse wrote, still recognised as loopfuse's (so that ``--remove`` and a
    re-install replace them).

    Install writes the template (a file already there that is not one loopfuse wrote is
    refused: :class:`InstallError`); uninstall returns ``""``, which ``loopfuse init``
    reads as "remove the file" (a file that is not loopfuse's is left as it is).

    >>> plugin = WholeFile("run(@LOOPFUSE_COMMAND@)\\n", ("before",))
    >>> mine = lambda command: command.startswith("loopfuse hook")
    >>> text = plugin.install("", "loopfuse hook --agent x", mine)
    >>> text, plugin.commands(text, mine), plugin.uninstall(text, mine)
    ('run("loopfuse hook --agent x")\\n', {'before': ['loopfuse hook --agent x']}, '')
    """

    template: str
    events: tuple[str, ...]
    previous: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for template in (self.template, *self.previous):
            if not _PLACEHOLDER.search(template):
                raise ValueError(f"a template without {COMMAND} or {ARGV}: {template[:60]!r}")

    def check(self, text: str) -> None:
        """Any text can be read: whether it is loopfuse's is install's question."""
        del text

    def install(self, text: str, command: str, ours: Ours) -> str:
        """The file's text for ``command``; :class:`InstallError` when ``text`` (the file
        there) is not blank and not one loopfuse wrote."""
        if text.strip() and self._command(text, ours) is None:
            raise InstallError(
                "a file loopfuse init did not write is there; move it away (or remove "
                "it) and run loopfuse init again; nothing was changed"
            )
        return self.render(command)

    def uninstall(self, text: str, ours: Ours) -> str:
        """``""`` (remove the file) when ``text`` is loopfuse's, else ``text`` unchanged."""
        return "" if self._command(text, ours) is not None else text

    def commands(self, text: str, ours: Ours) -> dict[str, list[str]]:
        """loopfuse's command, for each of :attr:`events`, when ``text`` is loopfuse's."""
        command = self._command(text, ours)
        return {} if command is None else {event: [command] for event in self.events}

    def same(self, text: str, other: str) -> bool:
        """Whether the two texts are the same."""
        return text == other

    def same_but_spacing(self, text: str, other: str) -> bool:
        """Whether the two texts differ at most in spacing."""
        return re.sub(r"\s+", "", text) == re.sub(r"\s+", "", other)

    def render(self, command: str) -> str:
        """The template with ``command`` in its places."""
        values = {COMMAND: json.dumps(command), ARGV: json.dumps(shlex.split(command))}
        return _PLACEHOLDER.sub(lambda found: values[found.group()], self.template)

    def _command(self, text: str, ours: Ours) -> str | None:
        """The command of ``text`` when it is one of the templates filled with one of
        loopfuse's commands, else ``None``."""
        for template in (self.template, *self.previous):
            command = _filled(template, text)
            if command is not None and ours(command):
                return command
        return None


_DECODER: Final = json.JSONDecoder()


def _filled(template: str, text: str) -> str | None:
    """The command ``template`` was filled with to make ``text`` (every place the same
    command), else ``None``. Linear: the template's parts are matched in turn, each
    value read by the JSON decoder where its place is."""
    parts = _PLACEHOLDER.split(template)  # literal, placeholder, literal, ...
    at = 0
    found: str | None = None
    for index, part in enumerate(parts):
        if index % 2 == 0:
            if not text.startswith(part, at):
                return None
            at += len(part)
            continue
        if at >= len(text) or text[at] != ('"' if part == COMMAND else "["):
            return None
        try:
            value, at = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None
        if part == ARGV:
            if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
                return None
            value = shlex.join(value)
        if not isinstance(value, str) or (found is not None and value != found):
            return None
        found = value
    return found if at == len(text) else None


FAIL_OPEN: Final = " || true"
"""What :class:`FailOpen` appends to the hook's command line."""


@dataclass(frozen=True, slots=True)
class FailOpen:
    """Another installer's entries, whose command line ends ``|| true``: for a CLI that
    reads any exit status but 0 as a refusal (Copilot CLI), so that a hook that cannot
    even start (loopfuse uninstalled, a broken Python: status 127, 1) lets the call run,
    as the hook itself does whatever fails inside it. :meth:`commands` gives the
    commands without it (what ``loopfuse doctor`` runs and checks).

    >>> hooks = FailOpen(WholeFile("run(@LOOPFUSE_COMMAND@)\\n", ("before",)))
    >>> mine = lambda command: command.startswith("loopfuse hook")
    >>> text = hooks.install("", "loopfuse hook --agent x", mine)
    >>> text, hooks.commands(text, mine)
    ('run("loopfuse hook --agent x || true")\\n', {'before': ['loopfuse hook --agent x']})
    """

    inner: HookInstaller

    def check(self, text: str) -> None:
        """As the inner installer."""
        self.inner.check(text)

    def install(self, text: str, command: str, ours: Ours) -> str:
        """The inner installer's text for ``command || true``."""
        return self.inner.install(text, command + FAIL_OPEN, _failing_open(ours))

    def uninstall(self, text: str, ours: Ours) -> str:
        """As the inner installer, for the commands ending ``|| true``."""
        return self.inner.uninstall(text, _failing_open(ours))

    def commands(self, text: str, ours: Ours) -> dict[str, list[str]]:
        """loopfuse's commands, without ``|| true``."""
        found = self.inner.commands(text, _failing_open(ours))
        return {e: [c.removesuffix(FAIL_OPEN) for c in cs] for e, cs in found.items()}

    def same(self, text: str, other: str) -> bool:
        """As the inner installer."""
        return self.inner.same(text, other)

    def same_but_spacing(self, text: str, other: str) -> bool:
        """As the inner installer."""
        return self.inner.same_but_spacing(text, other)


def _failing_open(ours: Ours) -> Ours:
    """``ours`` of a command line ending ``|| true``, without it."""
    return lambda command: command.endswith(FAIL_OPEN) and ours(command.removesuffix(FAIL_OPEN))


# -- TOML [[hooks]] tables ---------------------------------------------------------------
# A CLI that reads its hooks from an array of tables (Kimi Code)::
#
#     [[hooks]]
#     event = "PreToolUse"
#     command = "/home/me/.venv/bin/loopfuse hook --agent kimi"
#
# gets one table per event, appended at the end of the file between two marker comments
# (BEGIN, END); every other byte of the file stays as it was written. Taking them out
# removes the lines between the markers, and also any [[hooks]] table whose command is
# loopfuse's without them: a CLI that writes its settings out again (Kimi Code's model
# switch, its /login) drops comments but keeps the tables. The text is parsed by nothing
# but the standard library's TOML reader, which checks every edit; finding the tables is a
# line scan (linear, no regular expression run on more than one line).

BEGIN: Final = (
    "# >>> loopfuse: hooks added by `loopfuse init` (`loopfuse init --remove` takes them out)"
)
"""The comment line before loopfuse's tables."""
END: Final = "# <<< loopfuse: end of its hooks"
"""The comment line after them."""


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters
    escaped, everything else as it is.

    >>> print(toml_string('say "hi"\\\\now\\t'))
    "say \\"hi\\"\\\\now\\t"
    """
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\t":
            out.append("\\t")
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _toml(text: str) -> dict[str, Any]:
    import tomllib  # here: a hook imports this module, and never reads TOML

    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise InstallError(f"not valid TOML ({exc})") from None


@dataclass(frozen=True, slots=True)
class TomlTables:
    """loopfuse's ``[[hooks]]`` tables in a CLI's TOML settings: one per event of
    ``events``, each with ``event`` and ``command`` keys (no ``matcher``: every tool).

    What is there is kept, byte for byte; a second install changes nothing; uninstall
    takes out loopfuse's tables (``ours`` says which commands are loopfuse's), marked or
    not. Each edit is checked: the edited text must read as the same edit made on the
    parsed value, or :class:`InstallError`.

    >>> hooks, mine = TomlTables(("PreToolUse", "PostToolUse")), lambda c: c.startswith("lf ")
    >>> text = hooks.install('default_model = "m"\\n', "lf hook", mine)
    >>> print(text, end="")
    default_model = "m"
    # >>> loopfuse: hooks added by `loopfuse init` (`loopfuse init --remove` takes them out)
    [[hooks]]
    event = "PreToolUse"
    command = "lf hook"
    <BLANKLINE>
    [[hooks]]
    event = "PostToolUse"
    command = "lf hook"
    # <<< loopfuse: end of its hooks
    >>> hooks.commands(text, mine), hooks.uninstall(text, mine)
    ({'PreToolUse': ['lf hook'], 'PostToolUse': ['lf hook']}, 'default_model = "m"\\n')
    """

    events: tuple[str, ...]

    def check(self, text: str) -> None:
        """:class:`InstallError` if ``text`` is not TOML these edits can read."""
        _toml_hooks(_toml(text))

    def tables(self, command: str) -> str:
        """The text of loopfuse's tables for ``command``, markers included."""
        body = "\n".join(
            f"[[hooks]]\nevent = {toml_string(event)}\ncommand = {toml_string(command)}\n"
            for event in self.events
        )
        return f"{BEGIN}\n{body}{END}\n"

    def install(self, text: str, command: str, ours: Ours) -> str:
        """``text`` with loopfuse's tables for ``command``, and no other of loopfuse's
        (an earlier run's, between its markers, replaced where they were; else added at
        the end; a blank ``text``, no file, gets the tables alone)."""
        original = _toml(text)
        _toml_hooks(original)  # a hooks key that is not an array of tables: refused
        block = self.tables(command)
        lines = text.splitlines(keepends=True)
        span = _marked(lines)
        if span is None:
            edited = _unmarked_removed(text, ours) if text.strip() else ""
            if edited and not edited.endswith("\n"):
                edited += "\n"
            edited += block
        else:  # the earlier run's place, held by its first marker while the rest is read
            held = "".join(lines[: span[0]]) + BEGIN + "\n" + "".join(lines[span[1] :])
            kept = _unmarked_removed(held, ours).splitlines(keepends=True)
            at = next(i for i, line in enumerate(kept) if line.rstrip("\r\n") == BEGIN)
            edited = "".join(kept[:at]) + block + "".join(kept[at + 1 :])
        wanted = _toml_without(original, ours)
        added = [{"event": event, "command": command} for event in self.events]
        wanted["hooks"] = [*_toml_hooks(wanted), *added]
        _toml_verify(edited, wanted)
        return edited

    def uninstall(self, text: str, ours: Ours) -> str:
        """``text`` without loopfuse's tables (and their markers); the rest as it was
        (``text`` itself when it has none)."""
        original = _toml(text)
        lines = text.splitlines(keepends=True)
        span = _marked(lines)
        if span is None and not _toml_has_ours(original, ours):
            return text
        if span is not None:
            del lines[span[0] : span[1]]
        edited = _unmarked_removed("".join(lines), ours)
        _toml_verify(edited, _toml_without(original, ours))
        return edited

    def commands(self, text: str, ours: Ours) -> dict[str, list[str]]:
        """loopfuse's commands in ``text``, by event (each command in the order found)."""
        found: dict[str, list[str]] = {}
        for entry in _toml_hooks(_toml(text)):
            event, command = entry.get("event"), entry.get("command")
            if isinstance(event, str) and isinstance(command, str) and ours(command):
                found.setdefault(event, []).append(command)
        return found

    def same(self, text: str, other: str) -> bool:
        """Whether the CLI reads the two texts alike (a blank one as no settings)."""
        try:
            return _toml(text) == _toml(other)
        except InstallError:
            return False

    def same_but_spacing(self, text: str, other: str) -> bool:
        """Whether the two texts differ at most in spacing (and read alike)."""
        if re.sub(r"\s+", "", text) != re.sub(r"\s+", "", other):
            return False
        return self.same(text, other)


def _unmarked_removed(text: str, ours: Ours) -> str:
    """``text`` without the ``[[hooks]]`` tables of loopfuse that no markers hold (the
    caller checks the result)."""
    entries = _toml_hooks(_toml(text))
    if not any(_table_is_ours(entry, ours) for entry in entries):
        return text
    lines = text.splitlines(keepends=True)
    headers = [i for i, kind in _headers(lines) if kind == "hooks"]
    if len(headers) != len(entries):
        raise InstallError(
            "loopfuse's [[hooks]] tables could not be told apart from the rest of the "
            "file (hooks written inline?); take them out by hand"
        )
    starts = {i for i, _ in _headers(lines)}
    drop: set[int] = set()
    for header, entry in zip(headers, entries, strict=True):
        if not _table_is_ours(entry, ours):
            continue
        end = next((i for i in range(header + 1, len(lines)) if i in starts), len(lines))
        while end > header + 1 and _trivia(lines[end - 1]):
            end -= 1  # blank lines and comments before the next table are not its own
        drop.update(range(header, end))
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def _toml_verify(edited: str, wanted: dict[str, Any]) -> None:
    """The edited text must read as the edit wanted, or nothing is written."""
    if not wanted.get("hooks"):
        wanted.pop("hooks", None)
    try:
        got: object = _toml(edited)
    except InstallError as exc:
        got = exc
    if got != wanted:
        raise InstallError(
            "could not be edited in place (it would not read as before with only "
            "loopfuse's [[hooks]] tables changed); nothing was changed"
        )


def _toml_has_ours(document: dict[str, Any], ours: Ours) -> bool:
    return any(_table_is_ours(entry, ours) for entry in _toml_hooks(document))


def _toml_hooks(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``hooks`` array of tables of a parsed file (empty when there is none)."""
    hooks = document.get("hooks", [])
    if not isinstance(hooks, list) or not all(isinstance(entry, dict) for entry in hooks):
        raise InstallError("'hooks' is not an array of tables ([[hooks]]); fix it by hand")
    return hooks


def _table_is_ours(entry: dict[str, Any], ours: Ours) -> bool:
    command = entry.get("command")
    return isinstance(command, str) and ours(command)


def _toml_without(document: dict[str, Any], ours: Ours) -> dict[str, Any]:
    """A copy of a parsed file without loopfuse's hook entries."""
    kept = [entry for entry in _toml_hooks(document) if not _table_is_ours(entry, ours)]
    result = {key: value for key, value in document.items() if key != "hooks"}
    if kept:
        result["hooks"] = kept
    return result


def _marked(lines: list[str]) -> tuple[int, int] | None:
    """The lines ``[start, end)`` from loopfuse's first marker to its end marker."""
    begin = next((i for i, line in enumerate(lines) if line.rstrip("\r\n") == BEGIN), None)
    if begin is None:
        return None
    for i in range(begin + 1, len(lines)):
        if lines[i].rstrip("\r\n") == END:
            return begin, i + 1
    raise InstallError(f"loopfuse's marker {BEGIN!r} has no end marker; fix it by hand")


def _trivia(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


_QUOTES: Final = ('"""', "'''")


def _headers(lines: list[str]) -> list[tuple[int, str]]:
    """The table headers among ``lines``: their index, and ``"hooks"`` for a
    ``[[hooks]]`` header (else ``""``). Lines inside a multi-line string are not
    headers; a line that only looks like one (an array's element on its own line) may
    be taken for one, which the caller's check then refuses."""
    found: list[tuple[int, str]] = []
    open_quote: str | None = None
    for index, line in enumerate(lines):
        if open_quote is None:
            stripped = line.strip()
            if stripped.startswith("["):
                found.append((index, "hooks" if _hooks_header(stripped) else ""))
        open_quote = _quote_after(line, open_quote)
    return found


def _hooks_header(stripped: str) -> bool:
    """Whether a line is the header ``[[hooks]]`` (spaces and a comment allowed)."""
    if not stripped.startswith("[["):
        return False
    end = stripped.find("]]")
    if end < 0:
        return False
    after = stripped[end + 2 :].strip()
    return stripped[2:end].strip() == "hooks" and (not after or after.startswith("#"))


def _quote_after(line: str, open_quote: str | None) -> str | None:
    """Which multi-line string is open after ``line`` (``None``: none), given the one
    open before it: the triple quotes, read left to right (a ``#`` outside them ends the
    line). Linear: each kind of quote is looked for from where it was last found, and
    the comment only between two quotes."""
    at = 0
    found = {quote: line.find(quote) for quote in _QUOTES}
    while True:
        for quote, where in found.items():
            if 0 <= where < at:
                found[quote] = line.find(quote, at)
        if open_quote is not None:
            end = found[open_quote]
            if end < 0:
                return open_quote
            at, open_quote = end + 3, None
            continue
        hits = [(where, quote) for quote, where in found.items() if where >= 0]
        if not hits:
            return None
        first, quote = min(hits)
        if line.find("#", at, first) >= 0:
            return None  # the rest of the line is a comment
        at, open_quote = first + 3, quote
