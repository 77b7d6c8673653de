"""Redis stores: breaker windows and cached answers shared by processes and hosts.

Needs ``redis-py`` (``pip install '.[redis]'`` in a loopfuse clone until it is published),
imported when a store is made (``from_url`` makes its client; a store takes redis-py's
"pool full" error type); a store is otherwise built around a client you made:

.. code-block:: python

    import redis
    from loopfuse.stores.redis import RedisStore

    client = redis.Redis(host="localhost", socket_timeout=0.25, socket_connect_timeout=0.25)
    store = RedisStore(client, key_prefix="myapp:loopfuse:")

:class:`RedisStore` (``redis.Redis``) and :class:`AsyncRedisStore`
(``redis.asyncio.Redis``) run the very same operations (written once, in
:mod:`loopfuse.stores._redis_protocol`) on the same keys, so sync and asyncio workers
share one Redis. Each is both a breaker store and a cache store
(:class:`~loopfuse.stores.BreakerStore` and :class:`~loopfuse.stores.CacheStore`, or
their asyncio counterparts); the guards take either (``await breaker.acheck(...)``,
``await cache.aget_or_compute(...)`` with the asyncio one never block the event loop).

- **One round trip per guard step.** ``record``: one ``EVALSHA`` of a Lua script that
  trims, caps, adds and counts atomically. ``get``: one ``GET``. ``set``: one
  ``SET ... PX``. ``acquire``: one ``EVALSHA`` (``SET ... NX PX``, and the take-over of
  a junk lock). ``release``: one ``EVALSHA``
  (compare-and-delete). ``peek``: one pipelined ``GET`` + ``PTTL``. (A script is sent
  once per server: the first call after a restart, a ``SCRIPT FLUSH`` or a failover
  costs one more round trip, an ``EVAL`` to the same node.)
- **One clock.** ``time_source="redis"`` (the default): windows are timed by the Redis
  server's ``TIME`` inside the script and answers expire by Redis' own TTLs, so every
  process and host reads the same clock and the ``now`` arguments are not used for
  them. ``time_source="caller"``: the ``now`` arguments are the time (tests pass a fake
  clock; in production every process must pass a shared clock such as ``time.time``).
- **Failures.** Redis down, slow (past the client's ``socket_timeout``) or erroring:
  the operation fails open (``record`` returns 0, reads miss, writes are dropped,
  ``acquire`` grants), the failure is counted in ``failure_count`` and logged on the
  ``loopfuse`` logger at most once per ``log_interval`` seconds. ``fail_closed=True``
  raises :class:`~loopfuse.stores.StoreUnavailableError` instead. No redis-py exception
  leaves the store.
- **Load is back-pressure, not an outage.** At most as many operations of one store
  hold a connection at once as its client's pool has (``max_connections``); the others
  wait their turn, up to ``pool_timeout`` seconds (see :mod:`loopfuse.stores._gate`),
  so 1,000 tasks on 10 connections compute once and count every check. A wait that
  runs out (or a pool emptied by other code: redis-py's "Too many connections") gets the
  failure policy but is counted apart, in ``pool_timeouts``, and never opens the
  circuit; ``pool_waits`` counts the operations that waited.
- **A Redis Cluster** (redis-py's ``RedisCluster``, sync or asyncio, or ``from_url`` of
  a ``redis+cluster://`` URL): operations take turns per node, on the pool of the node
  that owns their key, and each master has its own circuit (:attr:`~RedisStore.circuits`), so one
  master failing shuts out only the sessions whose keys it owns (see
  :mod:`loopfuse.stores._routes`). A plain client pointed at a cluster node fails
  open, saying so.
- **A stalled Redis costs one timeout per cool-down**, not one per call: after
  ``failure_threshold`` failures in a row (within ``failure_window`` seconds) the store
  stops calling Redis for ``cooldown`` seconds, then lets one probe through (see
  :mod:`loopfuse.stores.circuit`); meanwhile operations fail at once, by the policy.
- **Junk under a key** (another client wrote another type, junk bytes or another
  encoding under a key of the store) is one session's or one answer's problem, not an
  outage: the window is started afresh, the answer misses, the lock is taken over; each
  is counted as junk, never towards the circuit (see
  :mod:`loopfuse.stores._redis_protocol`).
- **Values** go through ``codec`` (default: :data:`~loopfuse.stores.codecs.DEFAULT_CODEC`:
  bytes, str, JSON values); never pickle.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from loopfuse.errors import ConfigError
from loopfuse.fields import Integer
from loopfuse.integrations._extras import require
from loopfuse.stores import StoredEntry
from loopfuse.stores._gate import DEFAULT_POOL_TIMEOUT
from loopfuse.stores._redis_protocol import (
    SCAN_BATCH,
    SCRIPTS,
    Command,
    Layout,
    Operation,
    Plan,
    RedisOperations,
    Request,
    Scan,
)
from loopfuse.stores._routes import Route, Routes
from loopfuse.stores._trap import FailureTrap
from loopfuse.stores.circuit import (
    DEFAULT_COOLDOWN,
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_FAILURE_WINDOW,
    StoreCircuit,
)
from loopfuse.stores.codecs import DEFAULT_CODEC, Codec
from loopfuse.stores.drive import adrive, drive

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_LOG_INTERVAL",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_TTL",
    "DEFAULT_POOL_TIMEOUT",
    "AsyncRedisStore",
    "RedisStore",
]

T = TypeVar("T")

DEFAULT_KEY_PREFIX: Final = "loopfuse:"
DEFAULT_MAX_TTL: Final = 30 * 24 * 3600.0
"""The longest TTL a key gets (an answer cached "forever" lives this long)."""
DEFAULT_LOG_INTERVAL: Final = 60.0
"""Seconds between two failure warnings on the ``loopfuse`` logger."""
DEFAULT_MAX_CONNECTIONS: Final = 10
"""The size of the pool of a client made by ``from_url``. One process gains nothing from
more: its event loop (or its GIL) is the bottleneck, and each new connection costs a
handshake: 100 opened at once on a busy event loop took longer than a 0.25 s timeout,
which reads as Redis stalling."""


CLUSTER_SCHEMES: Final = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
"""URL schemes of a Redis Cluster (as the ``limits`` library spells them), and the plain
scheme of each node."""


def fail_fast_client(
    url: str, timeout: float, *, asynchronous: bool, max_connections: int = DEFAULT_MAX_CONNECTIONS
) -> Any:
    """A client that gives up after ``timeout`` seconds and does not retry: the guard
    fails open at once instead of holding the request while Redis is away. Its pool
    holds ``max_connections`` (per node, for a cluster); the store makes its operations
    take turns on them. ``redis+cluster://host:port[,host:port...]`` (or
    ``rediss+cluster://``): a cluster client, which learns the other nodes from these."""
    require("redis", extra="redis", what="RedisStore.from_url")
    if not isinstance(url, str):
        raise ConfigError(f"url must be a str, not {type(url).__name__}")
    scheme = url.partition("://")[0].lower()
    if scheme in CLUSTER_SCHEMES:
        return _fail_fast_cluster_client(url, timeout, asynchronous, max_connections)
    import redis
    import redis.asyncio
    import redis.asyncio.retry
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    Integer(minimum=1).check(max_connections, "max_connections")
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "max_connections": max_connections,
    }
    if asynchronous:
        options["retry"] = redis.asyncio.retry.Retry(NoBackoff(), 0)
        return redis.asyncio.Redis.from_url(url, **options)
    options["retry"] = Retry(NoBackoff(), 0)
    return redis.Redis.from_url(url, **options)


