"""Pieces every dialect shares: content parts, tool calls, tool declarations, linking.

Each function takes whatever the client sent — including junk of the wrong type — and
returns plain JSON values in the canonical shape documented in :mod:`loopfuse.intent`.
Nothing here raises on a malformed body: junk is kept (minus volatile keys) so that two
different junk bodies still fingerprint differently.
"""

from __future__ import annotations

from typing import Any, Final

from loopfuse.intent import _json
from loopfuse.intent._json import MAX_DEPTH, NOT_JSON, load_trusted, loads_small

# Keys that change between two sends of the same request without changing what is
# asked: provider ids, prompt-cache breakpoints, signatures and encrypted blobs.
VOLATILE_KEYS: Final = frozenset(
    {
        "id",
        "call_id",
        "tool_call_id",
        "tool_use_id",
        "cache_control",
        "signature",
        "thoughtSignature",
        "thought_signature",
        "encrypted_content",
        "status",
    }
)

_TEXT_TYPES: Final = frozenset({"text", "input_text", "output_text"})
_DROPPED_TYPES: Final = frozenset({"redacted_thinking", "reasoning"})

Part = str | dict[str, Any]


def without_volatile(value: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``value`` without the :data:`VOLATILE_KEYS` (top level only)."""
    return {k: v for k, v in value.items() if k not in VOLATILE_KEYS}


def str_field(value: dict[str, Any], key: str) -> str | None:
    """``value[key]`` when it is a string, else ``None`` (junk may be unhashable)."""
    field = value.get(key)
    return field if isinstance(field, str) else None


def assemble(messages: list[dict[str, Any]], system: list[Part], tools: object) -> dict[str, Any]:
    """The intent dict: ``messages`` always, ``system`` and ``tools`` only when non-empty."""
    intent: dict[str, Any] = {"messages": messages}
    if system:
        intent["system"] = system
    declarations = tool_declarations(tools)
    if declarations:
        intent["tools"] = declarations
    return intent


def content_parts(content: object) -> list[Part]:
    """Canonical parts of a message's ``content`` in any dialect.

    >>> content_parts("hi")
    ['hi']
    >>> content_parts([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}])
    ['hi']
    >>> content_parts(None), content_parts(""), content_parts([])
    ([], [], [])
    """
    out: list[Part] = []
    if type(content) is str:
        if content:
            out.append(content)
        return out
    if content is None:
        return out
    if isinstance(content, list):
        for part in content:
            add_part(out, part)
    else:
        add_part(out, content)
    return out


def add_part(out: list[Part], part: object) -> None:
    """Append the canonical form of one content part (or nothing for a dropped one)."""
    if isinstance(part, str):
        if part:
            out.append(part)
        return
    if not isinstance(part, dict):
        out.append({"type": "json", "value": part})
        return
    kind = part.get("type")  # str_field(part, "type"), inline: once per content part
    if not isinstance(kind, str):
        kind = None
    if kind in _TEXT_TYPES:
        text = part.get("text")
        if isinstance(text, str):
            if text:
                out.append(text)  # annotations, citations, cache_control: not the ask
            return
    if kind == "thinking":
        thinking = part.get("thinking")
        if isinstance(thinking, str) and thinking:
            out.append({"type": "thinking", "text": thinking})
        return
    if kind in _DROPPED_TYPES:
        return  # encrypted or redacted reasoning: opaque, and regenerated per call
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        canon: dict[str, Any] = {"type": "image", "url": url}
        if isinstance(image, dict) and image.get("detail") is not None:
            canon["detail"] = image["detail"]
        out.append(canon)
        return
    if kind == "input_image":
        canon = {"type": "image", "url": part.get("image_url"), "file_id": part.get("file_id")}
        if part.get("detail") is not None:
            canon["detail"] = part["detail"]
        out.append({k: v for k, v in canon.items() if v is not None})
        return
    out.append(without_volatile(part))


SHORT_ARGUMENTS: Final = 2 * MAX_DEPTH
"""Argument strings up to this long cannot nest deeper than MAX_DEPTH: the parse decides."""


class Walk:
    """What one extraction walk learnt besides the intent.

    ``ok``: every value put into the intent may be written by a C serialiser. Values
    parsed from the body are (see ``_json.load_trusted``); a tool-call argument string
    parsed on the way may not be, and then clears it. ``anthropic`` / ``ollama``: the
    walk met a shape only that dialect uses, so detecting the dialect costs no second
    pass over the messages. ``marks``: when a list, the walk appends, before each item
    of the conversation, how many messages and system parts the intent held
    (:func:`loopfuse.intent.conversation` reads where each request of a recorded
    conversation starts from it).
    """

    __slots__ = ("anthropic", "marks", "ok", "ollama")

    def __init__(self, ok: bool = True, marks: list[tuple[int, int]] | None = None) -> None:
        self.ok = ok
        self.anthropic = False
        self.ollama = False
        self.marks = marks


def parse_arguments(arguments: object, walk: Walk | None = None) -> object:
    """Tool-call arguments as a JSON value: a JSON string is parsed, junk kept as is.

    >>> parse_arguments('{"path": "a.py"}')
    {'path': 'a.py'}
    >>> parse_arguments("not json")
    'not json'
    """
    if isinstance(arguments, str):
        # Most argument strings are short: too short to nest deeper than MAX_DEPTH, so
        # the parse alone decides (one call per tool call: kept inline).
        if len(arguments) <= SHORT_ARGUMENTS:
            fast = _json.trusted_loads
            if fast is not None:
                try:
                    return fast(arguments)  # trusted: nothing for the walk to clear
                except ValueError:
                    pass  # NaN, a lone surrogate, ...: the standard library decides
            value, trusted = loads_small(arguments)
        else:
            value, trusted = load_trusted(arguments)
        if value is NOT_JSON:
            return arguments
        if walk is not None and not trusted:
            walk.ok = False
        return value
    return arguments


def tool_call(name: object, arguments: object, walk: Walk | None = None) -> dict[str, Any]:
    """One canonical tool call; a missing name is ``""`` and missing arguments ``{}``."""
    return {
        "name": name if isinstance(name, str) else "",
        "arguments": {} if arguments is None else parse_arguments(arguments, walk),
    }


def tool_declarations(tools: object) -> list[Any]:
    """Canonical tools offered: ``{"name", "description", "parameters"}`` per function.

    OpenAI Chat (``{"type": "function", "function": {...}}``), OpenAI Responses (flat),
    Anthropic (``input_schema``), Gemini (``functionDeclarations``) and Ollama all map to
    the same shape; provider built-in tools are kept as sent, minus volatile keys.
    ``None`` and ``[]`` both give ``[]``.
    """
    if tools is None:
        return []
    if not isinstance(tools, list):
        return [{"type": "json", "value": tools}]
    out: list[Any] = []
    for tool in tools:
        if not isinstance(tool, dict):
            out.append({"type": "json", "value": tool})
            continue
        function = tool.get("function")
        if isinstance(function, dict):
            out.append(_function(function, "parameters"))
            continue
        declarations = tool.get("functionDeclarations", tool.get("function_declarations"))
        if isinstance(declarations, list):
            for declaration in declarations:
                if isinstance(declaration, dict):
                    out.append(_function(declaration, "parameters"))
                else:
                    out.append({"type": "json", "value": declaration})
            rest = {
                k: v
                for k, v in tool.items()
                if k not in ("functionDeclarations", "function_declarations")
                and k not in VOLATILE_KEYS
            }
            if rest:  # a volatile key alone must not add a tool
                out.append(rest)
        elif "input_schema" in tool:
            out.append(_function(tool, "input_schema"))
        elif tool.get("type") == "function" and "name" in tool:
            out.append(_function(tool, "parameters"))
        else:
            out.append(without_volatile(tool))
    return out


def _function(declaration: dict[str, Any], schema_key: str) -> dict[str, Any]:
    canon: dict[str, Any] = {"name": declaration.get("name")}
    if declaration.get("description") is not None:
        canon["description"] = declaration["description"]
    schema = declaration.get(schema_key)
    if schema is None and schema_key == "parameters":
        schema = declaration.get("parametersJsonSchema", declaration.get("parameters_json_schema"))
    if schema is not None:
        canon["parameters"] = schema
    if declaration.get("strict") is not None:
        canon["strict"] = declaration["strict"]
    return canon


_SCANNED_UP_TO: Final = 8
"""Turns with at most this many calls link results by scanning the turn (cheapest for the
usual one to a few calls); longer ones through maps built once per turn."""


class CallLinker:
    """Links tool results to the call they answer, by position in the calling turn.

    Provider ids (``tool_call_id``, ``call_id``, ``tool_use_id``, Gemini ``id``) are
    regenerated by clients, so the intent replaces them with the index of the call in
    the nearest preceding assistant turn that made calls. A result whose id is missing
    while the calls had ids, unknown, or shared by two calls links to ``None``. Results
    in a dialect without ids (Ollama, Gemini without ids) link by tool name, then by
    order.

    Linking costs O(1) per result, whatever the number of parallel calls (a body with
    thousands of them is the client's to send, not a reason to take quadratic time):
    past :data:`_SCANNED_UP_TO` calls, a turn's ids and names are indexed once, and the
    first call still open (of a name, or of any) is a cursor that only moves forward,
    since a call once answered stays answered within the turn. A Responses body grows
    its turn call by call (``start_turn`` again with the same, longer lists): the
    indexes catch up with what was appended.
    """

    __slots__ = (
        "_any_id",
        "_by_id",
        "_by_name",
        "_calls",
        "_ids",
        "_ids_indexed",
        "_names_indexed",
        "_next",
        "_open",
        "_open_named",
        "_used",
    )

    def __init__(self) -> None:
        self._ids: list[object] = []
        self._calls: list[dict[str, Any]] = []
        self._used: set[int] = set()
        self._next = 0
        self._open = 0  # no call before this one is still open
        self._open_named: dict[str, int] = {}  # the same, per name, into _by_name[name]
        # Indexes of the turn, filled as needed and kept while the lists only grow.
        self._by_id: dict[str, int] = {}  # id -> its call, or -1 when two calls share it
        self._any_id = False  # a call of the turn has an id
        self._ids_indexed = 0
        self._by_name: dict[str, list[int]] = {}  # name -> its calls, in order
        self._names_indexed = 0

    def start_turn(self, ids: list[object], calls: list[dict[str, Any]]) -> None:
        """An assistant turn made these canonical calls (each with its ``"name"``), with
        these provider ids (``None`` where the dialect has none)."""
        if ids is not self._ids or calls is not self._calls:
            self._ids = ids
            self._calls = calls
            # Once per assistant turn of every body: only what was filled is emptied.
            if self._ids_indexed:
                self._by_id = {}
                self._any_id = False
                self._ids_indexed = 0
            if self._names_indexed:
                self._by_name = {}
                self._names_indexed = 0
        if self._used:
            self._used.clear()
        self._next = 0
        self._open = 0
        if self._open_named:
            self._open_named.clear()

    def link(self, result_id: object, name: object = None) -> int | None:
        """Index of the call a result answers, or ``None`` when it cannot be known."""
        ids = self._ids
        if isinstance(result_id, str) and result_id:  # the common case, kept inline
            self._next += 1
            if len(ids) <= _SCANNED_UP_TO:
                if ids.count(result_id) != 1:
                    return None
                index = ids.index(result_id)
            else:
                index = self._id_index().get(result_id, -1)
                if index < 0:
                    return None  # unknown, or shared by two calls
            self._used.add(index)
            return index
        found = self._find(result_id, name)
        if found is not None:
            self._used.add(found)
        self._next += 1
        return found

    def _id_index(self) -> dict[str, int]:
        """The turn's string ids, each to its call (-1 when shared), caught up."""
        ids = self._ids
        by_id = self._by_id
        for index in range(self._ids_indexed, len(ids)):
            call_id = ids[index]
            if call_id is not None:
                self._any_id = True
                # Only a string equals a string id (JSON has no other kind that does).
                if isinstance(call_id, str):
                    by_id[call_id] = -1 if call_id in by_id else index
        self._ids_indexed = len(ids)
        return by_id

    def _find(self, result_id: object, name: object) -> int | None:
        """The call a result without a usable id answers (by name, then by order)."""
        ids = self._ids
        if len(ids) <= _SCANNED_UP_TO:
            if any(call_id is not None for call_id in ids):
                return None  # the calls had ids and this result has none: ambiguous
            if isinstance(name, str) and name:
                for index, call in enumerate(self._calls):
                    if call["name"] == name and index not in self._used:
                        return index
                return None
        else:
            self._id_index()
            if self._any_id:
                return None
            if isinstance(name, str) and name:
                return self._open_call_named(name)
        position = self._next
        if position < len(ids) and position not in self._used:
            return position
        # Order broken by an earlier result linked by name: the first call still open.
        used = self._used
        first = self._open
        while first < len(ids) and first in used:
            first += 1
        self._open = first
        return first if first < len(ids) else None

    def _open_call_named(self, name: str) -> int | None:
        """The first call named ``name`` that no result answered yet."""
        calls = self._calls
        by_name = self._by_name
        for index in range(self._names_indexed, len(calls)):
            by_name.setdefault(calls[index]["name"], []).append(index)
        self._names_indexed = len(calls)
        named = by_name.get(name)
        if named is None:
            return None
        used = self._used
        cursor = self._open_named.get(name, 0)
        while cursor < len(named) and named[cursor] in used:
            cursor += 1
        self._open_named[name] = cursor
        return named[cursor] if cursor < len(named) else None
