"""Tokens a request costs: from the ``usage`` a log recorded, else an estimate; and money
(:class:`Price`, the value of ``loopfuse scan``'s ``price_per_mtok``, declared with the
scan's other options in :mod:`loopfuse._sections`).

A refused request, or one answered from the cache, is not sent: what it would have cost
is its input (the whole context it carries) and the answer it got. Where the recorded
run has the provider's ``usage`` for that answer, those numbers are used; every
provider's spelling is read:

==================  ==============================================================
provider            fields
==================  ==============================================================
OpenAI Chat         ``prompt_tokens``, ``completion_tokens``
OpenAI Responses,   ``input_tokens``, ``output_tokens`` (Anthropic's
Anthropic,          ``cache_creation_input_tokens`` and ``cache_read_input_tokens``
LangChain           are input too)
Gemini              ``promptTokenCount``, ``candidatesTokenCount``,
                    ``thoughtsTokenCount`` (``usageMetadata``)
Ollama              ``prompt_eval_count``, ``eval_count``
==================  ==============================================================

Otherwise the tokens are estimated from characters: one token per
:data:`CHARS_PER_TOKEN` characters of the request as compact JSON (and of the answer's
messages). That ratio was measured with the ``cl100k_base`` and ``o200k_base``
tokenizers on the messages of the 708 real agent runs loopfuse is calibrated on (3.68
and 3.66 characters per token overall; median run 3.77, 2.7 to 4.8 per run): expect an
estimate within about 25% of a real count for English text and code, further off for
other scripts.

>>> usage_tokens({"prompt_tokens": 1200, "completion_tokens": 80})
(1200, 80)
>>> usage_tokens({"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2}})
(10, 2)
>>> usage_tokens({"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1})
(105, 1)
>>> usage_tokens("junk") is None
True
>>> estimate_tokens(3700)
1000
>>> Price.parse("3,15").cost(1_000_000, 100_000)
4.5
"""

from __future__ import annotations

from typing import Final

from loopfuse._sections import Price

__all__ = ["CHARS_PER_TOKEN", "Price", "estimate_tokens", "usage_tokens"]

CHARS_PER_TOKEN: Final = 3.7
"""Characters of compact JSON per token, for runs that record no ``usage``."""

_INPUT: Final = (
    "prompt_tokens",
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "promptTokenCount",
    "prompt_eval_count",
)
_OUTPUT: Final = (
    "completion_tokens",
    "output_tokens",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "eval_count",
)
_NESTED: Final = ("usage", "usageMetadata", "usage_metadata")


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def usage_tokens(usage: object) -> tuple[int, int] | None:
    """``(input, output)`` tokens of a provider's usage object (or of a response that
    holds one), or ``None`` when it names none."""
    if not isinstance(usage, dict):
        return None
    for key in _NESTED:  # a whole response, or a message carrying its usage
        inner = usage.get(key)
        if isinstance(inner, dict):
            return usage_tokens(inner)
    if not any(key in usage for key in (*_INPUT, *_OUTPUT)):
        return None
    tokens_in = sum(_count(usage.get(key)) for key in _INPUT)
    tokens_out = sum(_count(usage.get(key)) for key in _OUTPUT)
    return tokens_in, tokens_out


def estimate_tokens(chars: int) -> int:
    """Tokens of ``chars`` characters of compact JSON (see :data:`CHARS_PER_TOKEN`)."""
    return (chars * 10 + 36) // 37 if chars > 0 else 0  # ceil(chars / 3.7), exactly
