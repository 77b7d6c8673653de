"""``LoopBreaker``: refuse the same request sent again and again.

Per session, a sliding time window of request-intent fingerprints. A request whose
intent already appears ``max_repeats`` times in the window is refused; refused
requests are recorded too, so a client hammering a refused request stays refused
until it pauses for a whole window. It catches retry storms and stateless loops; an
agent that loops by *appending* to its history changes its fingerprint every turn,
which is :class:`~loopfuse.LoopDetector`'s job.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Unpack

from loopfuse._clock import read_clock
from loopfuse.errors import ConfigError, InvalidInputError, LoopfuseError
from loopfuse.events import EventAction, EventCallback, EventSink, GuardEvent
from loopfuse.fields import Flag, Integer, Seconds, check_fields, configured, setting
from loopfuse.intent import fingerprint as intent_fingerprint
from loopfuse.loop import Loop
from loopfuse.stores import AsyncBreakerStore, BreakerStore, StoreUnavailableError
from loopfuse.stores.drive import StoreAccess, adrive, drive
from loopfuse.stores.memory import DEFAULT_MAX_SESSIONS, MemoryBreakerStore

if TYPE_CHECKING:
    from loopfuse.overrides import BreakerOverrides

__all__ = ["BreakerSettings", "LoopBreaker", "LoopBroken", "LoopDecision"]

logger = logging.getLogger("loopfuse")

DEFAULT_WINDOW_SECS: Final = 30.0
DEFAULT_MAX_REPEATS: Final = 5
DEFAULT_MAX_SAMPLES_PER_SESSION: Final = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerSettings:
    """Every setting of a :class:`LoopBreaker`, checked once: each field is declared
    here with its default, its kind and a one-line help (:mod:`loopfuse.fields`), and
    ``loopfuse scan``'s flags and a settings file's keys are made from them
    (:func:`loopfuse.load_settings`). ``max_repeats=0`` switches the breaker off.

    >>> BreakerSettings(window=60, max_repeats=3)
    BreakerSettings(window=60.0, max_repeats=3, max_samples_per_session=256, \
max_sessions=10000, fail_closed=False)
    >>> BreakerSettings(max_repeats=-1)
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: max_repeats must be an int >= 0, got -1
    """

    window: float = setting(
        DEFAULT_WINDOW_SECS,
        Seconds(),
        "sliding window, seconds",
    )
    max_repeats: int = setting(
        DEFAULT_MAX_REPEATS,
        Integer(zero_off=True),
        "identical requests a window may hold; the next is refused (0: off)",
    )
    max_samples_per_session: int = setting(
        DEFAULT_MAX_SAMPLES_PER_SESSION,
        Integer(minimum=1),
        "requests remembered per session, the oldest dropped first",
    )
    max_sessions: int = setting(
        DEFAULT_MAX_SESSIONS,
        Integer(minimum=1),
        "sessions remembered in memory, the idle and least recently used dropped first",
    )
    fail_closed: bool = setting(
        False,
        Flag(),
        "refuse, instead of allowing, a request the breaker failed to check",
        key="breaker_fail_closed",  # the guard's fail_closed is the file's and the flag's
    )

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, slots=True)
class LoopDecision:
    """What :meth:`LoopBreaker.check` decided about one request.

    ``repeats`` counts the live samples with this fingerprint in the session's window,
    this request included. ``error`` is set when the guard failed internally and let
    the request through (fail-open) — or refused it, with ``fail_closed=True``.
    :attr:`loop` is the :class:`~loopfuse.Loop` a refusal found.
    """

    allowed: bool
    repeats: int
    session_id: str
    fingerprint: int | None
    max_repeats: int
    window: float
    error: str | None = None

    @property
    def message(self) -> str:
        """A sentence a person or a model can act on."""
        if self.error is not None:
            verdict = "allowed" if self.allowed else "refused"
            return f"loopfuse: request {verdict} because the loop guard failed: {self.error}"
        if self.allowed:
            return f"loopfuse: request allowed ({self.repeats} of {self.max_repeats} in window)"
        # The one wording of a breaker refusal: the integrations hand it to the model too,
        # so it names no session (which may be an end user's id).
        return (
            f"Loop detected: this exact request has been sent {self.repeats} times within "
            f"{self.window:g}s (limit {self.max_repeats}). Sending it again unchanged will "
            "not give a different result: change the request or your approach, or stop "
            "and say what is blocking you."
        )

    @property
    def loop(self) -> Loop | None:
        """The loop this decision refused (``kind="repeated_request"``, the fingerprint
        in hex as its ``signature``), or ``None`` when the request was allowed or the
        check failed.

        >>> LoopDecision(False, 6, "s", 255, 5, 30.0).loop.signature
        '00000000000000ff'
        """
        if self.allowed or self.error is not None:
            return None
        signature = "" if self.fingerprint is None else f"{self.fingerprint:016x}"
        return Loop("repeated_request", "breaker", signature, self.repeats, (), self.message)


class LoopBroken(LoopfuseError):
    """Raised by :meth:`LoopBreaker.enforce` when a request is refused.

    Carries ``session_id``, ``repeats``, ``fingerprint``, the :class:`~loopfuse.Loop`
    found (``loop``) and the whole ``decision``; it pickles (so it crosses a process pool).
    """

    def __init__(self, decision: LoopDecision) -> None:
        super().__init__(decision.message)
        self.decision = decision
        self.session_id = decision.session_id
        self.repeats = decision.repeats
        self.fingerprint = decision.fingerprint
        self.loop = decision.loop

    def __reduce__(self) -> tuple[type[LoopBroken], tuple[LoopDecision]]:
        # Rebuilt from its decision, so it pickles (e.g. out of a process pool).
        return (type(self), (self.decision,))


class LoopBreaker:
    """Refuses the (N+1)th identical request intent inside a sliding time window.

    Its settings are a :class:`BreakerSettings` (each one's default, meaning and check
    are declared there): ``LoopBreaker()`` runs the defaults, ``LoopBreaker(window=60,
    max_repeats=3)`` changes some, ``LoopBreaker(settings, max_repeats=3)`` changes one
    of ``settings``; an unknown or refused setting is a
    :class:`~loopfuse.errors.ConfigError` naming it. The settings:

    - ``window``: the window, in seconds or as a ``timedelta``. A sample is live while
      ``now - seen < window``.
    - ``max_repeats``: how many identical requests a window may hold. ``0`` disables
      the breaker: every check allows and records nothing.
    - ``max_samples_per_session``: samples kept per session; the oldest go first.
    - ``max_sessions``: sessions tracked at once. Idle sessions (no live sample) are
      forgotten first; past the cap the least recently used one is evicted, so a
      client that invents a session id per request cannot grow memory.
    - ``fail_closed``: refuse, instead of allowing, a request the guard failed to check
      (its store unreachable included).

    The objects it runs with are keywords of their own:

    Args:
        clock: seconds, any finite real number; ``time.monotonic`` by default (inject a
            fake one in tests).
        store: where the windows live (a :class:`~loopfuse.stores.BreakerStore`, or an
            :class:`~loopfuse.stores.AsyncBreakerStore`). By default a
            :class:`~loopfuse.stores.memory.MemoryBreakerStore` of ``max_sessions``
            sessions in this process (no I/O); a :class:`~loopfuse.stores.redis.RedisStore`
            or :class:`~loopfuse.stores.redis.AsyncRedisStore` shares them between
            processes and hosts (and bounds them with TTLs, so ``max_sessions`` does not
            apply).
        on_event: called with a :class:`~loopfuse.events.GuardEvent` when a check
            refuses (``breaker_tripped``) or fails (``fail_open``/``fail_closed``); see
            :mod:`loopfuse.events`.

    One instance may be shared by every thread of a server; every operation is O(1)
    amortised in samples and sessions. With a shared store, each check is one round
    trip; if the store cannot be reached the request is let through (``error`` set,
    counted in :attr:`internal_errors`; the store logs it) or, with ``fail_closed``,
    refused. See ``docs/stores.md``.

    asyncio code awaits :meth:`acheck`, :meth:`acheck_request`, :meth:`aenforce`,
    :meth:`aenforce_request`, :meth:`areset` and :meth:`atracked_sessions`: they never
    block the event loop (an async store is awaited; the in-memory store does no I/O; a
    sync shared store is called in a worker thread). The sync methods on an async-only
    store raise :class:`~loopfuse.errors.ConfigError` naming the async method to use.

    >>> now = [0.0]
    >>> breaker = LoopBreaker(window=30, max_repeats=2, clock=lambda: now[0])
    >>> [breaker.check("s1", 42).allowed for _ in range(3)]
    [True, True, False]
    >>> breaker.check("s2", 42).allowed      # sessions are isolated
    True
    >>> now[0] = 100.0                       # a whole window later
    >>> breaker.check("s1", 42).repeats
    1
    """

    def __init__(
        self,
        settings: BreakerSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        store: BreakerStore | AsyncBreakerStore | None = None,
        on_event: EventCallback | None = None,
        **overrides: Unpack[BreakerOverrides],
    ) -> None:
        self.settings: BreakerSettings = configured(
            "LoopBreaker", BreakerSettings, settings, overrides, "window=30, max_repeats=5"
        )
        """The checked settings (read-only)."""
        if not callable(clock):
            raise ConfigError("clock must be a callable returning seconds as a float")
        self.clock = clock
        self.internal_errors = 0
        """How many checks failed internally (and were let through unless fail_closed)."""
        if store is None:
            store = MemoryBreakerStore(self.settings.max_sessions)
        elif not isinstance(store, BreakerStore | AsyncBreakerStore):
            raise ConfigError(
                f"store must be a loopfuse.stores.BreakerStore or AsyncBreakerStore, got {store!r}"
            )
        self.store: BreakerStore | AsyncBreakerStore = store
        """Where the windows live."""
        self._local = store if isinstance(store, MemoryBreakerStore) else None
        self._access = StoreAccess(store, "record", "LoopBreaker", local=self._local is not None)
        self._lock = threading.Lock()
        self.events = EventSink(on_event)
        """Where this breaker's events go (``events.errors`` counts a raising callback)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: object) -> LoopBreaker:
        """A breaker configured from ``LOOP_WINDOW_SECS`` and ``LOOP_MAX_REPEATS``.

        Defaults 30 and 5 when unset or empty. A value that is not a non-negative
        integer (a positive one for the window) raises :class:`~loopfuse.ConfigError`
        naming the variable, rather than silently falling back to a default.
        Other keyword arguments are passed to the constructor.

        >>> LoopBreaker.from_env({"LOOP_MAX_REPEATS": "3"}).max_repeats
        3
        >>> LoopBreaker.from_env({"LOOP_WINDOW_SECS": "thirty"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        loopfuse.errors.ConfigError: LOOP_WINDOW_SECS must be a positive integer ..., got 'thirty'
        """
        env = os.environ if environ is None else environ
        seconds = "positive integer number of seconds"
        window = _env_int(env, "LOOP_WINDOW_SECS", int(DEFAULT_WINDOW_SECS), 1, seconds)
        repeats = _env_int(env, "LOOP_MAX_REPEATS", DEFAULT_MAX_REPEATS, 0, "non-negative integer")
        return cls(window=window, max_repeats=repeats, **kwargs)  # type: ignore[arg-type]

    @property
    def window(self) -> float:
        """The sliding window, in seconds (``settings.window``)."""
        return self.settings.window

    @property
    def max_repeats(self) -> int:
        """Identical requests a window may hold (``settings.max_repeats``; 0: off)."""
        return self.settings.max_repeats

    @property
    def max_samples_per_session(self) -> int:
        """Samples kept per session (``settings.max_samples_per_session``)."""
        return self.settings.max_samples_per_session

    @property
    def max_sessions(self) -> int:
        """Sessions tracked at once in memory (``settings.max_sessions``)."""
        return self.settings.max_sessions

    @property
    def fail_closed(self) -> bool:
        """Whether a request the breaker failed to check is refused (``settings.fail_closed``)."""
        return self.settings.fail_closed

    @property
    def enabled(self) -> bool:
        """``False`` when ``max_repeats == 0``: every check allows and records nothing."""
        return self.settings.max_repeats > 0

    @property
    def tracked_sessions(self) -> int:
        """Sessions with at least one live sample (idle ones are forgotten on the way)."""
        store = self._access.sync("tracked_sessions")
        return int(store.tracked_sessions(self._now(), self.window))

    async def atracked_sessions(self) -> int:
        """:attr:`tracked_sessions`, awaited (a method: a property cannot be)."""
        return int(await self._access.call("tracked_sessions", self._now(), self.window))

    def reset(self, session_id: str | None = None) -> None:
        """Forget one session's samples, or every session's when ``session_id`` is None."""
        self._access.sync("reset").reset(session_id)

    async def areset(self, session_id: str | None = None) -> None:
        """:meth:`reset`, awaited."""
        await self._access.call("reset", session_id)

    def check(self, session_id: str, fingerprint: int) -> LoopDecision:
        """Record one request of ``session_id`` and decide whether it may go.

        Raises :class:`~loopfuse.errors.InvalidInputError` when ``session_id`` is not a
        ``str`` or ``fingerprint`` not an ``int``, and :class:`~loopfuse.errors.ConfigError`
        when the clock returns anything but a finite number.
        """
        disabled = self._admit(session_id, fingerprint)
        if disabled is not None:
            return disabled
        local = self._local
        if local is None:  # a shared store is atomic by itself; never hold a lock over I/O
            store = self._access.sync("check")
            return drive(self._shared_check(session_id, fingerprint), lambda a: store.record(*a))
        # Read the clock and record under the store's lock, so that samples arrive in
        # time order (the window trims from the front).
        window, samples = self.settings.window, self.settings.max_samples_per_session
        with local.lock:
            repeats = local.record_locked(session_id, fingerprint, self._now(), window, samples)
        return self._decide(session_id, fingerprint, repeats)

    async def acheck(self, session_id: str, fingerprint: int) -> LoopDecision:
        """:meth:`check` for asyncio: the same decision, and the event loop never waits
        for the store (see the class docstring).

        >>> import asyncio
        >>> breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
        >>> [asyncio.run(breaker.acheck("s", 42)).allowed for _ in range(2)]
        [True, False]
        """
        if self._local is not None:  # no I/O: the sync check, as it is
            return self.check(session_id, fingerprint)
        disabled = self._admit(session_id, fingerprint)
        if disabled is not None:
            return disabled
        plan = self._shared_check(session_id, fingerprint)
        return await adrive(plan, lambda args: self._access.call("record", *args))

    def _admit(self, session_id: object, fingerprint: object) -> LoopDecision | None:
        """Check the arguments; the decision itself when the breaker is disabled."""
        if not isinstance(session_id, str):
            raise InvalidInputError(f"session_id must be a str, not {type(session_id).__name__}")
        if not isinstance(fingerprint, int) or isinstance(fingerprint, bool):
            raise InvalidInputError(f"fingerprint must be an int, not {type(fingerprint).__name__}")
        if not self.settings.max_repeats:
            return LoopDecision(True, 0, session_id, fingerprint, 0, self.settings.window)
        return None

    def _shared_check(
        self, session_id: str, fingerprint: int
    ) -> Generator[tuple[str, int, float, float, int], int, LoopDecision]:
        """One check on a shared store, written once: yields the ``record`` arguments,
        receives the repeats (run by :func:`~loopfuse.stores.drive.drive` or ``adrive``)."""
        now, settings = self._now(), self.settings
        try:
            repeats = yield (
                session_id,
                fingerprint,
                now,
                settings.window,
                settings.max_samples_per_session,
            )
        except StoreUnavailableError as exc:  # the store fails closed
            return self._unrecorded(session_id, fingerprint, str(exc), allowed=False)
        return self._decide(session_id, fingerprint, repeats)

    def _decide(self, session_id: str, fingerprint: int, repeats: int) -> LoopDecision:
        if repeats <= 0:  # the store failed open: nothing was counted
            error = getattr(self.store, "last_error", None) or "the store recorded nothing"
            return self._unrecorded(session_id, fingerprint, f"store: {error}")
        settings = self.settings
        allowed = repeats <= settings.max_repeats
        decision = LoopDecision(
            allowed, repeats, session_id, fingerprint, settings.max_repeats, settings.window
        )
        if not allowed:
            self._emit("breaker_tripped", decision)
        return decision

    def check_request(self, session_id: str, body: object, path: str = "") -> LoopDecision:
        """:meth:`check` a request body, fingerprinted with :func:`loopfuse.intent.fingerprint`.

        ``body`` is ``bytes``, ``str`` or a parsed mapping in any dialect ``intent``
        knows. If fingerprinting fails (a parsed body JSON cannot express, an internal
        error), the request is let through with ``error`` set, one warning is logged on
        the ``loopfuse`` logger and :attr:`internal_errors` counts it; with
        ``fail_closed=True`` it is refused instead. A ``session_id`` or ``path`` that is not
        a ``str`` raises :class:`~loopfuse.errors.InvalidInputError`.

        >>> breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
        >>> body = {"model": "m", "messages": [{"role": "user", "content": "again?"}]}
        >>> breaker.check_request("s", body).allowed, breaker.check_request("s", body).allowed
        (True, False)
        """
        disabled = self._admit_request(session_id, path)
        if disabled is not None:
            return disabled
        self._access.sync("check_request")  # an async-only store is the caller's bug
        try:
            return self.check(session_id, intent_fingerprint(body, path))
        except Exception as exc:  # fail open: a guard must never take the request path down
            return self._failed(session_id, exc)

    async def acheck_request(self, session_id: str, body: object, path: str = "") -> LoopDecision:
        """:meth:`check_request` for asyncio (fingerprinting is CPU work, done in line;
        the store is awaited as in :meth:`acheck`)."""
        disabled = self._admit_request(session_id, path)
        if disabled is not None:
            return disabled
        try:
            return await self.acheck(session_id, intent_fingerprint(body, path))
        except Exception as exc:  # fail open: a guard must never take the request path down
            return self._failed(session_id, exc)

    def _admit_request(self, session_id: object, path: object) -> LoopDecision | None:
        if not isinstance(session_id, str):
            raise InvalidInputError(f"session_id must be a str, not {type(session_id).__name__}")
        if not isinstance(path, str):  # the caller's bug, not a guard failure to let through
            raise InvalidInputError(f"path must be a str, not {type(path).__name__}")
        if not self.settings.max_repeats:
            return LoopDecision(True, 0, session_id, None, 0, self.settings.window)
        return None

    def enforce(self, session_id: str, fingerprint: int) -> LoopDecision:
        """:meth:`check`, raising :class:`LoopBroken` when the request is refused."""
        return _enforced(self.check(session_id, fingerprint))

    async def aenforce(self, session_id: str, fingerprint: int) -> LoopDecision:
        """:meth:`acheck`, raising :class:`LoopBroken` when the request is refused."""
        return _enforced(await self.acheck(session_id, fingerprint))

    def enforce_request(self, session_id: str, body: object, path: str = "") -> LoopDecision:
        """:meth:`check_request`, raising :class:`LoopBroken` when the request is refused.

        >>> breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
        >>> _ = breaker.enforce_request("s", b'{"input": "ping"}')
        >>> try:
        ...     breaker.enforce_request("s", b'{"input": "ping"}')
        ... except LoopBroken as exc:
        ...     print(exc.session_id, exc.repeats)
        ...     print(exc)  # doctest: +ELLIPSIS
        s 2
        Loop detected: this exact request has been sent 2 times within 30s (limit 1). ...
        """
        return _enforced(self.check_request(session_id, body, path))

    async def aenforce_request(self, session_id: str, body: object, path: str = "") -> LoopDecision:
        """:meth:`acheck_request`, raising :class:`LoopBroken` when the request is refused."""
        return _enforced(await self.acheck_request(session_id, body, path))

    def _failed(self, session_id: str, exc: Exception) -> LoopDecision:
        action = "refusing" if self.fail_closed else "allowing"
        logger.warning("loopfuse: LoopBreaker check failed, %s the request: %r", action, exc)
        return self._unrecorded(session_id, None, repr(exc))

    def _unrecorded(
        self, session_id: str, fingerprint: int | None, error: str, allowed: bool = True
    ) -> LoopDecision:
        """The decision on a request the guard failed to count (counted in
        ``internal_errors``, and an event). It logs nothing: ``_failed`` logs its error,
        and a store logs its own, once per interval rather than per request."""
        with self._lock:
            self.internal_errors += 1
        allowed = allowed and not self.fail_closed
        decision = LoopDecision(
            allowed, 0, session_id, fingerprint, self.max_repeats, self.window, error
        )
        self._emit("fail_open" if allowed else "fail_closed", decision)
        return decision

    def _emit(self, action: EventAction, decision: LoopDecision) -> None:
        if self.events.enabled:
            loop, reason = decision.loop, None  # a refusal: the loop it refused
            if decision.error is not None:  # a failure: what failed, on which request
                known = decision.fingerprint
                signature = "" if known is None else f"{known:016x}"
                loop = Loop("guard_failed", "breaker", signature, decision.repeats)
                reason = decision.error
            self.events.emit(
                GuardEvent(action, "breaker", decision.session_id, reason=reason, loop=loop)
            )

    def _now(self) -> float:
        """The clock's reading, checked (see :func:`~loopfuse._clock.read_clock`)."""
        return read_clock(self.clock)

    def __repr__(self) -> str:
        return (
            f"LoopBreaker(window={self.window:g}, max_repeats={self.max_repeats}, "
            f"max_sessions={self.max_sessions})"
        )


def _env_int(env: Mapping[str, str], name: str, default: int, minimum: int, what: str) -> int:
    """The integer environment variable ``name`` (``default`` when unset or empty), or a
    :class:`~loopfuse.errors.ConfigError` naming the variable.

    >>> _env_int({"LOOP_MAX_REPEATS": "x"}, "LOOP_MAX_REPEATS", 5, 0, "non-negative integer")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: LOOP_MAX_REPEATS must be a non-negative integer, got 'x'
    """
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ConfigError(f"{name} must be a {what}, got {raw!r}")
    return value


def _enforced(decision: LoopDecision) -> LoopDecision:
    if not decision.allowed:
        raise LoopBroken(decision)
    return decision
