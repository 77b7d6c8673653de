"""What the Redis stores say to Redis and what the replies mean: no I/O, no redis import.

Each store operation is written once, here, as a *plan*: a generator that yields the
requests it needs (:class:`Command`, :class:`Script`, :class:`Pipeline`, :class:`Scan`)
and turns the replies into the answer. :mod:`loopfuse.stores.redis` runs the plans with
a sync or an asyncio client, inside the one failure trap (:mod:`loopfuse.stores._trap`).

Keys (``P`` is the store's ``key_prefix``, ``loopfuse:`` by default):

- ``P b:{S}:s`` — a session's samples: a sorted set, score = the sample's time, member =
  ``<16-digit sequence number>:<fingerprint>`` (unique, and in arrival order among equal
  times). ``S`` is 32 hex digits of BLAKE3 of the session id (any length, any
  characters, fixed-size keys); the braces make both keys of a session one Redis
  Cluster hash slot, as a script that touches both needs.
- ``P b:{S}:c`` — the same session's live count per fingerprint (a hash; field ``#`` is
  the sequence counter).
- ``P c:<16 hex digits of the key value>`` — a cached answer: :func:`pack_entry`.
- ``P l:<16 hex>:<64 hex of the digest, or ->`` — a single-flight lock; value = token.

Every key has a TTL: a session's two keys the window (from its last request), an answer
its TTL (at most ``max_ttl``), a lock its lock TTL.

Junk: any client may write under these keys (another type, junk bytes, another
encoding, no TTL). That is bad data in one session's window or one answer's slot, not
Redis failing, so no command of ours lets it become an error of the store (which would
count towards the circuit and shut every session out): the breaker script starts a
window that it cannot read afresh; a read of an answer of another type or encoding is a
miss (the next ``set`` replaces it); a lock of another type or without a TTL (every
lock of ours has one) is taken over; a release touches only its own token. Each such
find is counted as junk (:meth:`~loopfuse.stores._trap.FailureTrap.junk`).
"""

from __future__ import annotations

import math
import secrets
import struct
import threading
from collections.abc import Callable, Generator, Mapping
from typing import Any, Final, Generic, NamedTuple, TypeVar, cast

from blake3 import blake3

from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.fields import Seconds
from loopfuse.stores import MISS, StoredEntry
from loopfuse.stores._trap import FailureTrap
from loopfuse.stores.codecs import Codec

__all__ = ["SCRIPTS", "Command", "Layout", "Operation", "Pipeline", "RedisOperations", "Scan"]

T = TypeVar("T")

# Atomic window check-and-record. Redis runs a script alone, so trim, cap, add and count
# are one step for every client. Times travel as strings, never as Lua numbers: Lua 5.1
# prints numbers with 14 significant digits, and a score must keep all of its bits so
# that ``now - seen < window`` compares exactly what the in-memory store compares.
# A window it cannot read (a key of another type, a sample or a count in another
# format, counts out of step with the samples) is junk written by another client: it is
# deleted and this request recorded in a fresh window (the reply's second item says so),
# instead of failing on every request of the session for good. Only junk is caught
# (WRONGTYPE, a count that is not an integer, our own checks): any other error (out of
# memory, a read-only replica) is raised as it came. Writes made before the junk was
# found are not rolled back by Redis, but both keys go anyway; the second attempt runs
# outside pcall, so a real error (not junk: the keys are new) still fails.
BREAKER_LUA: Final = """
local z, h = KEYS[1], KEYS[2]
local now_s = ARGV[1]
if now_s == '' then
  local t = redis.call('TIME')
  now_s = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
end
local now = tonumber(now_s)
local window = tonumber(ARGV[2])
local max_samples = tonumber(ARGV[3])
local fp = ARGV[4]
local function junk(what) error('loopfuse junk: ' .. what) end
local function is_junk(e)
  local m = type(e) == 'table' and e.err or tostring(e)
  return string.find(m, 'WRONGTYPE', 1, true) == 1 or string.find(m, 'not an integer', 1, true)
    or string.find(m, 'would overflow', 1, true) or string.find(m, 'loopfuse junk', 1, true)
end
local function drop(member)
  redis.call('ZREM', z, member)
  local f = string.match(member, '^%d+:(.+)$')
  if not f then junk('a sample not written by loopfuse') end
  if redis.call('HINCRBY', h, f, -1) <= 0 then redis.call('HDEL', h, f) end
end
local function record()
  while true do
    local head = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
    if #head == 0 or now - tonumber(head[2]) < window then break end
    drop(head[1])
  end
  local n = redis.call('ZCARD', z)
  while n >= max_samples do
    drop(redis.call('ZRANGE', z, 0, 0)[1])
    n = n - 1
  end
  local seq = redis.call('HINCRBY', h, '#', 1)
  redis.call('ZADD', z, now_s, string.format('%016d', seq) .. ':' .. fp)
  n = n + 1
  local repeats = redis.call('HINCRBY', h, fp, 1)
  if repeats < 1 or repeats > n or (seq == 1 and n > 1) then
    junk('counts out of step with the samples')
  end
  return repeats
end
local repaired = 0
local ok, repeats = pcall(record)
if not ok then
  if not is_junk(repeats) then error(repeats) end
  redis.call('DEL', z, h)
  repaired = 1
  repeats = record()
end
redis.call('PEXPIRE', z, ARGV[5])
redis.call('PEXPIRE', h, ARGV[5])
return {repeats, repaired}
"""

