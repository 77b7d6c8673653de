"""The Python-literal reader (``loopfuse.intent._pyliteral``) against ``ast.literal_eval``.

The reader replaces ``ast.literal_eval`` on the request path (issue 30, findings 1 and 2):
on every text it accepts it must give what ``literal_eval`` gives, and every text outside
its shapes must raise ``NotALiteral`` (the caller keeps such text as text). Here, and only
here, ``literal_eval`` runs on small, safe texts as the oracle.
"""

from __future__ import annotations

import ast
import contextlib
import math
import time
import warnings

import pytest
from hypothesis import strategies as st

from conftest import fast_and_full, run_property
from loopfuse.intent._pyliteral import MAX_NUMBER, NotALiteral, read_literal

DEPTH = 20


def oracle(text: str) -> tuple[bool, str]:
    """``(accepted, repr of the value)`` by ``ast.literal_eval`` (warnings silenced:
    an unknown escape only warns there)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return True, _shown(ast.literal_eval(text))
        except Exception:  # whatever the oracle refuses, it refuses
            return False, ""


def mine(text: str) -> tuple[bool, str]:
    try:
        return True, _shown(read_literal(text, DEPTH))
    except NotALiteral:
        return False, ""


def _shown(value: object) -> str:
    """``repr`` tells 1 from 1.0 from True and -0.0 from 0.0; equal sets built in the
    same order show the same."""
    return repr(value)


def agrees(text: str) -> bool:
    """The reader agrees with the oracle on ``text``: the same value when it accepts it,
    and a refusal wherever the oracle refuses. Returns whether the reader accepted."""
    accepted, value = mine(text)
    if accepted:
        assert oracle(text) == (True, value), text
    else:
        pass  # a refusal is always allowed: the text stays text
    return accepted


# --- values written by repr: every one is read back, exactly ---------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
)
hashables = st.recursive(scalars, lambda inner: st.tuples(inner, inner) | st.tuples(), max_leaves=6)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, min_size=1, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("examples", fast_and_full(300, 3000))
def test_every_repr_reads_back_as_literal_eval_reads_it(examples: int) -> None:
    def check(value: object) -> None:
        text = repr(value)
        assert mine(text) == oracle(text), text
        assert mine(text)[0], text
        assert read_literal(text, DEPTH) == value, text

    run_property(examples, check, values)


# --- token soup: near-literals and non-literals of every kind --------------------------

TOKENS = [
    "[", "]", "(", ")", "{", "}", ",", ":", "-", "+", " ", "\n", "\t", "1", "0", "00",
    "07", "0_0", "1_0", "1__0", "0x1F", "0o17", "0b1", "0x", "1.5", "1.", ".5", "1e3",
    "1E-2", "1.e5", "1j", "'a'", '"b"', "'it\\'s'", "'\\x41'", "'\\x4'", "'\\n\\t'",
    "'\\0'", "'\\377'", "'\\400'", "'\\777'", "'\\u00e9'", "'\\U0001F600'", "'\\U00110000'",
    "'\\N{BULLET}'", "'\\d'", "'\\\\'", "r'\\d'", "R'\\''", "u'x'", "U\"y\"", "b'x'",
    "f'x'", "rb'x'", "ur'x'", "'''a\nb'''", '"""c"""', "''", "'''''", "'", '"', "'é'",
    "'\\\n'", "True", "False", "None", "Truex", "x", ".", "..", "#", "\\", "lambda", "not",
    "if", "else", "*", "**", "set()", "é",
]  # fmt: skip


@pytest.mark.parametrize("examples", fast_and_full(1500, 15000))
def test_token_soup_agrees_with_literal_eval(examples: int) -> None:
    accepted: list[str] = []

    def check(tokens: list[str]) -> None:
        text = "".join(tokens)
        if agrees(text):
            accepted.append(text)

    run_property(examples, check, st.lists(st.sampled_from(TOKENS)))
    assert len(accepted) > 20  # the soup reaches the accepting side too


def structured() -> st.SearchStrategy[str]:
    """Texts shaped like literals (balanced brackets, separators in place) built of the
    soup's atoms: most are literals, the rest fail late."""
    atoms = st.sampled_from([t for t in TOKENS if t not in "[](){},:" and t.strip()])
    blank = st.sampled_from(["", " ", "\n", "\t ", ""])

    def joined(parts: list[str], opening: str, closing: str, sep: str) -> str:
        return opening + sep.join(parts) + closing

    return st.recursive(
        atoms,
        lambda inner: (
            st.builds(
                joined,
                st.lists(st.builds(lambda b, x, a: b + x + a, blank, inner, blank), max_size=4),
                st.sampled_from(["[", "(", "{"]),
                st.sampled_from(["]", ")", "}", ",]", ",)", ",}"]),
                st.sampled_from([",", ", ", ":", " "]),
            )
            | st.builds(lambda k, v: "{" + k + ": " + v + "}", inner, inner)
            | st.builds(lambda s, x: s + x, st.sampled_from(["-", "+", "- "]), inner)
        ),
        max_leaves=10,
    )


