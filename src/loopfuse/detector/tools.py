"""Which tools only *look* (observation tools) and which look at something expensive.

Tool names come prefixed and spelled every way: ``mcp__fs__read_file``, ``2:read_file``,
``fs.readFile``, ``ReadFile``. A name is split into namespace parts (``__ : . / \\``) and
the last part — the tool's own name — into lower-case words (``_``, ``-``, blanks,
camelCase), and patterns are matched on whole words, never on substrings:

- an **observation** pattern matches when its words begin the tool's own name
  (``get`` matches ``get_user_details``, ``read_file`` matches ``mcp__fs__read_file``),
  or end it (``status`` matches ``job_status``) unless the name begins with a verb that
  changes state (``update_status`` is not an observation);
- a **costly** pattern matches its words anywhere in the whole name
  (``click`` matches ``browser_click`` but not ``clickhouse_query``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from loopfuse.detector._textcache import TextCache
from loopfuse.errors import ConfigError
from loopfuse.harness.generic import DEFAULT_COSTLY_TOOLS, DEFAULT_OBSERVATION_TOOLS

if TYPE_CHECKING:
    from loopfuse.detector.signature import ToolCall

__all__ = [
    "DEFAULT_COSTLY_TOOLS",
    "DEFAULT_OBSERVATION_TOOLS",
    "is_costly_batch",
    "is_costly_tool",
    "is_observation_batch",
    "is_observation_tool",
    "name_words",
    "own_name",
]

# A tool whose own name starts with one of these changes state, whatever it ends with.
_MUTATING_VERB_LIST: Final = (
    "set", "update", "create", "delete", "remove", "write", "edit", "put", "post", "patch",
    "send", "run", "exec", "execute", "apply", "install", "uninstall", "start", "stop",
    "kill", "cancel", "book", "move", "rename", "insert", "replace", "submit", "commit",
    "push", "deploy", "reset", "clear", "add", "append", "modify", "change", "upload",
    "save", "make", "mk", "rm", "mv", "cp", "sed", "touch", "restart", "trigger",
    "enable", "disable", "approve", "merge", "close", "open", "transfer", "pay", "buy",
    "order",
)  # fmt: skip
_MUTATING_VERBS: Final = frozenset(_MUTATING_VERB_LIST)

_NAMESPACE: Final = re.compile(r"__|[:./\\]")
_CAMEL: Final = re.compile(r"([a-z0-9])([A-Z])")
_UPPER: Final = re.compile(r"[A-Z]")
_CAMEL_GAP: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORDS: Final = re.compile(r"[a-z0-9]+")


_CACHED_NAME: Final = 256  # longer tool names are split again each time, never kept
_CLASSIFIED: Final = 4096  # names a ToolClassifier keeps the classes of


def name_words(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(words of the whole name, words of the tool's own name)``, lower-case.

    >>> name_words("mcp__fs__readFile")
    (('mcp', 'fs', 'read', 'file'), ('read', 'file'))
    >>> name_words("2:read_file")
    (('2', 'read', 'file'), ('read', 'file'))

    Cached for names up to :data:`_CACHED_NAME` characters (real tool names are at most
    64 or 128 at every provider): the words are as long as the name, so a longer one,
    which only a hostile client sends, is not kept.
    """
    if len(name) <= _CACHED_NAME:
        return _cached_name_words(name)
    return _name_words(name)


