"""Which Redis an operation goes to: one gate and one circuit per node of a cluster.

A plain client (``redis.Redis``) talks to one server through one pool: a store has one
:class:`Route`, whose :class:`~loopfuse.stores._gate.ConnectionGate` is sized to that
pool and whose :class:`~loopfuse.stores.circuit.StoreCircuit` stands for that server.

A cluster client (redis-py's ``RedisCluster``, sync or asyncio) talks to each master
through a pool of that node's own, and one master failing says nothing of the others.
So a cluster store has one route per master: an operation on one key (every operation
of a guard step: a session's two keys share one hash slot) takes a turn on the gate of
the node that owns the key's slot, sized to that node's pool (``max_connections`` per
node) less one connection, left for the client's own topology queries after an error,
and is admitted by that node's circuit. One master down opens its own circuit
only: sessions whose keys live on the healthy masters stay guarded. When a replica is
promoted, the slots' new owner is another node, another route, with a closed circuit:
counting resumes as soon as the client has learnt the new topology.

Operations over every node (``clear``, ``reset()`` of every session,
``tracked_sessions``: a ``SCAN`` of each master in turn) and operations on a cluster
client that does not know its nodes yet go by the store's *default* route: ungated
(no single pool to size it by) for a cluster client, with a circuit of its own.

Routes are made on first use, one per node name (``host:port``) the cluster's topology
names: at most :data:`MAX_ROUTES`; past that, routes whose circuit is closed are
forgotten (the topology changed many times: failovers, resharding).

While slots move (a failover, a resharding), an operation gated on the slot's old owner
may be redirected (``MOVED``) to the new one and take one of its connections unseen by
its gate: if that pool is full, the operation gets the "no free connection" policy
(back-pressure, never the circuit). That lasts until the client has learnt the new
topology.
"""

from __future__ import annotations

import threading
from typing import Final, NamedTuple

from loopfuse.stores._gate import ConnectionGate, pool_size
from loopfuse.stores._trap import FailureTrap
from loopfuse.stores.circuit import StoreCircuit

__all__ = ["MAX_ROUTES", "Route", "Routes", "is_cluster_client"]

MAX_ROUTES: Final = 256
"""Routes a cluster store keeps at most (a cluster has at most a few hundred masters)."""


class Route(NamedTuple):
    """Where operations go: a node's name (``""`` for the default route), the gate of
    its pool and its circuit."""

    node: str
    gate: ConnectionGate
    circuit: StoreCircuit


def is_cluster_client(client: object) -> bool:
    """Whether ``client`` is a cluster client (it routes each key to a node)."""
    return callable(getattr(client, "get_node_from_key", None)) and hasattr(client, "nodes_manager")


def node_pool_size(node: object) -> int | None:
    """How many connections a cluster node's pool holds: the asyncio client's
    ``ClusterNode.max_connections``, or the pool of the sync client's node client."""
    size = getattr(node, "max_connections", None)
    if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
        return size
    return pool_size(getattr(node, "redis_connection", None))


def node_gate_size(node: object) -> int | None:
    """How many operations take a connection of ``node``'s pool at once: all but one of
    them, left for the client's own topology queries (``CLUSTER SLOTS`` after an error
    goes through the same pools), at least one."""
    size = node_pool_size(node)
    return None if size is None else max(1, size - 1)


class Routes:
    """The routes of one store: see the module docstring. Thread-safe."""

    __slots__ = ("_by_node", "_lock", "_trap", "client", "cluster", "default", "timeout")

    def __init__(self, client: object, timeout: float, trap: FailureTrap) -> None:
        self.client = client
        self.cluster = is_cluster_client(client)
        self.timeout = timeout
        self._trap = trap
        # The default route: the whole of a plain client's Redis, and the store's circuit.
        self.default = Route("", ConnectionGate(pool_size(client), timeout), trap.circuit)
        self._by_node: dict[str, Route] = {}
        self._lock = threading.Lock()

    def for_key(self, key: str | None) -> Route | None:
        """The route of an operation on ``key`` (``None``: an operation over every node).
        ``None`` when a cluster client cannot tell the key's node yet (an asyncio client
        before it first reached the cluster, or a slot no node serves right now)."""
        if not self.cluster or key is None:
            return self.default
        try:
            node = self.client.get_node_from_key(key)  # type: ignore[attr-defined]
            name = node.name
        except Exception:  # no topology yet, or a slot not covered: the client will say
            return None
        if not isinstance(name, str):
            return None
        route = self._by_node.get(name)
        if route is None:
            with self._lock:
                route = self._by_node.get(name)
                if route is None:
                    self._forget_idle()
                    gate = ConnectionGate(node_gate_size(node), self.timeout)
                    route = Route(name, gate, self._trap.new_circuit())
                    self._by_node[name] = route
        return route

    def _forget_idle(self) -> None:
        if len(self._by_node) < MAX_ROUTES:
            return
        for name, route in list(self._by_node.items()):
            if route.circuit.state == "closed":
                del self._by_node[name]
                self._trap.forget(route.circuit)

    def all(self) -> list[Route]:
        """Every route: the default one, then one per node met so far."""
        with self._lock:
            return [self.default, *self._by_node.values()]