@pytest.mark.parametrize("examples", fast_and_full(1500, 15000))
def test_literal_shaped_texts_agree_with_literal_eval(examples: int) -> None:
    accepted: list[str] = []

    def check(text: str) -> None:
        if agrees(text):
            accepted.append(text)

    run_property(examples, check, structured())
    assert len(accepted) > 50


# --- what is refused, on purpose -------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "b'x'",  # bytes
        "f'x'",  # f-strings
        "'\\N{BULLET}'",  # named escapes
        "'\\d'",  # an unknown escape (Python keeps the backslash, and warns)
        "'\\400'",  # octal past \377 (deprecated in 3.12)
        "1j",  # complex numbers
        "1+2j",
        "set()",
        "-(1)",  # a sign before anything but a number
        "[1] # a comment",
        "[1,\r2]",
        "['\x00']",
        "['\ud800']",  # a lone surrogate: Python cannot read it either
        "1, 2",  # a bare tuple
        "\n[1]",
        "[1]\n",
        "9" * (MAX_NUMBER + 1),
    ],
)
def test_the_reader_refuses(text: str) -> None:
    with pytest.raises(NotALiteral):
        read_literal(text, DEPTH)


def test_the_depth_cap_counts_every_container() -> None:
    for opening, closing in (("[", "]"), ("(", ",)"), ("{'k': ", "}"), ("(", ")")):
        at = opening * DEPTH + "1" + closing * DEPTH
        past = opening * (DEPTH + 1) + "1" + closing * (DEPTH + 1)
        assert mine(at) == oracle(at)
        with pytest.raises(NotALiteral, match="deeper"):
            read_literal(past, DEPTH)


def test_a_non_str_is_refused() -> None:
    with pytest.raises(NotALiteral):
        read_literal(b"[1]", DEPTH)  # type: ignore[arg-type]


# --- cost: linear in the text, whatever its shape --------------------------------------

SHAPES = {
    "dense ints": lambda n: "[" + "1," * n + "]",
    "dense strings": lambda n: "[" + "'a'," * n + "]",
    "escapes": lambda n: "['" + "\\n" * n + "']",
    "backslashes then no quote": lambda n: "['" + "\\\\" * n,
    "unterminated triple": lambda n: "['''" + "''a" * n,
    "long digits": lambda n: "[" + ("9" * 4000 + ",") * (n // 4000 + 1) + "]",
    "deep then junk": lambda n: "[" * 200 + "x" * n,
    "quotes in a triple": lambda n: "['''" + "'a" * n + "''']",
    "adjacent strings": lambda n: "['a'" + " 'b'" * n + "]",
    "signs": lambda n: "[" + "-1," * n + "]",
}


def _best(text: str) -> float:
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        with contextlib.suppress(NotALiteral):
            read_literal(text, 254)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_costly_shape_is_read_or_refused(shape: str) -> None:
    """The untimed twin of the scaling test: each shape, read or refused, never raising
    anything but NotALiteral."""
    with contextlib.suppress(NotALiteral):
        read_literal(SHAPES[shape](2_000), 254)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_reader_scales_linearly(shape: str) -> None:
    """Eight times the text costs at most ~16 times as long (linear, with room for a
    loaded machine): a quadratic reader costs 64 times."""
    small, large = SHAPES[shape](20_000), SHAPES[shape](160_000)
    ratio = _best(large) / max(_best(small), 1e-4)
    assert ratio < 24, (shape, ratio)
