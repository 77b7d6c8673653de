"""The one place where a store's backend errors become its failure policy.

Every operation of a store with a backend runs inside :meth:`FailureTrap.attempt`:

- the :class:`~loopfuse.stores.circuit.StoreCircuit` is asked first; while it is open the
  operation does not reach the backend and fails at once;
- an exception from the backend (any ``Exception``: the client library's types never
  leave the store) makes the operation fail *open* (its fallback answer) or, for a store
  built with ``fail_closed=True``, raise :class:`~loopfuse.stores.StoreUnavailableError`;
- every failure, short-circuited ones included, is counted; a warning goes to the
  ``loopfuse`` logger at most once per ``log_interval`` (saying how many it did not
  report), and one "reachable again" when a backend that failed answers again, at most
  one per failure warning (a flapping backend, or a cluster where one node is down and
  the others answer, logs two lines per interval, not one per flap);
- a store may have several circuits (one per node of a cluster:
  :mod:`loopfuse.stores._routes`): each attempt names its own, and only its own is told
  of its failures and successes; the counters and the log are the store's;
- *back-pressure* (no connection of the client's pool came free in time:
  :class:`~loopfuse.stores._gate.ConnectionWaitTimeout`, or a type the store names, such
  as redis-py's ``MaxConnectionsError``) gets the same policy (open: the fallback;
  closed: the error) but is counted apart, in :attr:`FailureTrap.backpressure`: the
  backend did not fail, so the circuit is not told;
- a failure the backend *answered* at once (a type the store names: a cluster's
  ``CLUSTERDOWN`` while a master fails over) is counted, logged and gets the policy,
  but does not count towards the circuit: it cost no wait, and the node serves again
  the moment the cluster does (an open circuit would shut it out for a cool-down more);
- an operation admitted while the circuit was closed is dropped if the circuit opened
  before it got a connection (:meth:`Attempt.recheck`): it would only wait out a
  stalled backend again;
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
from typing import Final, Generic, Literal, TypeVar, cast

from loopfuse.fields import Flag, Seconds
from loopfuse.stores import StoreUnavailableError
from loopfuse.stores._gate import ConnectionWaitTimeout
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

_INTERVAL: Final = Seconds(zero=True, forever=True)  # 0: log every failure; inf: only the first


class _Dropped(Exception):
    """An admitted call dropped before it reached the backend (see :meth:`Attempt.recheck`)."""


class Attempt(Generic[T]):
    """One operation inside the trap (a context manager): whether it may reach the
    backend, and its answer (the fallback until the operation sets it)."""

    __slots__ = ("admission", "circuit", "fallback", "node", "operation", "trap", "value")

    def __init__(
        self, trap: FailureTrap, operation: str, fallback: T, circuit: StoreCircuit, node: str
    ) -> None:
        self.trap = trap
        self.operation = operation
        self.fallback = fallback
        self.value = fallback
        self.circuit = circuit
        self.node = node
        self.admission: Admission = None

    @property
    def admitted(self) -> bool:
        """Whether the operation may call the backend (the circuit let it through)."""
        return self.admission is not None

    def __enter__(self) -> Attempt[T]:
        self.admission = self.trap.admit(self.operation, self.circuit)
        return self

    def recheck(self) -> None:
        """Once it holds a connection: a call admitted while the circuit was closed goes
        no further if the circuit has opened meanwhile (the backend stalled while it
        waited for the connection); it fails at once, as a short-circuited call."""
        if self.admission == "call" and self.circuit.state != "closed":
            raise _Dropped

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        if exc is None:
            if self.admission is not None:
                self.trap.succeeded(self.circuit, self.node)
            return False
        probe = self.admission == "probe"
        if not isinstance(exc, Exception):  # cancelled: not an answer either way
            self.circuit.abandon(probe=probe)
            return False
        self.value = self.fallback
        trap = self.trap
        # Each of these raises when failing closed.
        if isinstance(exc, trap.backpressure_types):
            self.circuit.abandon(probe=probe)  # the probe never reached the backend
            trap.held_back(self.operation, exc)
        elif isinstance(exc, _Dropped):
            trap.dropped(self.operation, self.circuit)
        else:
            trap.failed(self.operation, exc, probe=probe, circuit=self.circuit)
        return True


class FailureTrap:
    """Counts a backend's failures, logs them sparingly, applies the policy and the circuit.

    ``clock`` is real time (``time.monotonic``): it spaces the log lines and times the
    circuit. ``backpressure_types``: exceptions that mean "no connection free", counted
    in :attr:`backpressure` (with :class:`~loopfuse.stores._gate.ConnectionWaitTimeout`).
    Bad settings raise :class:`~loopfuse.errors.ConfigError`.
    """

    __slots__ = (
        "_cause",
        "_down",
        "_failure_logged",
        "_lock",
        "_logged_at",
        "_since_log",
        "backend",
        "backpressure",
        "backpressure_types",
        "circuit",
        "clock",
        "count",
        "fail_closed",
        "interval",
        "last_error",
        "quick_types",
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
        backpressure_types: tuple[type[Exception], ...] = (),
        quick_types: tuple[type[Exception], ...] = (),
    ) -> None:
        closed = cast(bool, Flag().check(fail_closed, "fail_closed"))
        interval = cast(float, _INTERVAL.check(log_interval, "log_interval"))
        self.circuit = StoreCircuit(failure_threshold, failure_window, cooldown, clock)
        self.backend = backend
        self.fail_closed = closed
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._logged_at = -math.inf
        self._since_log = 0
        self._cause = "no failure yet"
        self.count = 0
        self.backpressure = 0
        self.backpressure_types: tuple[type[Exception], ...] = (
            ConnectionWaitTimeout,
            *backpressure_types,
        )
        self.quick_types = quick_types
        self._down: set[StoreCircuit] = set()  # circuits whose backend failed last
        self._failure_logged = False  # a failure warning since the last "reachable again"
        self.last_error: str | None = None

    @property
    def down(self) -> bool:
        """Whether a backend of the store failed and has not answered since."""
        return bool(self._down)

    def new_circuit(self) -> StoreCircuit:
        """Another circuit with the store's settings (for another node of a cluster)."""
        model = self.circuit
        return StoreCircuit(
            model.failure_threshold, model.failure_window, model.cooldown, model.clock
        )

    def forget(self, circuit: StoreCircuit) -> None:
        """``circuit`` is no longer used (its node left the cluster's topology)."""
        with self._lock:
            self._down.discard(circuit)

    def attempt(
        self, operation: str, fallback: T, circuit: StoreCircuit | None = None, node: str = ""
    ) -> Attempt[T]:
        """Run a ``with`` body as ``operation``, behind ``circuit`` (the store's own by
        default; ``node`` names its backend in the log): see the module docstring. The
        body calls the backend only when ``attempt.admitted``, and sets ``attempt.value``."""
        return Attempt(self, operation, fallback, circuit or self.circuit, node)

    def admit(self, operation: str, circuit: StoreCircuit | None = None) -> Admission:
        """Ask the circuit; a refusal is a failure (counted, maybe logged, maybe raised)."""
        circuit = circuit or self.circuit
        admission = circuit.admit()
        if admission is None:
            self._short_circuited(operation, circuit)
        return admission

    def _short_circuited(self, operation: str, circuit: StoreCircuit) -> None:
        detail = f"circuit open, {self.backend} not called; last failure: {self._cause}"
        self._failed(operation, detail, kind="failure", circuit=circuit)

    def dropped(self, operation: str, circuit: StoreCircuit | None = None) -> None:
        """A call admitted before the circuit opened, dropped before reaching the backend:
        counted as short-circuited."""
        circuit = circuit or self.circuit
        circuit.short_circuit()
        self._short_circuited(operation, circuit)

    def held_back(self, operation: str, exc: Exception) -> None:
        """No connection came free for the call in time: back-pressure, not a failure."""
        self._failed(operation, f"{type(exc).__name__}: {exc}", kind="backpressure")

    def failed(
        self, operation: str, exc: Exception, *, probe: bool, circuit: StoreCircuit | None = None
    ) -> None:
        """A call to the backend raised ``exc``."""
        circuit = circuit or self.circuit
        # "Type: message", not repr(): some redis-py errors' repr drops the message.
        self._cause = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, self.quick_types):  # answered at once: no reason to stop calling
            circuit.abandon(probe=probe)
        else:
            circuit.failed(probe=probe)
        self._failed(operation, self._cause, kind="failure", circuit=circuit)

    def succeeded(self, circuit: StoreCircuit | None = None, node: str = "") -> None:
        """A call to the backend was answered. Once a backend that failed answers again,
        say so, but at most once per failure warning: a backend that keeps flapping (or
        one node of a cluster down while the others answer) is not logged at every flap."""
        circuit = circuit or self.circuit
        if circuit.succeeded() or circuit in self._down:
            with self._lock:
                was_down = circuit in self._down
                self._down.discard(circuit)
                report = was_down and self._failure_logged
                if report:
                    self._failure_logged = False
            if report:
                logger.warning(
                    "loopfuse: %s store reachable again%s (%d failures)",
                    self.backend,
                    f" (node {node})" if node else "",
                    self.count,
                )

    def junk(self, operation: str, exc: BaseException) -> None:
        """Count and maybe log data the store cannot read (not written by loopfuse, or by
        another codec): a miss, never an outage, so it neither fails closed nor counts
        towards the circuit."""
        self._failed(operation, f"{type(exc).__name__}: {exc}", kind="junk")

    def _failed(
        self,
        operation: str,
        detail: str,
        *,
        kind: Literal["failure", "junk", "backpressure"],
        circuit: StoreCircuit | None = None,
    ) -> None:
        """Count, maybe log, and apply the policy: a failure of the backend sets
        :attr:`down` and fails closed when told; junk does neither; back-pressure fails
        closed when told and is counted apart."""
        error = f"{operation}: {detail}"
        with self._lock:
            if kind == "backpressure":
                self.backpressure += 1
            else:
                self.count += 1
            self._since_log += 1
            self.last_error = error
            if kind == "failure":
                self._down.add(circuit or self.circuit)
            now = self.clock()
            log = now - self._logged_at >= self.interval
            if log:
                self._logged_at, suppressed, self._since_log = now, self._since_log - 1, 0
                self._failure_logged = self._failure_logged or kind == "failure"
        closed = self.fail_closed and kind != "junk"
        if log:
            notes = ""
            if self.backpressure:
                notes += f" ({self.backpressure} without a free connection)"
            circuit = circuit or self.circuit
            if circuit.state == "open":
                wait = circuit.retry_in()
                notes += f"; circuit open: {self.backend} not called for {wait:.1f}s"
            logger.warning(
                "loopfuse: %s store %s %s (%s); %s; %d more failure(s) since the last "
                "report, %d in all%s",
                self.backend,
                operation,
                "found no free connection" if kind == "backpressure" else "failed",
                detail,
                "failing closed" if closed else "failing open",
                suppressed,
                self.count + self.backpressure,
                notes,
            )
        if closed:
            raise StoreUnavailableError(
                f"loopfuse: {self.backend} store unavailable: {error}"
            ) from None