# Take a single-flight lock: SET NX PX. A key there that no holder of ours wrote
# (another type, or a string without a TTL: every lock of ours has one) would block the
# key for good: it is taken over (reply 2) instead of waited for. Otherwise 1 (taken)
# or 0 (held by someone).
ACQUIRE_LUA: Final = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('PTTL', KEYS[1]) >= 0 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 2
"""

# Compare-and-delete: only the holder's token releases a lock (a key of another type is
# nobody's token: left to the next acquire, which takes it over).
RELEASE_LUA: Final = """
if redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

SCRIPTS: Final = {"record": BREAKER_LUA, "acquire": ACQUIRE_LUA, "release": RELEASE_LUA}
"""The Lua scripts a client registers, by the name a :class:`Command` calls them."""

SCAN_BATCH: Final = 500
_TAKEN_OVER: Final = 2  # ACQUIRE_LUA's reply when it replaced junk
_HEADER: Final = struct.Struct("<4sBdd")
_MAGIC: Final = b"LFc1"
_DIGEST_SIZE: Final = 32


# -- requests: what a plan asks of the client -----------------------------------------------


class Command(NamedTuple):
    """``client.<name>(*args, **kwargs)``, or the registered script ``name`` when
    ``script`` (redis-py's ``EVALSHA``, then ``SCRIPT LOAD`` on ``NOSCRIPT``)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = {}
    script: bool = False


class Pipeline(NamedTuple):
    """Several commands in one round trip (not a transaction); the reply is their list."""

    commands: tuple[Command, ...]


class Scan(NamedTuple):
    """Every key matching ``pattern`` (``SCAN`` with ``count``, on every node of a cluster)."""

    pattern: str


Request = Command | Pipeline | Scan
Plan = Generator[Request, Any, T]


class Operation(NamedTuple, Generic[T]):
    """A store operation ready to run: its name (for errors), its plan, its fail-open
    answer, and the key it touches (every key of one operation shares one hash slot;
    ``None``: it goes over every key, on every node of a cluster)."""

    name: str
    plan: Plan[T]
    fallback: T
    key: str | None = None


# -- checks and formats ---------------------------------------------------------------------


def wrong_type(error: object) -> bool:
    """Whether ``error`` (raised by a command, or an error reply of a pipeline) is Redis'
    ``WRONGTYPE``: a key of ours holding another type, written by another client. Redis
    error replies begin with their code, whatever the client library."""
    return isinstance(error, Exception) and str(error).startswith("WRONGTYPE")


def check_finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number of seconds, got {value!r}")
    return float(value)


def check_ttl(ttl: object) -> float:
    """A checked TTL: a number of seconds > 0 (``math.inf`` allowed)."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise InvalidInputError(f"ttl must be a number of seconds > 0, got {ttl!r}")
    return float(ttl)


