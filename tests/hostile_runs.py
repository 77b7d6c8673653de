"""Recorded runs with hostile text in every field a run controls (for the report tests:
test_cli_escaping.py, test_cli_html.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MARKUP = "<script>document.title='hacked'</script><img src=x onerror=\"document.title='hacked'\">"
"""HTML that changes the page's title if it ever runs."""
OTHERS = (
    "|a||b|"
    "`code` ```fence "
    "\nforged-line\r\n# heading\u2028\u2029\x85"
    "\x00nul\x7f"
    "\x1b[2J\x1b]0;pwned\x07\x1b[31m"
    "\x9b31m\x9d0;title\x9c"
    "\u202a\u202b\u202c\u202d\u202egnp.exe\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    "zero\u200b\u200c\u200d\u2060\ufeff\u00adwidth"
    "\U000e0041\U000e007f"  # tag characters: invisible text
    "&amp;\"'\\"
)
PAYLOAD = MARKUP + OTHERS
SURROGATE = "\ud800"  # a lone surrogate: valid in JSON text, not in UTF-8


def hostile(field: str) -> str:
    return f"M{field}M{PAYLOAD}{SURROGATE}M{field}M"


def file_name(field: str) -> bytes:
    """The payload as a file name: no NUL or slash, shorter markup (a name holds at
    most 255 bytes), an undecodable byte instead of the lone surrogate (Python names it
    ``\\udcff``)."""
    text = f"M{field}M<img src=x onerror=alert(1)>{OTHERS}".replace("\x00", "").replace("/", "")
    return text.encode("utf-8") + b"\xff" + f"M{field}M.json".encode()


def call(i: int, name: str, command: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}


def trajectory() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for i in range(8):
        tool_call = call(i, hostile("tool"), hostile("command"))
        messages.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": hostile("answer")})
    return {
        "outcome": hostile("outcome"),
        "exit_reason": hostile("exitreason"),
        "agent": hostile("agent"),
        "model": hostile("model"),
        "task": hostile("task"),
        "messages": messages,
    }


def log_lines() -> list[str]:
    """Two sessions, each sending the same request again and again (the breaker acts;
    two sessions, so each finding names its session), and a line with a hostile key."""
    lines = []
    for n in range(8):
        for session in ("sessiona", "sessionb"):
            body = {"model": "m", "messages": [{"role": "user", "content": hostile("user")}]}
            lines.append(json.dumps({"session": hostile(session), "time": n, "body": body}))
    lines.append(json.dumps({"body": {"input": "x"}, hostile("badkey"): 1}))
    return lines


def hostile_folder(runs: Path) -> Path:
    """``runs`` filled with: a looping trajectory (hostile file name, metadata, tool
    name, command and answer), a log (hostile sessions and user text, a line with a
    hostile key), a file that is not JSON (hostile name) and one that is not a request
    (a hostile key)."""
    runs.mkdir()
    raw = os.fsencode(runs)
    with open(os.path.join(raw, file_name("name")), "w", encoding="utf-8") as handle:
        json.dump(trajectory(), handle)
    (runs / "proxy.jsonl").write_text("\n".join(log_lines()) + "\n", encoding="utf-8")
    with open(os.path.join(raw, file_name("errname")), "w", encoding="utf-8") as handle:
        handle.write("{ not json")
    (runs / "keys.json").write_text(json.dumps({hostile("errkey"): 1}), encoding="utf-8")
    return runs
