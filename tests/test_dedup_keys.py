"""RequestKey and FNV-1a 64: test vectors, the two backends, digests, bad input."""

from __future__ import annotations

import array
import os
import pickle
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopfuse.dedup import DIGEST_SIZE, RequestKey, fnv
from loopfuse.errors import InvalidInputError, LoopfuseError

# FNV-1a 64 reference vectors (the issue's, plus the published FNV test suite's).
VECTORS = [
    (b"", 0xCBF29CE484222325),
    (b"a", 0xAF63DC4C8601EC8C),
    (b"foobar", 0x85944171F73967E8),
    (b"chongo was here!\n", 0x46810940EFF5F915),
]


def _reference(data: bytes, seed: int = fnv.FNV64_OFFSET) -> int:
    """FNV-1a 64 written out independently of the module under test."""
    value = seed
    for octet in data:
        value ^= octet
        value = (value * 0x100000001B3) % 2**64
    return value


# -- FNV-1a 64 --------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_fnv_vectors_on_both_backends(data: bytes, expected: int) -> None:
    assert fnv.fnv1a64_py(data) == expected
    assert fnv.fnv1a64(data) == expected
    assert _reference(data) == expected


BACKENDS = ["python", "c"] if fnv.c_extension_available() else ["python"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_from_str_vectors_on_both_backends(data: bytes, expected: int, backend: str) -> None:
    previous = fnv.backend()
    fnv.set_backend(backend)  # type: ignore[arg-type]
    try:
        assert fnv.backend() == backend
        assert RequestKey.from_str(data.decode()).value == expected
        assert RequestKey.from_bytes(data).value == expected
    finally:
        fnv.set_backend(previous)


def test_extension_is_built() -> None:
    """CI and developer installs build the C extension; only an opt-out may skip it."""
    if os.environ.get("LOOPFUSE_NO_EXTENSIONS", "") not in ("", "0"):
        pytest.skip("LOOPFUSE_NO_EXTENSIONS is set: the pure-Python path is expected")
    assert fnv.c_extension_available()
    assert fnv.backend() == "c"


needs_c = pytest.mark.skipif(not fnv.c_extension_available(), reason="C extension not built")


@needs_c
@given(data=st.binary(max_size=4096), seed=st.integers(0, 2**64 - 1))
def test_c_and_python_agree(data: bytes, seed: int) -> None:
    fnv.set_backend("c")
    assert fnv.fnv1a64(data, seed) == fnv.fnv1a64_py(data, seed) == _reference(data, seed)


@needs_c
def test_c_and_python_agree_on_a_large_buffer() -> None:
    # Large enough that the extension releases the GIL while it hashes.
    data = bytes(range(256)) * 400 + b"tail"
    fnv.set_backend("c")
    assert fnv.fnv1a64(data) == fnv.fnv1a64_py(data) == _reference(data)
    words = array.array("I", [1, 2, 0xFFFFFFFF])  # any contiguous buffer: its raw bytes
    by_c = fnv.fnv1a64(words)  # type: ignore[arg-type]
    assert by_c == fnv.fnv1a64_py(words) == _reference(words.tobytes())  # type: ignore[arg-type]
    one = memoryview(b"ab")[::2]  # a one-item strided view is contiguous
    assert fnv.fnv1a64(one) == fnv.fnv1a64_py(one) == _reference(b"a")
    assert fnv.fnv1a64(bytearray(data)) == fnv.fnv1a64(memoryview(data)) == _reference(data)


@given(st.binary(max_size=512), st.binary(max_size=512))
def test_hash_continues_from_seed(a: bytes, b: bytes) -> None:
    assert fnv.fnv1a64(b, fnv.fnv1a64(a)) == fnv.fnv1a64(a + b)
    assert fnv.fnv1a64_py(b, fnv.fnv1a64_py(a)) == fnv.fnv1a64_py(a + b)


@given(st.lists(st.tuples(st.text(max_size=40), st.text(max_size=200)), max_size=8))
def test_keys_do_not_depend_on_the_backend(messages: list[tuple[str, str]]) -> None:
    previous = fnv.backend()
    try:
        fnv.set_backend("python")
        pure = RequestKey.from_messages(messages)
        pure_str = RequestKey.from_str("".join(r + c for r, c in messages))
        if fnv.c_extension_available():
            fnv.set_backend("c")
        fast = RequestKey.from_messages(messages)
        fast_str = RequestKey.from_str("".join(r + c for r, c in messages))
    finally:
        fnv.set_backend(previous)
    assert (pure.value, pure.digest) == (fast.value, fast.digest)
    assert (pure_str.value, pure_str.digest) == (fast_str.value, fast_str.digest)


def test_forcing_the_fallback_runs_the_pure_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def spy(data: bytes | bytearray | memoryview, seed: int = fnv.FNV64_OFFSET) -> int:
        calls.append(len(data))
        return _reference(bytes(data), seed)

    previous = fnv.backend()
    monkeypatch.setattr(fnv, "fnv1a64_py", spy)
    try:
        fnv.set_backend("python")
        assert fnv.backend() == "python"
        assert RequestKey.from_str("foobar").value == 0x85944171F73967E8
    finally:
        monkeypatch.undo()
        fnv.set_backend(previous)
    assert calls == [6]


def test_missing_extension_falls_back_to_pure_python() -> None:
    script = (
        "import sys; sys.modules['loopfuse.dedup._fnv'] = None\n"
        "from loopfuse.dedup import fnv, RequestKey\n"
        "assert not fnv.c_extension_available() and fnv.backend() == 'python'\n"
        "print(hex(RequestKey.from_str('foobar').value))\n"
        "try:\n    fnv.set_backend('c')\nexcept RuntimeError:\n    print('no c')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["0x85944171f73967e8", "no", "c"]


def test_set_backend_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown FNV backend"):
        fnv.set_backend("rust")  # type: ignore[arg-type]


@pytest.mark.parametrize("hasher", [fnv.fnv1a64_py, fnv.fnv1a64], ids=["python", "dispatch"])
def test_fnv_bad_arguments(hasher: object) -> None:
    assert callable(hasher)
    with pytest.raises(TypeError):
        hasher("text")
    with pytest.raises(TypeError):
        hasher(b"x", "seed")
    with pytest.raises(OverflowError):
        hasher(b"x", -1)
    with pytest.raises(OverflowError):
        hasher(b"x", 2**64)
    with pytest.raises(BufferError):
        hasher(memoryview(b"abcdef")[::2])


@needs_c
def test_c_bad_arguments_match_python() -> None:
    fnv.set_backend("c")
    for args in [("text",), (b"x", "seed"), (b"x", -1), (b"x", 2**64), (memoryview(b"abcd")[::2],)]:
        with pytest.raises((TypeError, OverflowError, BufferError)) as c_error:
            fnv.fnv1a64(*args)  # type: ignore[arg-type]
        with pytest.raises((TypeError, OverflowError, BufferError)) as py_error:
            fnv.fnv1a64_py(*args)  # type: ignore[arg-type]
        assert c_error.type is py_error.type, args


# -- from_str / from_bytes / from_messages ------------------------------------------------


def test_from_messages_is_from_str_of_the_joined_text() -> None:
    messages = [("system", "Be brief."), ("user", "What is Rust?"), ("assistant", "A language.")]
    joined = "".join(f"{role}\x00{content}\x01" for role, content in messages)
    assert RequestKey.from_messages(messages).value == RequestKey.from_str(joined).value
    assert RequestKey.from_messages(messages) == RequestKey.from_str(joined)
    assert RequestKey.from_messages([]).value == fnv.FNV64_OFFSET


def test_message_order_and_split_change_the_key() -> None:
    a = RequestKey.from_messages([("user", "one"), ("user", "two")])
    b = RequestKey.from_messages([("user", "two"), ("user", "one")])
    assert a != b
    assert RequestKey.from_messages([("ab", "c")]) != RequestKey.from_messages([("a", "bc")])


def test_separator_collision_keeps_distinct_digests() -> None:
    # The FNV input is the same bytes, so the values collide; the digests must not.
    a = RequestKey.from_messages([("u", "x\x01y\x00z")])
    b = RequestKey.from_messages([("u", "x"), ("y", "z")])
    assert a.value == b.value
    assert a == b  # equality is on the value
    assert a.digest != b.digest


message_lists = st.lists(
    st.tuples(st.text("ab\x00\x01", max_size=4), st.text("ab\x00\x01", max_size=4)), max_size=4
)


@given(message_lists, message_lists)
def test_messages_digest_is_unambiguous(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> None:
    key_a, key_b = RequestKey.from_messages(a), RequestKey.from_messages(b)
    assert (key_a.digest == key_b.digest) == (a == b)


def test_kinds_are_domain_separated() -> None:
    text = "user\x00hi\x01"
    by_str = RequestKey.from_str(text)
    by_messages = RequestKey.from_messages([("user", "hi")])
    assert by_str.value == by_messages.value
    assert by_str.digest != by_messages.digest
    assert RequestKey.from_bytes(text.encode()).digest == by_str.digest


def test_from_messages_accepts_lists_and_generators() -> None:
    expected = RequestKey.from_messages([("user", "hi")])
    generated = RequestKey.from_messages(pair for pair in [("user", "hi")])
    assert generated.digest == expected.digest
    as_lists = [["user", "hi"]]
    assert RequestKey.from_messages(as_lists).digest == expected.digest  # type: ignore[arg-type]


def test_non_ascii_and_lone_surrogates_get_stable_keys() -> None:
    assert RequestKey.from_str("héllo ✓").value == _reference("héllo ✓".encode())
    surrogate = RequestKey.from_str("a\ud800b")
    assert surrogate.value == _reference(b"a\xed\xa0\x80b")
    assert surrogate.digest == RequestKey.from_str("a\ud800b").digest
    assert RequestKey.from_messages([("user", "\udfff")]).digest is not None


@pytest.mark.parametrize(
    "messages",
    [
        "user: hi",
        b"bytes",
        {"role": "user", "content": "hi"},
        [("user",)],
        [("user", "hi", "extra")],
        [("user", 42)],
        [(None, "hi")],
        ["ab"],
        [{"role": "user", "content": "hi"}],
        42,
        None,
    ],
)
def test_from_messages_rejects_junk(messages: object) -> None:
    with pytest.raises(InvalidInputError):
        RequestKey.from_messages(messages)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [b"bytes", 42, None, ["a"], 3.5])
def test_from_str_rejects_non_str(text: object) -> None:
    with pytest.raises(InvalidInputError):
        RequestKey.from_str(text)  # type: ignore[arg-type]


@pytest.mark.parametrize("data", ["text", 42, None, [1, 2]])
def test_from_bytes_rejects_non_bytes(data: object) -> None:
    with pytest.raises(InvalidInputError):
        RequestKey.from_bytes(data)  # type: ignore[arg-type]


def test_large_input() -> None:
    text = "x" * 1_000_000
    assert RequestKey.from_str(text).value == fnv.fnv1a64_py(text.encode())


# -- the RequestKey value type ------------------------------------------------------------


def test_bare_key_equals_content_key_and_hashes_alike() -> None:
    key = RequestKey.from_str("What is Rust?")
    bare = RequestKey(key.value)
    assert bare == key
    assert hash(bare) == hash(key)
    assert bare.digest is None
    assert key.digest is not None
    assert len(key.digest) == DIGEST_SIZE
    assert {key: 1}[bare] == 1
    assert key != key.value  # a key is not an int
    assert RequestKey(1) != RequestKey(2)


def test_key_rebuilt_from_its_parts() -> None:
    key = RequestKey.from_str("q")
    rebuilt = RequestKey(key.value, key.digest)
    assert (rebuilt.value, rebuilt.digest) == (key.value, key.digest)


@pytest.mark.parametrize(
    ("value", "digest"),
    [
        (-1, None),
        (2**64, None),
        (1.0, None),
        ("1", None),
        (True, None),
        (None, None),
        (1, b"short"),
        (1, "x" * DIGEST_SIZE),
        (1, bytearray(DIGEST_SIZE)),
    ],
)
def test_bad_constructor_arguments(value: object, digest: object) -> None:
    with pytest.raises(InvalidInputError) as error:
        RequestKey(value, digest)  # type: ignore[arg-type]
    assert isinstance(error.value, LoopfuseError)
    assert isinstance(error.value, TypeError)


def test_key_is_immutable_and_picklable() -> None:
    key = RequestKey.from_str("q")
    with pytest.raises(AttributeError):
        key._value = 1
    with pytest.raises(AttributeError):
        key.value = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del key._digest
    copy = pickle.loads(pickle.dumps(key))
    assert (copy.value, copy.digest) == (key.value, key.digest)
    assert RequestKey(0).value == 0
    assert RequestKey(2**64 - 1).value == 2**64 - 1


def test_repr_names_the_value() -> None:
    assert repr(RequestKey(0xAF63DC4C8601EC8C)) == "RequestKey(0xaf63dc4c8601ec8c)"
    assert repr(RequestKey.from_str("a")).startswith("RequestKey(0xaf63dc4c8601ec8c, digest=")
