"""Redis key layout, Lua scripts, entry format and failure policy (no I/O, no redis import).

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
"""

from __future__ import annotations

import logging
import math
import struct
import threading
from collections.abc import Callable
from typing import Final

from blake3 import blake3

from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.stores import StoreUnavailableError

__all__ = [
    "BREAKER_LUA",
    "RELEASE_LUA",
    "Failures",
    "Layout",
    "pack_entry",
    "unpack_entry",
]

logger = logging.getLogger("loopfuse")

# Atomic window check-and-record. Redis runs a script alone, so trim, cap, add and count
# are one step for every client. Times travel as strings, never as Lua numbers: Lua 5.1
# prints numbers with 14 significant digits, and a score must keep all of its bits so
# that ``now - seen < window`` compares exactly what the in-memory store compares.
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
local function drop(member)
  redis.call('ZREM', z, member)
  local f = string.match(member, ':(.*)$')
  if redis.call('HINCRBY', h, f, -1) <= 0 then redis.call('HDEL', h, f) end
end
while true do
  local head = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  if #head == 0 or now - tonumber(head[2]) < window then break end
  drop(head[1])
end
while redis.call('ZCARD', z) >= max_samples do
  drop(redis.call('ZRANGE', z, 0, 0)[1])
end
local seq = redis.call('HINCRBY', h, '#', 1)
redis.call('ZADD', z, now_s, string.format('%016d', seq) .. ':' .. fp)
local repeats = redis.call('HINCRBY', h, fp, 1)
redis.call('PEXPIRE', z, ARGV[5])
redis.call('PEXPIRE', h, ARGV[5])
return repeats
"""

# Compare-and-delete: only the holder's token releases a lock.
RELEASE_LUA: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_HEADER: Final = struct.Struct("<4sBdd")
_MAGIC: Final = b"LFc1"
_DIGEST_SIZE: Final = 32
TIME_SOURCES: Final = ("redis", "caller")


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


class Layout:
    """The keys of one store (see the module docstring) and its checked settings."""

    __slots__ = ("lock_prefix", "max_ttl", "prefix", "time_source")

    def __init__(self, key_prefix: object, time_source: object, max_ttl: object) -> None:
        if not isinstance(key_prefix, str):
            raise ConfigError(f"key_prefix must be a str, not {type(key_prefix).__name__}")
        if time_source not in TIME_SOURCES:
            raise ConfigError(f"time_source must be 'redis' or 'caller', got {time_source!r}")
        if (
            isinstance(max_ttl, bool)
            or not isinstance(max_ttl, int | float)
            or not 0 < max_ttl < math.inf
        ):
            raise ConfigError(f"max_ttl must be a positive, finite number of seconds: {max_ttl!r}")
        self.prefix = key_prefix
        self.time_source: str = time_source
        self.max_ttl = float(max_ttl)

    def session_keys(self, session_id: object) -> tuple[str, str]:
        """The samples key and the counts key of ``session_id``."""
        if not isinstance(session_id, str):
            raise InvalidInputError(f"session_id must be a str, not {type(session_id).__name__}")
        tag = blake3(session_id.encode("utf-8", "surrogatepass")).digest(16).hex()
        base = f"{self.prefix}b:{{{tag}}}:"
        return base + "s", base + "c"

    def entry_key(self, key_value: object) -> str:
        """The key of the answer stored under the 64-bit ``key_value``."""
        _check_value(key_value)
        return f"{self.prefix}c:{key_value:016x}"

    def lock_key(self, key_value: object, digest: bytes | None) -> str:
        """The single-flight lock of ``(key_value, digest)``."""
        _check_value(key_value)
        return f"{self.prefix}l:{key_value:016x}:{'-' if digest is None else digest.hex()}"

    def pattern(self, kind: str) -> str:
        """A ``SCAN MATCH`` pattern for every key of one kind (``b``, ``c`` or ``l``)."""
        return f"{_glob_escape(self.prefix)}{kind}:*"

    def now_arg(self, now: float) -> str:
        """The script's time argument: ``now`` exactly, or ``''`` for the server's clock."""
        if self.time_source == "redis":
            return ""
        return repr(check_finite(now, "now"))

    def ttl_ms(self, seconds: float) -> int:
        """A Redis TTL in milliseconds: ``seconds`` rounded up, at most ``max_ttl``."""
        return max(1, math.ceil(min(seconds, self.max_ttl) * 1000.0))


def _check_value(key_value: object) -> None:
    if (
        not isinstance(key_value, int)
        or isinstance(key_value, bool)
        or not 0 <= key_value < 1 << 64
    ):
        raise InvalidInputError(f"a key value must be an int in [0, 2**64), got {key_value!r}")


def check_finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number of seconds, got {value!r}")
    return float(value)


def check_fingerprint(fingerprint: object) -> str:
    """``fingerprint`` as the decimal text the script counts by."""
    if not isinstance(fingerprint, int) or isinstance(fingerprint, bool):
        raise InvalidInputError(f"fingerprint must be an int, not {type(fingerprint).__name__}")
    return str(fingerprint)


def check_window(window: object, max_samples: object) -> tuple[float, int]:
    """Checked ``window`` (positive, finite seconds) and ``max_samples`` (an int >= 1)."""
    seconds = check_finite(window, "window")
    if seconds <= 0:
        raise InvalidInputError(f"window must be > 0, got {window!r}")
    if not isinstance(max_samples, int) or isinstance(max_samples, bool) or max_samples < 1:
        raise InvalidInputError(f"max_samples must be an int >= 1, got {max_samples!r}")
    return seconds, max_samples


def check_ttl(ttl: object) -> float:
    """A checked TTL: a number of seconds > 0 (``math.inf`` allowed)."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise InvalidInputError(f"ttl must be a number of seconds > 0, got {ttl!r}")
    return float(ttl)


