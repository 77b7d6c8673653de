# Type stub of the optional C extension built from _speedups.c and _cchat.c (see setup.py).
from collections.abc import Callable
from typing import Any

def dumps(value: object, limit: int, /) -> bytes | None: ...
def too_deep(value: object, limit: int, /) -> bool | None: ...
def chat_intent(
    body: dict[str, Any],
    parse_arguments: Callable[[str], tuple[object, bool]],
    not_json: object,
    fast_loads: Callable[[str], object] | None = ...,
    fast_max_length: int = ...,
    /,
) -> tuple[dict[str, Any], bool, bool, bool] | None: ...