def _fail_fast_cluster_client(
    url: str, timeout: float, asynchronous: bool, max_connections: int
) -> Any:
    """A ``RedisCluster`` (sync or asyncio) for a ``redis+cluster://`` URL: see
    :func:`fail_fast_client`. Every node named in the URL is a startup node."""
    from urllib.parse import parse_qs, unquote, urlsplit

    import redis.asyncio.cluster
    import redis.asyncio.retry
    import redis.cluster
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    Integer(minimum=1).check(max_connections, "max_connections")
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    nodes: list[tuple[str, int]] = []
    for address in hosts.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"a cluster URL names host:port nodes, got {address!r} in {url!r}")
        nodes.append((host.strip("[]"), int(port)))
    if parts.path.strip("/") not in ("", "0"):
        raise ConfigError(f"a Redis Cluster has database 0 only, got {parts.path!r} in {url!r}")
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "max_connections": max_connections,
    }
    if username:
        options["username"] = unquote(username)
    if password:
        options["password"] = unquote(password)
    if CLUSTER_SCHEMES[parts.scheme.lower()] == "rediss":
        options["ssl"] = True
    for name, values in parse_qs(parts.query).items():
        raise ConfigError(f"a cluster URL takes no option {name!r} ({values!r}) here")
    if asynchronous:
        startup = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in nodes]
        retry: Any = redis.asyncio.retry.Retry(NoBackoff(), 0)
        return redis.asyncio.cluster.RedisCluster(startup_nodes=startup, retry=retry, **options)
    startup_sync = [redis.cluster.ClusterNode(host, port) for host, port in nodes]  # type: ignore[no-untyped-call]
    return redis.cluster.RedisCluster(
        startup_nodes=startup_sync, retry=Retry(NoBackoff(), 0), **options
    )


