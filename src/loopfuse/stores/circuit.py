"""A circuit in front of a store's backend: a stalled Redis costs one timeout, not one per call.

Failing open is right when Redis is away, but a *stalled* Redis (paused, swapping, a
network black hole) makes every call wait its full client timeout before failing: every
guarded request pays it. A :class:`StoreCircuit` stops calling the backend for a while
once it keeps failing:

- **closed** (the normal state): every call goes to the backend. ``failure_threshold``
  failures with no success between them, within ``failure_window`` seconds, open it.
- **open**: no call goes to the backend for ``cooldown`` seconds; each operation fails
  at once by the store's policy (open: let the request go; closed: refuse), and is
  counted and logged like any other failure.
- **half-open**: after the cool-down, *one* call (the probe) goes through while the
  others still fail at once. Its success closes the circuit; its failure opens it for
  another cool-down.

So a stalled store costs ``failure_threshold`` timeouts when it stalls, then about one
timeout per cool-down, per store instance (per process). Any success closes the circuit.
Time comes from ``clock`` (real time, ``time.monotonic`` by default; tests pass a fake).
Thread-safe, and never blocks: a lock is held only to update a few fields, never over
I/O, so asyncio code uses it as it is.

>>> now = [0.0]
>>> circuit = StoreCircuit(failure_threshold=2, cooldown=5.0, clock=lambda: now[0])
>>> circuit.admit(), circuit.failed(probe=False), circuit.failed(probe=False)
('call', False, True)
>>> circuit.state, circuit.admit()          # open: nothing reaches the backend
('open', None)
>>> now[0] = 5.0
>>> circuit.admit(), circuit.admit()        # one probe; the others still wait
('probe', None)
>>> circuit.succeeded(), circuit.state
(True, 'closed')
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Final, Literal, cast

from loopfuse.errors import ConfigError
from loopfuse.fields import Integer, Seconds

__all__ = [
    "DEFAULT_COOLDOWN",
    "DEFAULT_FAILURE_THRESHOLD",
    "DEFAULT_FAILURE_WINDOW",
    "Admission",
    "StoreCircuit",
]

DEFAULT_FAILURE_THRESHOLD: Final = 3
"""Failures in a row (within the window) that open the circuit; 0 never opens it."""
DEFAULT_FAILURE_WINDOW: Final = 10.0
"""Seconds within which those failures must fall."""
DEFAULT_COOLDOWN: Final = 5.0
"""Seconds the circuit stays open before a probe may go through."""

Admission = Literal["call", "probe"] | None
"""What :meth:`StoreCircuit.admit` says: go (``"call"``), go as the probe, or not at all."""


class StoreCircuit:
    """Whether a store may call its backend now; see the module docstring.

    Args:
        failure_threshold: failures with no success between them that open the circuit
            (an int >= 0; ``0`` disables the circuit: every call goes through).
        failure_window: seconds (> 0) within which those failures must fall.
        cooldown: seconds (>= 0) the circuit stays open before one probe goes through.
        clock: real seconds, ``time.monotonic`` by default.

    Counters: :attr:`opened` (times the circuit opened) and :attr:`short_circuited`
    (calls that did not reach the backend).

    >>> StoreCircuit(failure_threshold=-1)
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: failure_threshold must be an int >= 0, got -1
    """

    __slots__ = (
        "_failures",
        "_lock",
        "_open_until",
        "_state",
        "clock",
        "cooldown",
        "failure_threshold",
        "failure_window",
        "opened",
        "short_circuited",
    )

    def __init__(
        self,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        failure_window: float = DEFAULT_FAILURE_WINDOW,
        cooldown: float = DEFAULT_COOLDOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        threshold = cast(int, Integer().check(failure_threshold, "failure_threshold"))
        if not callable(clock):
            raise ConfigError("clock must be a callable returning seconds")
        self.failure_threshold: int = threshold
        self.failure_window = cast(float, Seconds().check(failure_window, "failure_window"))
        self.cooldown = cast(float, Seconds(zero=True).check(cooldown, "cooldown"))
        self.clock = clock
        self.opened = 0
        self.short_circuited = 0
        self._lock = threading.Lock()
        self._failures: deque[float] = deque()
        self._state: Literal["closed", "open", "half-open"] = "closed"
        self._open_until = -math.inf

    @property
    def state(self) -> Literal["closed", "open", "half-open"]:
        """``"closed"``, ``"open"`` (cooling down, or waiting for the next call to probe)
        or ``"half-open"`` (a probe is out)."""
        return self._state

    def retry_in(self) -> float:
        """Seconds until an open circuit lets a probe through (0 when it would now)."""
        if self._state != "open":
            return 0.0
        return max(0.0, self._open_until - self.clock())

    def admit(self) -> Admission:
        """May a call go to the backend now? ``"call"``, ``"probe"`` (the one call of a
        half-open circuit: report how it ends) or ``None`` (fail at once)."""
        if self._state == "closed":  # the common case: no lock, no clock
            return "call"
        with self._lock:
            if self.state == "closed":  # closed meanwhile
                return "call"
            if self._state == "open" and self.clock() >= self._open_until:
                self._state = "half-open"
                return "probe"
            self.short_circuited += 1
            return None

    def short_circuit(self) -> None:
        """Count a call that was admitted but stopped before reaching the backend (it
        waited for a connection while the circuit opened)."""
        with self._lock:
            self.short_circuited += 1

    def succeeded(self) -> bool:
        """A call reached the backend and got an answer: the circuit closes. Returns
        whether it was not closed before."""
        if self._state == "closed" and not self._failures:
            return False
        with self._lock:
            self._failures.clear()
            reopened = self._state != "closed"
            self._state = "closed"
            return reopened

    def failed(self, *, probe: bool) -> bool:
        """A call to the backend failed. Returns whether the circuit opened because of it."""
        if self.failure_threshold == 0:
            return False
        with self._lock:
            now = self.clock()
            if probe:
                self._open(now)
                return True
            if self._state != "closed":  # a call admitted before the circuit opened
                return False
            failures = self._failures
            failures.append(now)
            while failures and now - failures[0] >= self.failure_window:
                failures.popleft()
            if len(failures) < self.failure_threshold:
                return False
            self._open(now)
            return True

    def abandon(self, *, probe: bool) -> None:
        """A call ended without an answer either way (its task was cancelled): if it was
        the probe, the next call probes instead, so the circuit never waits for good."""
        if probe:
            with self._lock:
                if self._state == "half-open":
                    self._state, self._open_until = "open", -math.inf

    def _open(self, now: float) -> None:
        self._failures.clear()
        self._state = "open"
        self._open_until = now + self.cooldown
        self.opened += 1

    def __repr__(self) -> str:
        return (
            f"StoreCircuit(state={self._state!r}, failure_threshold={self.failure_threshold}, "
            f"failure_window={self.failure_window:g}, cooldown={self.cooldown:g})"
        )