@lru_cache(maxsize=4096)
def _cached_name_words(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _name_words(name)


def _name_words(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    parts = [part for part in _NAMESPACE.split(name) if _WORDS.search(part.lower())]
    own = parts[-1] if parts else name
    split = tuple(_words(name))
    # A name without a namespace is its own name: its words are not read twice.
    return split, split if own == name else tuple(_words(own))


def _words(text: str) -> list[str]:
    if _UPPER.search(text) is not None:  # else there is no camel case to split
        # What _CAMEL.sub(r"\1_\2") gives, with a constant replacement: no Python call
        # per match (a 250 KB camelCase name took 0.6 s).
        text = _CAMEL_GAP.sub("_", text)
    return _WORDS.findall(text.lower())


def own_name(name: str) -> str:
    """A tool's own name, without its namespace.

    >>> own_name("mcp__deploy__deploy_app"), own_name("fs.readFile"), own_name("bash")
    ('deploy_app', 'readFile', 'bash')
    """
    parts = [part for part in _NAMESPACE.split(name) if part]
    return parts[-1] if parts else name


def _compile(patterns: Iterable[str], what: str) -> tuple[tuple[str, ...], ...]:
    if isinstance(patterns, str):
        raise ConfigError(f"{what} must be a collection of names, not a single str")
    compiled = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ConfigError(f"{what} must hold str patterns, got {type(pattern).__name__}")
        words = tuple(_WORDS.findall(_CAMEL.sub(r"\1_\2", pattern).lower()))
        if not words:
            raise ConfigError(f"{what} pattern {pattern!r} has no letters or digits")
        compiled.append(words)
    return tuple(compiled)


class ToolClassifier:
    """Compiled observation and costly patterns (one per detector; matching is cached).

    >>> c = ToolClassifier(DEFAULT_OBSERVATION_TOOLS, DEFAULT_COSTLY_TOOLS)
    >>> c.is_observation("mcp__github__get_issue"), c.is_observation("update_status")
    (True, False)
    >>> c.is_costly("clickhouse_query"), c.is_costly("browser_click")
    (False, True)
    """

    __slots__ = ("_cache", "_costly", "_long", "_observation")

    def __init__(self, observation_tools: Iterable[str], costly_tools: Iterable[str]) -> None:
        self._observation = _compile(observation_tools, "observation_tools")
        self._costly = _compile(costly_tools, "costly_tools")
        # Names are the client's, of any length: a name up to _CACHED_NAME characters is
        # its own key (a plain dict, emptied when full), a longer one its digest's.
        self._cache: dict[str, tuple[bool, bool]] = {}
        self._long: TextCache[tuple[bool, bool]] = TextCache(self._match, 256, 0)

    def _classify(self, name: str) -> tuple[bool, bool]:
        found = self._cache.get(name)
        if found is None:
            if len(name) > _CACHED_NAME:
                return self._long.call(name)
            found = self._match(name)
            if len(self._cache) >= _CLASSIFIED:
                self._cache.clear()
            self._cache[name] = found
        return found

    def _match(self, name: str) -> tuple[bool, bool]:
        words, own = name_words(name)
        return (_observation_match(own, self._observation), _costly_match(words, self._costly))

    def is_observation(self, name: str) -> bool:
        """True when ``name`` is a read-only tool (costly or not)."""
        return self._classify(name)[0]

    def is_costly(self, name: str) -> bool:
        """True when ``name`` matches a costly pattern."""
        return self._classify(name)[1]

    def classify_names(self, names: Iterable[str]) -> tuple[bool, bool]:
        """``(every name is an observation, some name is costly)`` for one batch."""
        if type(names) is tuple and len(names) == 1:
            return self._classify(names[0])
        observation = True
        costly = False
        empty = True
        for name in names:
            empty = False
            obs, cost = self._classify(name)
            observation = observation and obs
            costly = costly or cost
        return observation and not empty, costly


def _observation_match(own: tuple[str, ...], patterns: tuple[tuple[str, ...], ...]) -> bool:
    if not own:
        return False
    for words in patterns:
        n = len(words)
        if own[:n] == words:
            return True
        if own[-n:] == words and own[0] not in _MUTATING_VERBS:
            return True
    return False


def _costly_match(words: tuple[str, ...], patterns: tuple[tuple[str, ...], ...]) -> bool:
    for pattern in patterns:
        n = len(pattern)
        for start in range(len(words) - n + 1):
            if words[start : start + n] == pattern:
                return True
    return False


_DEFAULT: Final = ToolClassifier(DEFAULT_OBSERVATION_TOOLS, DEFAULT_COSTLY_TOOLS)


def _observation_classifier(patterns: Iterable[str] | None) -> ToolClassifier:
    return _DEFAULT if patterns is None else ToolClassifier(patterns, ())


def _costly_classifier(patterns: Iterable[str] | None) -> ToolClassifier:
    return _DEFAULT if patterns is None else ToolClassifier((), patterns)


def is_observation_tool(name: str, patterns: Iterable[str] | None = None) -> bool:
    """True when the tool ``name`` only reads (see the module docs for the matching).

    >>> is_observation_tool("mcp__fs__read_file"), is_observation_tool("2:read_file")
    (True, True)
    >>> is_observation_tool("job_status"), is_observation_tool("write_file")
    (True, False)
    """
    return _observation_classifier(patterns).is_observation(name)


def is_costly_tool(name: str, patterns: Iterable[str] | None = None) -> bool:
    """True when a costly pattern matches whole words of ``name``.

    >>> is_costly_tool("playwright__browser_navigate"), is_costly_tool("clickhouse_query")
    (True, False)
    """
    return _costly_classifier(patterns).is_costly(name)


def is_observation_batch(calls: Sequence[ToolCall], patterns: Iterable[str] | None = None) -> bool:
    """True when every call of a non-empty batch is an observation tool.

    Costly tools count as observations here; :func:`is_costly_batch` tells them apart.

    >>> from loopfuse.detector import ToolCall
    >>> is_observation_batch([ToolCall("read_file", {"path": "a"}), ToolCall("Grep", {})])
    True
    >>> is_observation_batch([ToolCall("read_file", {}), ToolCall("write_file", {})])
    False
    >>> is_observation_batch([])
    False
    """
    return _observation_classifier(patterns).classify_names(call.name for call in calls)[0]


def is_costly_batch(calls: Sequence[ToolCall], patterns: Iterable[str] | None = None) -> bool:
    """True when some call of the batch is a costly tool (web fetch, browser action).

    >>> from loopfuse.detector import ToolCall
    >>> is_costly_batch([ToolCall("read_file", {}), ToolCall("web_fetch", {"url": "u"})])
    True
    >>> is_costly_batch([ToolCall("clickhouse_query", {"sql": "select 1"})])
    False
    """
    return _costly_classifier(patterns).classify_names(call.name for call in calls)[1]