def pack_entry(digest: bytes | None, created_at: float, ttl: float, payload: bytes) -> bytes:
    """An answer as stored: magic, flags, ``created_at``, ``ttl``, digest, encoded value.

    >>> blob = pack_entry(None, 5.0, 60.0, b"s hi")
    >>> unpack_entry(blob)
    (None, 5.0, 60.0, b's hi')
    """
    if digest is not None and (not isinstance(digest, bytes) or len(digest) != _DIGEST_SIZE):
        raise InvalidInputError(f"a digest must be {_DIGEST_SIZE} bytes or None")
    header = _HEADER.pack(_MAGIC, digest is not None, created_at, ttl)
    return header + (digest or b"") + payload


def unpack_entry(blob: bytes) -> tuple[bytes | None, float, float, bytes]:
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


class Failures:
    """Counts backend failures, logs them at most once per ``interval``, applies the policy.

    ``clock`` is real time (``time.monotonic``), only for spacing the log lines.

    >>> failures = Failures(fail_closed=False, interval=60.0, clock=lambda: 0.0)
    >>> failures.failed("get", ConnectionError("refused"))
    >>> failures.count, failures.last_error
    (1, 'get: ConnectionError: refused')
    """

    __slots__ = (
        "_clock",
        "_lock",
        "_logged_at",
        "_since_log",
        "count",
        "down",
        "fail_closed",
        "interval",
        "last_error",
    )

    def __init__(self, fail_closed: object, interval: object, clock: Callable[[], float]) -> None:
        if not isinstance(fail_closed, bool):
            raise ConfigError(f"fail_closed must be a bool, not {type(fail_closed).__name__}")
        if isinstance(interval, bool) or not isinstance(interval, int | float) or interval < 0:
            raise ConfigError(f"log_interval must be a number of seconds >= 0, got {interval!r}")
        self.fail_closed = fail_closed
        self.interval = float(interval)
        self._clock = clock
        self._lock = threading.Lock()
        self._logged_at = -math.inf
        self._since_log = 0
        self.count = 0
        self.down = False
        self.last_error: str | None = None

    def failed(self, operation: str, exc: BaseException, *, may_close: bool = True) -> None:
        """Count and maybe log a failure; raise :class:`StoreUnavailableError` when the
        store fails closed (and ``may_close``: junk data is a miss, not an outage)."""
        # "Type: message", not repr(): some redis-py errors' repr drops the message.
        error = f"{operation}: {type(exc).__name__}: {exc}"
        with self._lock:
            self.count += 1
            self._since_log += 1
            self.last_error = error
            self.down = True
            now = self._clock()
            log = now - self._logged_at >= self.interval
            if log:
                self._logged_at, suppressed, self._since_log = now, self._since_log - 1, 0
        closed = self.fail_closed and may_close
        if log:
            logger.warning(
                "loopfuse: Redis store %s failed (%s); %s; %d more failure(s) since the last "
                "report, %d in all",
                operation,
                error.partition(": ")[2],
                "failing closed" if closed else "failing open",
                suppressed,
                self.count,
            )
        if closed:
            raise StoreUnavailableError(f"loopfuse: Redis store unavailable: {error}") from None

    def succeeded(self) -> None:
        """Note a success; log once when the backend answers again after failures."""
        if self.down:
            with self._lock:
                was_down, self.down = self.down, False
            if was_down:
                logger.warning("loopfuse: Redis store reachable again (%d failures)", self.count)