class MisroutedError(Exception):
    """A plain client talks to a node of a Redis Cluster, which redirects most keys."""


def _misrouted(exc: BaseException) -> MisroutedError | None:
    """A clear error for a cluster's reply (``MOVED``, ``ASK``, ``CLUSTERDOWN``,
    ``CROSSSLOT``) that reached a plain client, else ``None``."""
    try:
        from redis.exceptions import (
            AskError,
            ClusterCrossSlotError,
            ClusterDownError,
            MovedError,
        )
    except ImportError:  # not redis-py's client: nothing to recognise
        return None
    if not isinstance(exc, AskError | ClusterCrossSlotError | ClusterDownError | MovedError):
        return None
    return MisroutedError(
        f"the server is a Redis Cluster node ({type(exc).__name__}: {str(exc)[:80]}): give "
        "the store a cluster client (redis.cluster.RedisCluster, or "
        "from_url('redis+cluster://host:port'))"
    )


def _pool_full_errors() -> tuple[type[Exception], ...]:
    """redis-py's "Too many connections" where it has a type of its own
    (``MaxConnectionsError``; recent redis-py raises it from every pool): a full pool,
    not Redis failing."""
    try:
        from redis.exceptions import MaxConnectionsError
    except ImportError:  # an older redis-py, or a client that is not redis-py's
        return ()
    return (MaxConnectionsError,)


def _initialize() -> Plan[bool]:
    """An asyncio cluster client's ``initialize()``: it learns the cluster's nodes."""
    yield Command("initialize")
    return True


def _no_script_errors() -> tuple[type[Exception], ...]:
    """redis-py's ``NOSCRIPT`` reply: the node has not cached the script (yet)."""
    try:
        from redis.exceptions import NoScriptError
    except ImportError:
        return ()
    return (NoScriptError,)


def _cluster_down_errors() -> tuple[type[Exception], ...]:
    """A cluster that answers ``CLUSTERDOWN`` (slots without a master while a replica
    takes over): answered at once, not a stall, so not a reason to open a circuit."""
    try:
        from redis.exceptions import ClusterDownError, SlotNotCoveredError
    except ImportError:
        return ()
    return (ClusterDownError, SlotNotCoveredError)


async def _collect(keys: Any) -> list[bytes]:
    return [key async for key in keys]


