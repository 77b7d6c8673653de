"""The one place where a store's backend errors become its failure policy.

Every operation of a store with a backend runs inside :meth:`FailureTrap.attempt`:

- the :class:`~loopfuse.stores.circuit.StoreCircuit` is asked first; while it is open the
  operation does not reach the backend and fails at once;
- an exception from the backend (any ``Exception``: the client library's types never
  leave the store) makes the operation fail *open* (its fallback answer) or, for a store
  built with ``fail_closed=True``, raise :class:`~loopfuse.stores.StoreUnavailableError`;
- every failure, short-circuited ones included, is counted; a warning goes to the
  ``loopfuse`` logger at most once per ``log_interval`` (saying how many it did not
  report), and one more when the backend answers again;
- a cancelled operation (``asyncio.CancelledError``, ``KeyboardInterrupt``) is not a
  failure: it propagates, and a cancelled probe hands the probe to the next call.

>>> trap = FailureTrap("Redis", fail_closed=False, log_interval=60.0, clock=lambda: 0.0)
>>> with trap.attempt("get", "fallback") as attempt:
...     if attempt.admitted:
...         raise ConnectionError("refused")
>>> attempt.value, trap.count, trap.last_error
('fallback', 1, 'get: ConnectionError: refused')
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from loopfuse.errors import ConfigError
from loopfuse.stores import StoreUnavailableError
from loopfuse.stores.circuit import (
    DEFAULT_COOLDOWN,
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_FAILURE_WINDOW,
    Admission,
    StoreCircuit,
)

__all__ = ["Attempt", "FailureTrap"]

T = TypeVar("T")

logger = logging.getLogger("loopfuse")


class Attempt(Generic[T]):
    """One operation inside the trap (a context manager): whether it may reach the
    backend, and its answer (the fallback until the operation sets it)."""

    __slots__ = ("admission", "fallback", "operation", "trap", "value")

    def __init__(self, trap: FailureTrap, operation: str, fallback: T) -> None:
        self.trap = trap
        self.operation = operation
        self.fallback = fallback
        self.value = fallback
        self.admission: Admission = None

    @property
    def admitted(self) -> bool:
        """Whether the operation may call the backend (the circuit let it through)."""
        return self.admission is not None

    def __enter__(self) -> Attempt[T]:
        self.admission = self.trap.admit(self.operation)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        if exc is None:
            if self.admission is not None:
                self.trap.succeeded()
            return False
        probe = self.admission == "probe"
        if not isinstance(exc, Exception):  # cancelled: not an answer either way
            self.trap.circuit.abandon(probe=probe)
            return False
        self.value = self.fallback
        self.trap.failed(self.operation, exc, probe=probe)  # raises when failing closed
        return True


class FailureTrap:
    """Counts a backend's failures, logs them sparingly, applies the policy and the circuit.

    ``clock`` is real time (``time.monotonic``): it spaces the log lines and times the
    circuit. Bad settings raise :class:`~loopfuse.errors.ConfigError`.
    """

    __slots__ = (
        "_cause",
        "_lock",
        "_logged_at",
        "_since_log",
        "backend",
        "circuit",
        "clock",
        "count",
        "down",
        "fail_closed",
        "interval",
        "last_error",
    )

    def __init__(
        self,
        backend: str,
        *,
        fail_closed: object,
        log_interval: object,
        clock: Callable[[], float],
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        failure_window: float = DEFAULT_FAILURE_WINDOW,
        cooldown: float = DEFAULT_COOLDOWN,
    ) -> None:
        if not isinstance(fail_closed, bool):
            raise ConfigError(f"fail_closed must be a bool, not {type(fail_closed).__name__}")
        interval = log_interval
        if isinstance(interval, bool) or not isinstance(interval, int | float) or interval < 0:
            raise ConfigError(f"log_interval must be a number of seconds >= 0, got {interval!r}")
        self.circuit = StoreCircuit(failure_threshold, failure_window, cooldown, clock)
        self.backend = backend
        self.fail_closed = fail_closed
        self.interval = float(interval)
        self.clock = clock
        self._lock = threading.Lock()
        self._logged_at = -math.inf
        self._since_log = 0
        self._cause = "no failure yet"
        self.count = 0
        self.down = False
        self.last_error: str | None = None

    def attempt(self, operation: str, fallback: T) -> Attempt[T]:
        """Run a ``with`` body as ``operation``: see the module docstring. The body
        calls the backend only when ``attempt.admitted``, and sets ``attempt.value``."""
        return Attempt(self, operation, fallback)

    def admit(self, operation: str) -> Admission:
        """Ask the circuit; a refusal is a failure (counted, maybe logged, maybe raised)."""
        admission = self.circuit.admit()
        if admission is None:
            detail = f"circuit open, {self.backend} not called; last failure: {self._cause}"
            self._failed(operation, detail, may_close=True)
        return admission

    def failed(self, operation: str, exc: Exception, *, probe: bool) -> None:
        """A call to the backend raised ``exc``."""
        # "Type: message", not repr(): some redis-py errors' repr drops the message.
        self._cause = f"{type(exc).__name__}: {exc}"
        self.circuit.failed(probe=probe)
        self._failed(operation, self._cause, may_close=True)

    def succeeded(self) -> None:
        """A call to the backend was answered; log once when it is back after failures."""
        if self.circuit.succeeded() or self.down:
            with self._lock:
                was_down, self.down = self.down, False
            if was_down:
                logger.warning(
                    "loopfuse: %s store reachable again (%d failures)", self.backend, self.count
                )

    def junk(self, operation: str, exc: BaseException) -> None:
        """Count and maybe log data the store cannot read (not written by loopfuse, or by
        another codec): a miss, never an outage, so it neither fails closed nor counts
        towards the circuit."""
        self._failed(operation, f"{type(exc).__name__}: {exc}", may_close=False)

    def _failed(self, operation: str, detail: str, *, may_close: bool) -> None:
        error = f"{operation}: {detail}"
        with self._lock:
            self.count += 1
            self._since_log += 1
            self.last_error = error
            self.down = self.down or may_close
            now = self.clock()
            log = now - self._logged_at >= self.interval
            if log:
                self._logged_at, suppressed, self._since_log = now, self._since_log - 1, 0
        closed = self.fail_closed and may_close
        if log:
            circuit = self.circuit
            logger.warning(
                "loopfuse: %s store %s failed (%s); %s; %d more failure(s) since the last "
                "report, %d in all%s",
                self.backend,
                operation,
                detail,
                "failing closed" if closed else "failing open",
                suppressed,
                self.count,
                f"; circuit open: {self.backend} not called for {circuit.retry_in():.1f}s"
                if circuit.state == "open"
                else "",
            )
        if closed:
            raise StoreUnavailableError(
                f"loopfuse: {self.backend} store unavailable: {error}"
            ) from None
