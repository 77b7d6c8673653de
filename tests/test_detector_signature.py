"""ToolCall, batch signatures and results digests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopfuse.detector import ToolCall, batch_signature, is_digest, results_digest
from loopfuse.detector.digests import same_digest
from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=10,
)


def test_arguments_as_a_json_string_are_parsed() -> None:
    call = ToolCall("ls", '{"path": "."}')
    assert call.arguments == {"path": "."}
    assert call.signature == ToolCall("ls", {"path": "."}).signature
    assert ToolCall("ls", b'{"path": "."}').arguments == {"path": "."}


def test_arguments_that_are_not_json_are_kept_as_text() -> None:
    call = ToolCall("bash", "ls -la {")
    assert call.arguments == "ls -la {"
    assert call.signature != ToolCall("bash", "ls -la").signature


def test_missing_arguments_are_an_empty_object() -> None:
    assert ToolCall("ls").arguments == {}
    assert ToolCall("ls").signature == ToolCall("ls", {}).signature


@pytest.mark.parametrize("name", [None, 3, b"ls", ["ls"]])
def test_a_name_that_is_not_a_str_is_refused(name: object) -> None:
    with pytest.raises(InvalidInputError):
        ToolCall(name, {})  # type: ignore[arg-type]


def test_an_id_that_is_not_a_str_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        ToolCall("ls", {}, id=7)  # type: ignore[arg-type]


@pytest.mark.parametrize("arguments", [{"x": object()}, {"s": {1, 2}}, [1j]])
def test_arguments_json_cannot_express_are_refused(arguments: object) -> None:
    with pytest.raises(InvalidInputError):
        ToolCall("ls", arguments)


def test_deeply_nested_arguments_are_refused_cleanly() -> None:
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidInputError):
        ToolCall("ls", deep)
    deep_text = "[" * 100_000 + "]" * 100_000
    assert ToolCall("ls", deep_text).arguments == deep_text  # too deep to parse: kept as text


def test_tool_call_is_immutable_and_hashable() -> None:
    call = ToolCall("ls", {"path": "."}, id="c1")
    with pytest.raises(AttributeError):
        call.name = "rm"  # type: ignore[misc]
    assert call == ToolCall("ls", {"path": "."}, id="c1")
    assert call != ToolCall("ls", {"path": "."}, id="c2")
    assert len({call, ToolCall("ls", {"path": "."}, id="c1")}) == 1
    assert "ToolCall('ls'" in repr(call)


def test_batch_signature_is_independent_of_call_and_key_order() -> None:
    a = ToolCall("read", {"p": 1, "q": {"x": 1, "y": 2}})
    b = ToolCall("grep", {"pattern": "x"})
    a2 = ToolCall("read", {"q": {"y": 2, "x": 1}, "p": 1})
    assert batch_signature([a, b]) == batch_signature([b, a2])


def test_batch_signature_tells_batches_apart() -> None:
    a = ToolCall("read", {"p": 1})
    assert batch_signature([a]) != batch_signature([a, a])
    assert batch_signature([a]) != batch_signature([ToolCall("read", {"p": 2})])
    assert batch_signature([a]) != batch_signature([ToolCall("write", {"p": 1})])
    assert batch_signature([ToolCall("f", {"x": True})]) != batch_signature(
        [ToolCall("f", {"x": 1})]
    )


def test_batch_signature_refuses_what_is_not_a_tool_call() -> None:
    with pytest.raises(InvalidInputError):
        batch_signature([{"name": "ls"}])  # type: ignore[list-item]


@given(json_values, json_values)
def test_signatures_equal_exactly_when_canonical_arguments_are(a: object, b: object) -> None:
    same = ToolCall("f", a).signature == ToolCall("f", b).signature
    canon_a = canonical_json({} if a is None else a)  # no arguments are an empty object
    canon_b = canonical_json({} if b is None else b)
    assert same == (canon_a == canon_b)


# --- results_digest ---------------------------------------------------------------------

LS = ToolCall("ls", {"path": "."}, id="a")
CAT = ToolCall("cat", {"path": "x"}, id="b")


def test_digest_is_independent_of_call_order() -> None:
    assert results_digest([LS, CAT], ["dir", "text"]) == results_digest([CAT, LS], ["text", "dir"])
    assert results_digest([LS, CAT], ["dir", "text"]) != results_digest([LS, CAT], ["text", "dir"])


def test_digest_by_call_id() -> None:
    by_id = results_digest([LS, CAT], {"a": "dir", "b": "text"})
    assert by_id == results_digest([LS, CAT], ["dir", "text"])
    assert results_digest([LS, CAT], {"a": "dir"}) is None  # an answer is missing
    no_id = ToolCall("ls", {"path": "."})
    assert results_digest([no_id], {"a": "dir"}) is None


def test_digest_is_none_when_counts_differ() -> None:
    assert results_digest([LS, CAT], ["dir"]) is None
    assert results_digest([LS], ["dir", "extra"]) is None
    assert results_digest([], []) is None


def test_text_and_a_json_string_with_the_same_text_are_equal() -> None:
    assert results_digest([LS], ["hello"]) == results_digest([LS], [b"hello"])
    assert results_digest([LS], [{"a": "hello"}]) != results_digest([LS], ["hello"])


def test_null_and_the_text_null_differ() -> None:
    assert results_digest([LS], [None]) != results_digest([LS], ["null"])
    assert results_digest([LS], [1]) != results_digest([LS], ["1"])
    assert results_digest([LS], [[]]) != results_digest([LS], ["[]"])


def test_json_answers_compare_by_canonical_value() -> None:
    one = results_digest([LS], [{"a": 1, "b": [1, {"x": None, "y": "z"}]}])
    assert one == results_digest([LS], [{"b": [1, {"y": "z", "x": None}], "a": 1}])
    assert one != results_digest([LS], [{"a": 1, "b": [{"x": None, "y": "z"}, 1]}])


def test_digest_refuses_answers_json_cannot_express() -> None:
    with pytest.raises(InvalidInputError):
        results_digest([LS], [object()])
    with pytest.raises(InvalidInputError):
        results_digest([LS], "not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        results_digest(["ls"], ["x"])  # type: ignore[list-item]


def test_digest_has_a_raw_and_a_normalised_half() -> None:
    one = results_digest([LS], ["done in 0.51s"])
    two = results_digest([LS], ["done in 0.73s"])
    assert one is not None
    assert two is not None
    raw1, norm1, answers1, facts1 = one.split("/")
    raw2, norm2, answers2, facts2 = two.split("/")
    assert raw1 != raw2
    assert norm1 == norm2
    assert answers1 == answers2
    assert facts1 == facts2 == "-"
    assert same_digest(one, two)
    assert not same_digest(one, two, normalize=False)


@pytest.mark.parametrize(
    ("answers", "facts"),
    [
        (["Traceback (most recent call last):\n  ...\nKeyError: 'x'"], "e"),
        (["<returncode>0</returncode>\n<output>\n</output>"], "z"),
        (["<returncode>1</returncode>\n<output>\n</output>"], "ez"),
        (["3 passed"], "-"),
        (["ok", "cat: x: No such file or directory"], "e"),
        (["", "done"], "z"),
    ],
)
def test_digest_carries_error_and_empty_facts(answers: list[str], facts: str) -> None:
    calls = [ToolCall("t", {"i": i}) for i in range(len(answers))]
    digest = results_digest(calls, answers)
    assert digest is not None
    assert digest.split("/")[3] == facts
    assert is_digest(digest)


def test_the_caller_can_say_whether_a_batch_failed() -> None:
    assert results_digest([LS], ["all good"], error=True).endswith("/e")  # type: ignore[union-attr]
    assert results_digest([LS], ["Error: x"], error=False).endswith("/-")  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError):
        results_digest([LS], ["x"], error="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "junk", ["error", "", "abc/x", "x" * 32 + "/" + "y" * 32 + "/" + "z" * 16 + "/e", None, 3]
)
def test_only_digests_are_digests(junk: object) -> None:
    assert not is_digest(junk)


@given(st.lists(json_values | st.text(), min_size=1, max_size=4))
def test_digest_never_raises_on_json_answers(answers: list[object]) -> None:
    calls = [ToolCall("t", {"i": i}) for i in range(len(answers))]
    assert results_digest(calls, answers) == results_digest(calls[::-1], answers[::-1])