def check_digest(digest: object) -> bytes | None:
    if digest is not None and (not isinstance(digest, bytes) or len(digest) != _DIGEST_SIZE):
        raise InvalidInputError(f"a digest must be {_DIGEST_SIZE} bytes or None")
    return digest


def _check_value(key_value: object) -> int:
    if not isinstance(key_value, int) or isinstance(key_value, bool) or not 0 <= key_value < 2**64:
        raise InvalidInputError(f"a key value must be an int in [0, 2**64), got {key_value!r}")
    return key_value


def pack_entry(digest: bytes | None, created_at: float, ttl: float, payload: bytes) -> bytes:
    """An answer as stored: magic, flags, ``created_at``, ``ttl``, digest, encoded value.

    >>> blob = pack_entry(None, 5.0, 60.0, b"s hi")
    >>> unpack_entry(blob)
    (None, 5.0, 60.0, b's hi')
    """
    header = _HEADER.pack(_MAGIC, digest is not None, created_at, ttl)
    return header + (check_digest(digest) or b"") + payload


def unpack_entry(blob: object) -> tuple[bytes | None, float, float, bytes]:
    """``(digest, created_at, ttl, payload)`` of a stored answer; ``ValueError`` for junk."""
    if not isinstance(blob, bytes) or len(blob) < _HEADER.size:
        raise ValueError("not an entry written by loopfuse (too short or not bytes)")
    magic, flags, created_at, ttl = _HEADER.unpack_from(blob)
    if magic != _MAGIC or flags not in (0, 1):
        raise ValueError("not an entry written by loopfuse (bad header)")
    start = _HEADER.size
    if flags:
        if len(blob) < start + _DIGEST_SIZE:
            raise ValueError("not an entry written by loopfuse (truncated digest)")
        return blob[start : start + _DIGEST_SIZE], created_at, ttl, blob[start + _DIGEST_SIZE :]
    return None, created_at, ttl, blob[start:]


class Layout:
    """The keys of one store (see the module docstring) and its checked settings."""

    __slots__ = ("max_ttl", "prefix", "time_source")

    def __init__(self, key_prefix: object, time_source: object, max_ttl: object) -> None:
        if not isinstance(key_prefix, str):
            raise ConfigError(f"key_prefix must be a str, not {type(key_prefix).__name__}")
        if time_source not in ("redis", "caller"):
            raise ConfigError(f"time_source must be 'redis' or 'caller', got {time_source!r}")
        self.prefix = key_prefix
        self.time_source: str = time_source
        self.max_ttl = cast(float, Seconds().check(max_ttl, "max_ttl"))

    def session_keys(self, session_id: object) -> tuple[str, str]:
        """The samples key and the counts key of ``session_id``."""
        if not isinstance(session_id, str):
            raise InvalidInputError(f"session_id must be a str, not {type(session_id).__name__}")
        tag = blake3(session_id.encode("utf-8", "surrogatepass")).digest(16).hex()
        base = f"{self.prefix}b:{{{tag}}}:"
        return base + "s", base + "c"

    def entry_key(self, key_value: object) -> str:
        """The key of the answer stored under the 64-bit ``key_value``."""
        return f"{self.prefix}c:{_check_value(key_value):016x}"

    def lock_key(self, key_value: object, digest: object) -> str:
        """The single-flight lock of ``(key_value, digest)``."""
        tail = "-" if (checked := check_digest(digest)) is None else checked.hex()
        return f"{self.prefix}l:{_check_value(key_value):016x}:{tail}"

    def pattern(self, kind: str) -> str:
        """A ``SCAN MATCH`` pattern for every key of one kind (``b``, ``c`` or ``l``)."""
        escaped = "".join("\\" + ch if ch in "*?[]\\" else ch for ch in self.prefix)
        return f"{escaped}{kind}:*"

    def ttl_ms(self, seconds: float) -> int:
        """A Redis TTL in milliseconds: ``seconds`` rounded up, at most ``max_ttl``."""
        return max(1, math.ceil(min(seconds, self.max_ttl) * 1000.0))


# -- the operations -------------------------------------------------------------------------


def _one(request: Request, answer: Callable[[Any], T]) -> Plan[T]:
    return answer((yield request))


