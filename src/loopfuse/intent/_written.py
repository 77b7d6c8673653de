"""Tool calls an agent writes into its conversation as text, read as calls and answers.

Some agents keep their history as prose instead of the provider's tool-call fields, so a
body holds no ``tool_calls`` and every answer arrives as a user turn: to a guard, each lap
of a loop then looks like a new user request. Two families write this way, and each
shape below becomes the same canonical messages a native tool call would give (an
``assistant`` message with ``tool_calls``, then a ``tool`` message linked to it):

- **smolagents** ``ToolCallingAgent``: an assistant turn ``Calling tools:`` followed by
  the Python ``repr`` of its calls (``[{'id': ..., 'type': 'function', 'function':
  {'name': ..., 'arguments': ...}}]``), answered by a user turn ``Observation:\\n...``, or
  ``Call id: ...\\nError:\\n...`` when the tool failed (an error answer);
- **ReAct** (LangChain classic agents, LlamaIndex ``ReActAgent``, CrewAI): a line
  ``Action: NAME`` followed by a line ``Action Input: INPUT``, answered by
  ``Observation: ...`` in the next user turn (LlamaIndex), in the same assistant turn
  (CrewAI), or with the whole scratchpad of laps inside one prompt (LangChain's
  ``create_react_agent``).

What is not one of these shapes is left as it was: a message is only read when a line of
it *starts* with ``Calling tools:`` or is an ``Action:`` line directly followed by an
``Action Input:`` line, and a user turn is only read as an answer right after a turn that
wrote its calls. Everything here is linear in the text (line scans, no regular
expressions) and never raises: a ``Calling tools:`` list that is not a Python literal of
the shapes :mod:`loopfuse.intent._pyliteral` reads, or nests deeper than
:data:`~loopfuse.intent.MAX_DEPTH`, is not a call (the text stays text). That reader is
ours: client text never reaches Python's parser, which recurses in C (a few dozen
brackets kill a small thread) and reads some texts in quadratic time.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from loopfuse.intent._json import MAX_DEPTH
from loopfuse.intent._parts import CallLinker, Part, Walk, tool_call
from loopfuse.intent._pyliteral import NotALiteral, read_literal

__all__ = ["has_written_calls", "written_messages"]

CALLING_TOOLS: Final = "Calling tools:"
ACTION: Final = "Action:"
ACTION_INPUT: Final = "Action Input:"
OBSERVATION: Final = "Observation:"
ERROR: Final = "Error:"
RETRY: Final = "Now let's retry:"  # how smolagents ends the note of a failed step
CALL_ID: Final = "Call id:"

# A ReAct observation (or action input) runs until the model's next step begins.
_STEP_LABELS: Final = ("Thought:", ACTION, "Final Answer:", OBSERVATION)
_MAX_NAME: Final = 128  # a tool name is a word, not a paragraph
_UNKNOWN_TOOL: Final = "Unknown tool "
_EXECUTING: Final = "Error executing tool '"
_ARGUMENT_TRIES: Final = 8  # where the arguments of a failed step may end


class _Lap(NamedTuple):
    """One step written in a text: the thought before it, its calls, its answer if the
    same text holds it (``None`` otherwise), and whether that answer is an error."""

    before: str
    calls: list[tuple[str, object]]
    answer: str | None
    error: bool


def has_written_calls(text: str) -> bool:
    """Whether ``text`` may hold calls written as text (cheap substring searches).

    >>> has_written_calls("Action: search\\nAction Input: {}"), has_written_calls("hi")
    (True, False)
    """
    return ACTION_INPUT in text or CALLING_TOOLS in text or RETRY in text


def written_messages(
    role: str, parts: list[Part], linker: CallLinker, walk: Walk | None, waiting: bool = False
) -> tuple[list[dict[str, Any]], bool] | None:
    """The canonical messages an ``assistant`` or ``user`` message stands for when its
    text writes tool calls or (``waiting``: the turn before wrote calls still without an
    answer) begins with their answer; and whether its last calls still wait for their
    answer (the next user turn). ``None`` when it is neither: the message is read as usual.

    >>> linker = CallLinker()
    >>> text = "I will look.\\nAction: search\\nAction Input: {\\"q\\": \\"loops\\"}"
    >>> written_messages("assistant", [text], linker, None)
    ([{'role': 'assistant', 'content': ['I will look.'], 'tool_calls': [{'name': 'search', \
'arguments': {'q': 'loops'}}]}], True)
    >>> written_messages("user", ["Observation: no results"], linker, None, waiting=True)
    ([{'role': 'tool', 'call': 0, 'content': ['no results']}], False)
    >>> written_messages("user", ["What next?"], linker, None, waiting=True) is None
    True
    """
    if not parts or not all(type(part) is str for part in parts):
        return None
    text = "\n".join(parts)  # type: ignore[arg-type]  # every part is a str (checked)
    lines = text.split("\n")
    messages: list[dict[str, Any]] = []
    i = 0
    if waiting:
        i = _skip_call_id(lines)
        answer, error, i = _observation(lines, i)
        if answer is None:
            i = 0
        else:
            messages.append(answer_message(answer, error, linker))
    if not messages and not has_written_calls(text):
        return None
    laps, after = _laps(lines, i)
    if not laps and not messages:
        return None
    for number, lap in enumerate(laps):
        if lap.before and (role == "assistant" or number > 0):
            content: list[Part] = [lap.before]
        else:
            content = []
            if lap.before:  # a prompt before its first written step stays the user's
                messages.append({"role": "user", "content": [lap.before]})
        calls = [tool_call(name, arguments, walk) for name, arguments in lap.calls]
        messages.append({"role": "assistant", "content": content, "tool_calls": calls})
        linker.start_turn([None] * len(calls), calls)
        if lap.answer is not None:
            messages.append(answer_message(lap.answer, lap.error, linker))
    waiting = bool(laps) and laps[-1].answer is None
    if after:
        messages.append({"role": role, "content": [after]})
        waiting = False
    return messages, waiting


def answer_message(text: str, error: bool, linker: CallLinker) -> dict[str, Any]:
    """A canonical ``tool`` message for an answer written as text."""
    message: dict[str, Any] = {
        "role": "tool",
        "call": linker.link(None),
        "content": [text] if text else [],
    }
    if error:
        message["is_error"] = True
    return message


def _skip_call_id(lines: list[str]) -> int:
    """Past blank lines and a ``Call id: ...`` line (smolagents names the call answered)."""
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines) and lines[i].lstrip().startswith(CALL_ID):
        i += 1
    return i


def _laps(lines: list[str], i: int) -> tuple[list[_Lap], str]:
    """The steps written in ``lines[i:]`` and the text after the last one."""
    laps: list[_Lap] = []
    before: list[str] = []
    count = len(lines)
    while i < count:
        line = lines[i].lstrip()
        found: tuple[list[tuple[str, object]], int] | None = None
        if line.startswith(CALLING_TOOLS):
            found = _calling_tools(lines, i)
        elif line.startswith(ACTION) and not line.startswith(ACTION_INPUT):
            found = _action(lines, i)
        elif line.rstrip() == ERROR:
            failed = _failed_step(lines, i)
            if failed is not None:
                call, error_text, i = failed
                laps.append(_Lap(_joined(before), [call], error_text, True))
                before = []
                continue
        if found is not None:
            calls, i = found
            answer, error, i = _observation(lines, i)
            laps.append(_Lap(_joined(before), calls, answer, error))
            before = []
            continue
        before.append(lines[i])
        i += 1
    after = _joined(before)
    if laps and _bare_label(after):
        after = ""  # "Thought:" with nothing after it: the prompt's cue, not a turn
    return laps, after


def _joined(lines: list[str]) -> str:
    return "\n".join(lines).strip()


def _bare_label(text: str) -> bool:
    return any(text == label or text == label[:-1] for label in _STEP_LABELS)


def _action(lines: list[str], i: int) -> tuple[list[tuple[str, object]], int] | None:
    """``Action: NAME`` at ``lines[i]``, its ``Action Input:`` on the next non-blank
    line: the call and the index after its input, or ``None`` when this is prose."""
    name = lines[i].lstrip()[len(ACTION) :].strip().strip("`")
    if not name or len(name) > _MAX_NAME or len(name.split()) != 1:
        return None
    j = i + 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    if j == len(lines) or not lines[j].lstrip().startswith(ACTION_INPUT):
        return None
    first = lines[j].lstrip()[len(ACTION_INPUT) :]
    j += 1
    body = [first]
    while j < len(lines) and not lines[j].lstrip().startswith(_STEP_LABELS):
        body.append(lines[j])
        j += 1
    arguments = _joined(body)
    if arguments.startswith("```") and arguments.endswith("```"):  # a fenced input
        arguments = arguments.strip("`").removeprefix("json").strip()
    return [(name, arguments)], j


def _calling_tools(lines: list[str], i: int) -> tuple[list[tuple[str, object]], int] | None:
    """smolagents' ``Calling tools:`` list at ``lines[i]``: its calls and the index of
    the line after it, or ``None`` when no list of calls parses there. The list is one
    line (``str()`` of a list escapes the newlines of its strings), on the label's line
    or the next."""
    rest = lines[i].lstrip()[len(CALLING_TOOLS) :].strip()
    end = i
    if not rest and i + 1 < len(lines):
        end = i + 1
        rest = lines[end].strip()
    calls = _calls_of(_literal(rest))
    return None if calls is None else (calls, end + 1)


def _literal(text: str) -> object:
    """A Python list literal (smolagents writes its calls with ``str()``), or ``None``."""
    return _literal_value(text) if text.startswith("[") else None


def _literal_value(text: str) -> object:
    """A Python literal, or ``None`` (too deep, or not one of the shapes read)."""
    try:
        return read_literal(text, MAX_DEPTH)
    except NotALiteral:
        return None


def _calls_of(value: object) -> list[tuple[str, object]] | None:
    """The ``(name, arguments)`` of a list of smolagents tool-call dicts."""
    if type(value) is not list or not value:
        return None
    calls: list[tuple[str, object]] = []
    for item in value:
        function = item.get("function") if type(item) is dict else None
        if type(function) is not dict:
            return None
        name = function.get("name")
        if type(name) is not str:
            return None
        arguments = function.get("arguments")
        calls.append((name, {} if arguments is None else arguments))
    return calls


def _observation(lines: list[str], i: int) -> tuple[str | None, bool, int]:
    """An ``Observation:`` (or ``Error:``) written right after a call, up to the next
    step: its text, whether it is an error, and the index after it."""
    j = i
    while j < len(lines) and not lines[j].strip():
        j += 1
    if j == len(lines):
        return None, False, i
    line = lines[j].lstrip()
    if line.startswith(OBSERVATION):
        error = False
        first = line[len(OBSERVATION) :]
    elif line.startswith(ERROR):
        error = True
        first = line[len(ERROR) :]
    else:
        return None, False, i
    j += 1
    body = [first]
    while j < len(lines) and not _step_begins(lines[j]):
        body.append(lines[j])
        j += 1
    return _joined(body), error, j


def _step_begins(line: str) -> bool:
    """Whether ``line`` begins the model's next step (or smolagents' next failed one)."""
    line = line.lstrip()
    return line.startswith(_STEP_LABELS) or line.rstrip() == ERROR


def _failed_step(lines: list[str], i: int) -> tuple[tuple[str, object], str, int] | None:
    """A step smolagents failed (``Error:`` at ``lines[i]``, its text, then ``Now let's
    retry: ...``): it records no call for it, so the call is read from its error, which
    names the tool (``Unknown tool NAME, ...``, ``Error executing tool 'NAME' with
    arguments {...}: ...``; otherwise ``""``). Returns the call, the error and the index
    after the step, or ``None`` when this is not such a step."""
    j = i + 1
    body: list[str] = []
    while j < len(lines):
        line = lines[j].lstrip()
        if line.startswith(RETRY):
            break
        if line.rstrip() == ERROR or line.startswith(_STEP_LABELS):
            return None
        body.append(lines[j])
        j += 1
    if j == len(lines):
        return None
    answer = _joined(body)
    return _named_in(answer), answer, j + 1


def _named_in(error: str) -> tuple[str, object]:
    """The tool (and arguments, when written) a smolagents error names."""
    if error.startswith(_UNKNOWN_TOOL):
        name = error[len(_UNKNOWN_TOOL) :].split(",", 1)[0].strip()
        return (name if len(name) <= _MAX_NAME else "", {})
    if error.startswith(_EXECUTING):
        name, quote, rest = error[len(_EXECUTING) :].partition("' with arguments ")
        if quote and len(name) <= _MAX_NAME:
            return (name, _arguments_in(rest.split("\n", 1)[0]))
    return ("", {})


def _arguments_in(line: str) -> object:
    """The ``str()`` of a dict that begins ``line`` and ends at one of its first few
    ``}: `` (the error's own text follows), or ``{}``."""
    end = line.find("}: ")
    for _ in range(_ARGUMENT_TRIES):
        if not line.startswith("{") or end < 0:
            break
        value = _literal_value(line[: end + 1])
        if type(value) is dict:
            return value
        end = line.find("}: ", end + 1)
    return {}
