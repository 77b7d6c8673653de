"""loopfuse: stop LLM agents from burning money in loops.

Call a guard before every LLM request:

- :class:`LoopBreaker` refuses the same request intent sent again and again.
- :mod:`loopfuse.intent` turns any OpenAI, Anthropic, Gemini or Ollama request body into
  one canonical intent and fingerprints it.

>>> import loopfuse
>>> breaker = loopfuse.LoopBreaker(window=30, max_repeats=5)
>>> breaker.check_request("session-1", b'{"input": "hello"}').allowed
True
"""

from __future__ import annotations

from loopfuse import intent
from loopfuse.breaker import LoopBreaker, LoopBroken, LoopDecision
from loopfuse.errors import ConfigError, InvalidInputError, LoopfuseError

__version__ = "0.1.0.dev0"

__all__ = [
    "ConfigError",
    "InvalidInputError",
    "LoopBreaker",
    "LoopBroken",
    "LoopDecision",
    "LoopfuseError",
    "__version__",
    "intent",
]