class _RedisStoreBase:
    """What both Redis stores are: settings, counters, and :meth:`_issue`."""

    _asynchronous: bool = False

    def __init__(
        self,
        client: Any,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        *,
        time_source: str = "redis",
        fail_closed: bool = False,
        codec: Codec = DEFAULT_CODEC,
        max_ttl: float = DEFAULT_MAX_TTL,
        log_interval: float = DEFAULT_LOG_INTERVAL,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        failure_window: float = DEFAULT_FAILURE_WINDOW,
        cooldown: float = DEFAULT_COOLDOWN,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        kind = "redis.asyncio.Redis" if self._asynchronous else "redis.Redis"
        if not callable(getattr(client, "register_script", None)):
            raise ConfigError(f"client must be a {kind}, got {type(client).__name__}")
        connection_kwargs = getattr(client, "get_connection_kwargs", None)
        if callable(connection_kwargs) and connection_kwargs().get("decode_responses"):
            raise ConfigError(
                "the Redis client must return bytes: build it with decode_responses=False"
            )
        self._trap = FailureTrap(
            "Redis",
            fail_closed=fail_closed,
            log_interval=log_interval,
            clock=clock,
            failure_threshold=failure_threshold,
            failure_window=failure_window,
            cooldown=cooldown,
            backpressure_types=_pool_full_errors(),
            quick_types=_cluster_down_errors(),
        )
        self._routes = Routes(client, pool_timeout, self._trap)
        self._ops = RedisOperations(Layout(key_prefix, time_source, max_ttl), codec, self._trap)
        self.client = client
        self._registered = {name: client.register_script(lua) for name, lua in SCRIPTS.items()}
        # A cluster: EVALSHA, then EVAL on NOSCRIPT, both to the key's node only.
        # (redis-py's registered scripts answer NOSCRIPT with a SCRIPT LOAD sent to every
        # master, outside the nodes' turns: a burst of them fills the pools.)
        self._scripts = {
            name: (hashlib.sha1(lua.encode()).hexdigest(), lua) for name, lua in SCRIPTS.items()
        }
        self._no_script = _no_script_errors()

    @property
    def layout(self) -> Layout:
        """The store's keys (see :mod:`loopfuse.stores._redis_protocol`)."""
        return self._ops.layout

    @property
    def codec(self) -> Codec:
        """How cached values become bytes and back."""
        return self._ops.codec

    @property
    def key_prefix(self) -> str:
        """The prefix of every key this store writes."""
        return self._ops.layout.prefix

    @property
    def time_source(self) -> str:
        """``"redis"`` (the server's clock) or ``"caller"`` (the ``now`` arguments)."""
        return self._ops.layout.time_source

    @property
    def fail_closed(self) -> bool:
        """Whether a failure raises :class:`~loopfuse.stores.StoreUnavailableError`."""
        return self._trap.fail_closed

    @property
    def failure_count(self) -> int:
        """Operations that failed: Redis down, slow or erroring, the circuit open (they
        did not call Redis), or an entry holding junk."""
        return self._trap.count

    @property
    def last_error(self) -> str | None:
        """The last failure (or wait that ran out), as ``"operation: error"``; ``None``
        before any."""
        return self._trap.last_error

    @property
    def cluster(self) -> bool:
        """Whether the client is a cluster client: one gate and one circuit per node."""
        return self._routes.cluster

    @property
    def pool_waits(self) -> int:
        """Operations that found every connection of the pool (of their node, for a
        cluster) in use and waited."""
        return sum(route.gate.waits for route in self._routes.all())

    @property
    def pool_timeouts(self) -> int:
        """Operations that got no connection in time (``pool_timeout`` ran out, or the
        pool, shared with other code, was full): answered by the failure policy, but
        not failures of Redis (not in ``failure_count``; the circuit is not told)."""
        return self._trap.backpressure

    @property
    def max_connections(self) -> int | None:
        """How many operations hold a connection at once: the client's pool size
        (``None``: no single pool; a cluster client's operations take turns per node,
        on each node's pool)."""
        return self._routes.default.gate.limit

    @property
    def pool_timeout(self) -> float:
        """Seconds an operation waits for a free connection."""
        return self._routes.default.gate.timeout

    @property
    def circuit(self) -> StoreCircuit:
        """The store's circuit: its ``state``, ``opened`` and ``short_circuited`` counts.
        For a cluster client, the circuit of the operations over every node (see
        :attr:`circuits` for each node's)."""
        return self._trap.circuit

    @property
    def circuits(self) -> dict[str, StoreCircuit]:
        """Every circuit by the node it stands for (``host:port``; ``""``: the store's
        own, :attr:`circuit`). A plain client's store has only ``""``."""
        return {route.node: route.circuit for route in self._routes.all()}

    def _route(self, operation: Operation[Any]) -> tuple[Route | None, str]:
        """The route of ``operation`` and its name in errors (``record on host:port``)."""
        route = self._routes.for_key(operation.key)
        if route is None or not route.node:
            return route, operation.name
        return route, f"{operation.name} on {route.node}"

    @property
    def collisions(self) -> int:
        """Reads that found an answer stored for other content under the same value."""
        return self._ops.collisions

    @property
    def evictions(self) -> int:
        """Always 0: Redis expires and evicts entries by itself."""
        return 0

    def _issue(self, request: Request) -> Any:
        """Send one request: its reply (sync client) or an awaitable of it (asyncio)."""
        client = self.client
        if isinstance(request, Scan):
            keys = client.scan_iter(match=request.pattern, count=SCAN_BATCH)
            return _collect(keys) if self._asynchronous else list(keys)
        if isinstance(request, Command):
            if request.script:
                return self._script(request.name, **request.kwargs)
            return getattr(client, request.name)(*request.args, **request.kwargs)
        pipe = client.pipeline(transaction=False)
        for command in request.commands:
            getattr(pipe, command.name)(*command.args, **command.kwargs)
        # Error replies come back in the list: the plan tells junk (WRONGTYPE) from failures.
        return pipe.execute(raise_on_error=False)

    def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run the script ``name``: redis-py's registered script; on a cluster,
        ``EVALSHA``, then ``EVAL`` where the node has not cached it (after a restart, a
        ``SCRIPT FLUSH``, on a promoted replica)."""
        if not self._routes.cluster:
            return self._registered[name](keys=keys, args=args)
        sha, lua = self._scripts[name]
        client = self.client
        if self._asynchronous:
            return self._ascript(sha, lua, keys, args)
        try:
            return client.evalsha(sha, len(keys), *keys, *args)
        except self._no_script:
            return client.eval(lua, len(keys), *keys, *args)

    async def _ascript(self, sha: str, lua: str, keys: list[str], args: list[Any]) -> Any:
        client = self.client
        try:
            return await client.evalsha(sha, len(keys), *keys, *args)
        except self._no_script:
            return await client.eval(lua, len(keys), *keys, *args)

    def _check_reply(self, exc: Exception) -> Exception:
        """What to raise for ``exc``: a cluster's redirect reaching a plain client says
        so (the store is misconfigured), instead of passing for Redis failing."""
        if not self._routes.cluster:
            return _misrouted(exc) or exc
        return exc

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(key_prefix={self.key_prefix!r}, "
            f"time_source={self.time_source!r})"
        )


class RedisStore(_RedisStoreBase):
    """Shared breaker windows and answers in Redis, through a ``redis.Redis`` client.

    Args:
        client: a ``redis.Redis`` (or cluster) client returning bytes. Give it a
            ``socket_timeout``: it bounds how long a slow Redis can hold a request.
        key_prefix: prepended to every key (namespace apps sharing one Redis).
        time_source: ``"redis"`` (the server's clock) or ``"caller"`` (the ``now``
            arguments); see the module docstring.
        fail_closed: raise :class:`~loopfuse.stores.StoreUnavailableError` when Redis
            fails, instead of failing open.
        codec: turns cached values into bytes and back (never pickle).
        max_ttl: the longest TTL any key gets, in seconds.
        log_interval: seconds between two failure warnings on the ``loopfuse`` logger.
        failure_threshold: failures in a row that open the circuit (3; 0: never).
        failure_window: seconds within which they must fall (10).
        cooldown: seconds the open circuit keeps Redis uncalled before a probe (5).
        pool_timeout: seconds an operation waits for one of the pool's connections when
            they are all in use (5; 0: never wait), then fails by the policy.
        clock: real seconds (``time.monotonic``): spaces the warnings, times the circuit.

    Bad settings raise :class:`~loopfuse.errors.ConfigError`; arguments of the wrong
    type :class:`~loopfuse.errors.InvalidInputError` (before any round trip).

    >>> RedisStore(object())
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: client must be a redis.Redis, got object
    """

    client: redis.Redis

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        timeout: float = 0.25,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        **kwargs: Any,
    ) -> RedisStore:
        """A store on a new client for ``url`` (``redis://host:port/db``) that times out
        after ``timeout`` seconds, never retries and holds at most ``max_connections``
        connections (the store's operations take turns on them). Other keywords go to
        the store."""
        client = fail_fast_client(url, timeout, asynchronous=False, max_connections=max_connections)
        return cls(client, **kwargs)

    def _run(self, operation: Operation[T]) -> T:
        route, name = self._route(operation)
        route = route or self._routes.default
        with self._trap.attempt(name, operation.fallback, route.circuit, route.node) as attempt:
            if attempt.admitted:
                with route.gate.hold():
                    attempt.recheck()  # the circuit may have opened while it waited
                    try:
                        attempt.value = drive(operation.plan, self._issue)
                    except Exception as exc:
                        raise self._check_reply(exc) from exc
        return attempt.value

    def record(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """See :meth:`loopfuse.stores.BreakerStore.record`: one ``EVALSHA``."""
        return self._run(self._ops.record(session_id, fingerprint, now, window, max_samples))

    def reset(self, session_id: str | None = None) -> None:
        """See :meth:`loopfuse.stores.BreakerStore.reset`: one ``DEL``, or a ``SCAN``."""
        self._run(self._ops.reset(session_id))

    def tracked_sessions(self, now: float, window: float) -> int:
        """See :meth:`loopfuse.stores.BreakerStore.tracked_sessions` (a ``SCAN``)."""
        return self._run(self._ops.tracked_sessions(now, window))

    def get(self, key_value: int, digest: bytes | None, now: float) -> object:
        """See :meth:`loopfuse.stores.CacheStore.get`: one ``GET``."""
        return self._run(self._ops.get(key_value, digest, now))

    def peek(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """See :meth:`loopfuse.stores.CacheStore.peek`: one pipelined ``GET`` + ``PTTL``."""
        return self._run(self._ops.peek(key_value, digest, now))

    def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """See :meth:`loopfuse.stores.CacheStore.set`: one ``SET ... PX``. A value the
        codec cannot encode raises :class:`~loopfuse.errors.InvalidInputError`."""
        self._run(self._ops.set(key_value, digest, value, ttl, now))

    def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> str | None:
        """See :meth:`loopfuse.stores.CacheStore.acquire`: one ``EVALSHA`` of
        ``SET ... NX PX`` (a lock key holding junk, which never expires, is taken over)."""
        return self._run(self._ops.acquire(key_value, digest, ttl))

    def release(self, key_value: int, digest: bytes | None, token: str) -> None:
        """See :meth:`loopfuse.stores.CacheStore.release`: one ``EVALSHA``."""
        self._run(self._ops.release(key_value, digest, token))

    def clear(self) -> None:
        """See :meth:`loopfuse.stores.CacheStore.clear` (a ``SCAN``); resets ``collisions``."""
        self._run(self._ops.clear())


class AsyncRedisStore(_RedisStoreBase):
    """:class:`RedisStore` for asyncio, through a ``redis.asyncio.Redis`` client: an
    :class:`~loopfuse.stores.AsyncBreakerStore` and :class:`~loopfuse.stores.AsyncCacheStore`.

    Same arguments, keys, scripts, clock, circuit and failure policy as
    :class:`RedisStore`; a slow Redis makes the awaiting task wait, never the event
    loop. A cancelled operation is not a failure: the cancellation propagates.

    >>> AsyncRedisStore(object())
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: client must be a redis.asyncio.Redis, got object
    """

    _asynchronous = True
    client: redis.asyncio.Redis

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        timeout: float = 0.25,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        **kwargs: Any,
    ) -> AsyncRedisStore:
        """See :meth:`RedisStore.from_url`."""
        client = fail_fast_client(url, timeout, asynchronous=True, max_connections=max_connections)
        return cls(client, **kwargs)

    async def _run(self, operation: Operation[T]) -> T:
        route, name = self._route(operation)
        if route is None:
            # A cluster client that does not know its nodes yet: it learns them once
            # (redis-py makes concurrent callers wait for that one), then routes.
            if not await self._run_on(self._routes.default, name, _initialize(), False):
                operation.plan.close()
                return operation.fallback
            route, name = self._route(operation)
        return await self._run_on(
            route or self._routes.default, name, operation.plan, operation.fallback
        )

    async def _run_on(self, route: Route, name: str, plan: Plan[T], fallback: T) -> T:
        with self._trap.attempt(name, fallback, route.circuit, route.node) as attempt:
            if attempt.admitted:
                async with route.gate.ahold():
                    attempt.recheck()  # the circuit may have opened while it waited
                    try:
                        attempt.value = await adrive(plan, self._issue)
                    except Exception as exc:
                        raise self._check_reply(exc) from exc
        if not attempt.admitted:
            plan.close()
        return attempt.value

    async def record(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """See :meth:`RedisStore.record`."""
        return await self._run(self._ops.record(session_id, fingerprint, now, window, max_samples))

    async def reset(self, session_id: str | None = None) -> None:
        """See :meth:`RedisStore.reset`."""
        await self._run(self._ops.reset(session_id))

    async def tracked_sessions(self, now: float, window: float) -> int:
        """See :meth:`RedisStore.tracked_sessions`."""
        return await self._run(self._ops.tracked_sessions(now, window))

    async def get(self, key_value: int, digest: bytes | None, now: float) -> object:
        """See :meth:`RedisStore.get`."""
        return await self._run(self._ops.get(key_value, digest, now))

    async def peek(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """See :meth:`RedisStore.peek`."""
        return await self._run(self._ops.peek(key_value, digest, now))

    async def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """See :meth:`RedisStore.set`."""
        await self._run(self._ops.set(key_value, digest, value, ttl, now))

    async def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> str | None:
        """See :meth:`RedisStore.acquire`."""
        return await self._run(self._ops.acquire(key_value, digest, ttl))

    async def release(self, key_value: int, digest: bytes | None, token: str) -> None:
        """See :meth:`RedisStore.release`."""
        await self._run(self._ops.release(key_value, digest, token))

    async def clear(self) -> None:
        """See :meth:`RedisStore.clear`."""
        await self._run(self._ops.clear())