def _unlink_all(patterns: tuple[str, ...]) -> Plan[None]:
    for pattern in patterns:
        keys: list[bytes] = yield Scan(pattern)
        for start in range(0, len(keys), SCAN_BATCH):
            yield Command("unlink", tuple(keys[start : start + SCAN_BATCH]))


class RedisOperations:
    """Every operation of a Redis store, as an :class:`Operation` (arguments are checked
    when it is built, before any round trip), plus the decoding of replies."""

    __slots__ = ("_collisions", "_lock", "codec", "layout", "trap")

    def __init__(self, layout: Layout, codec: object, trap: FailureTrap) -> None:
        if not isinstance(codec, Codec):
            raise ConfigError(f"codec must have encode() and decode(), got {codec!r}")
        self.layout = layout
        self.codec = codec
        self.trap = trap
        self._lock = threading.Lock()
        self._collisions = 0

    @property
    def collisions(self) -> int:
        return self._collisions

    def record(
        self, session_id: object, fingerprint: object, now: object, window: object, cap: object
    ) -> Operation[int]:
        keys = self.layout.session_keys(session_id)
        if not isinstance(fingerprint, int) or isinstance(fingerprint, bool):
            raise InvalidInputError(f"fingerprint must be an int, not {type(fingerprint).__name__}")
        seconds = check_finite(window, "window")
        if seconds <= 0:
            raise InvalidInputError(f"window must be > 0, got {window!r}")
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise InvalidInputError(f"max_samples must be an int >= 1, got {cap!r}")
        # The script's time: ``now`` exactly, or '' for the server's clock.
        when = "" if self.layout.time_source == "redis" else repr(check_finite(now, "now"))
        args = (when, repr(seconds), cap, str(fingerprint), self.layout.ttl_ms(seconds))
        request = Command("record", (), {"keys": list(keys), "args": list(args)}, script=True)
        return Operation("record", _one(request, self._recorded), 0, keys[0])

    def _recorded(self, reply: Any) -> int:
        """The repeats of the breaker script's ``[repeats, repaired]`` reply."""
        repeats, repaired = reply
        if repaired:
            self.trap.junk("record", ValueError("a session's window held junk: started afresh"))
        return int(repeats)

    def reset(self, session_id: str | None) -> Operation[None]:
        if session_id is None:
            return Operation("reset", _unlink_all((self.layout.pattern("b"),)), None)
        keys = self.layout.session_keys(session_id)
        return Operation("reset", _one(Command("delete", keys), lambda _: None), None, keys[0])

    def tracked_sessions(self, now: float, window: float) -> Operation[int]:
        return Operation("tracked_sessions", self._tracked(now, window), 0)

    def _tracked(self, now: float, window: float) -> Plan[int]:
        if self.layout.time_source == "redis":  # TIME as the script reads it: the same float
            seconds, micros = yield Command("time")
            now = float(f"{seconds}.{micros:06d}")
        keys: list[bytes] = yield Scan(self.layout.pattern("b"))
        samples = [key for key in keys if key.endswith(b":s")]
        live = 0
        for start in range(0, len(samples), SCAN_BATCH):
            batch = samples[start : start + SCAN_BATCH]
            tails = yield Pipeline(
                tuple(Command("zrange", (k, -1, -1), {"withscores": True}) for k in batch)
            )
            tails = self._replies("tracked_sessions", tails)
            live += sum(1 for t in tails if t and now - float(t[0][1]) < window)
        return live

    def get(self, key_value: int, digest: bytes | None, now: float) -> Operation[object]:
        key, digest = self.layout.entry_key(key_value), check_digest(digest)

        def served(blob: object) -> object:
            entry = self._entry(blob, digest, now)
            return MISS if entry is None else entry.value

        return Operation("get", self._read("get", Command("get", (key,)), served), MISS, key)

    def peek(
        self, key_value: int, digest: bytes | None, now: float
    ) -> Operation[StoredEntry | None]:
        key, digest = self.layout.entry_key(key_value), check_digest(digest)
        request = Pipeline((Command("get", (key,)), Command("pttl", (key,))))

        def snapshot(replies: list[Any]) -> StoredEntry | None:
            blob, pttl = self._replies("peek", replies)
            return self._entry(blob, digest, now, pttl)

        return Operation("peek", _one(request, snapshot), None, key)

    def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> Operation[None]:
        key, digest = self.layout.entry_key(key_value), check_digest(digest)
        seconds = check_ttl(ttl)
        try:
            payload = self.codec.encode(value)
        except Exception as exc:
            raise InvalidInputError(
                f"{self.codec!r} cannot encode a {type(value).__name__} for Redis: {exc}"
            ) from exc
        blob = pack_entry(digest, check_finite(now, "now"), seconds, payload)
        request = Command("set", (key, blob), {"px": self.layout.ttl_ms(seconds)})
        return Operation("set", _one(request, lambda _: None), None, key)

    def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> Operation[str | None]:
        key = self.layout.lock_key(key_value, digest)
        token = secrets.token_hex(16)
        ttl_ms = self.layout.ttl_ms(check_ttl(ttl))
        request = Command("acquire", (), {"keys": [key], "args": [token, ttl_ms]}, script=True)

        def taken(reply: object) -> str | None:
            if reply == _TAKEN_OVER:
                self.trap.junk("acquire", ValueError("a lock held junk: taken over"))
            return token if reply else None

        # Failing open grants the lock: compute, without single flight.
        return Operation("acquire", _one(request, taken), token, key)

    def release(self, key_value: int, digest: bytes | None, token: str) -> Operation[None]:
        key = self.layout.lock_key(key_value, digest)
        request = Command("release", (), {"keys": [key], "args": [token]}, script=True)
        return Operation("release", _one(request, lambda _: None), None, key)

    def clear(self) -> Operation[None]:
        return Operation("clear", self._clear(), None)

    def _clear(self) -> Plan[None]:
        yield from _unlink_all((self.layout.pattern("c"), self.layout.pattern("l")))
        with self._lock:
            self._collisions = 0

    def _entry(
        self, blob: object, digest: bytes | None, now: float, pttl: object = None
    ) -> StoredEntry | None:
        """The entry of a ``GET`` reply that a probe with ``digest`` at ``now`` may see.
        ``pttl`` (what Redis says is left of its life) is given by ``peek`` only: a
        snapshot, which counts no collision."""
        entry = None if blob is None else self._unpack(blob)
        if entry is None:
            return None
        stored_digest, created_at, ttl, payload = entry
        if self.layout.time_source == "caller":
            if now >= created_at + ttl:
                return None
        elif pttl is not None:
            # The writer's clock means nothing here: say when, on the caller's clock,
            # the entry was written, from what Redis says is left of its life.
            if not isinstance(pttl, int) or pttl < 0:
                return None
            created_at = now - (self.layout.ttl_ms(ttl) - pttl) / 1000.0
        if digest is not None and digest != stored_digest:
            if pttl is None:
                with self._lock:
                    self._collisions += 1
            return None
        value = self._decode(payload)
        return None if value is MISS else StoredEntry(value, created_at, ttl, 0)

    def _read(self, operation: str, request: Request, answer: Callable[[Any], T]) -> Plan[T]:
        """``answer`` of the reply to ``request``; of ``None`` (nothing there) when the key
        holds another type: junk, counted, not a failure of Redis."""
        try:
            reply = yield request
        except Exception as exc:
            if not wrong_type(exc):
                raise
            self.trap.junk(operation, exc)
            reply = None
        return answer(reply)

    def _replies(self, operation: str, replies: list[Any]) -> list[Any]:
        """A pipeline's replies (sent with ``raise_on_error=False``): an error reply is
        raised, unless it is ``WRONGTYPE`` (junk, counted): then the reply is ``None``."""
        checked = []
        for reply in replies:
            if isinstance(reply, Exception):
                if not wrong_type(reply):
                    raise reply
                self.trap.junk(operation, reply)
                reply = None
            checked.append(reply)
        return checked

    def _unpack(self, blob: object) -> tuple[bytes | None, float, float, bytes] | None:
        try:
            return unpack_entry(blob)
        except ValueError as exc:
            self.trap.junk("decode", exc)
            return None

    def _decode(self, payload: bytes) -> object:
        try:
            return self.codec.decode(payload)
        except Exception as exc:  # junk or another codec's bytes: a miss, not an outage
            self.trap.junk("decode", exc)
            return MISS
