"""Routing across the engine replicas: least outstanding requests, ties round robin, one retry.

Why least outstanding (not round robin): generations differ in length by orders of magnitude, so
equal request counts are not equal load; the replica with the fewest unfinished requests (a stream
counts until its last byte) is the one with free batch slots. Ties go round robin so an idle server
still spreads requests.

A request that cannot reach its replica before any byte of the answer arrived (connection refused,
reset, or the replica died before answering) is retried once on another replica: nothing was sent to
the client, so the retry is invisible. After the first byte the stream's own error handling applies.

The count is kept per request in a context variable set by `ReplicaScope` (the ASGI wrapper): the
router adds the replica it picked, and the wrapper, which sees the end of the response (also of a
stream or a client disconnect), releases it and stamps `X-Neuronserve-Replica` on the answer.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from neuronserve.engine.pool import RPhase
from neuronserve.front.enginehttp import EngineResponse
from neuronserve.front.errors import NotReady
from neuronserve.front.gate import ASGIApp, Message, Receive, Scope, Send
from neuronserve.front.proxy import UNREACHED, EngineClient

if TYPE_CHECKING:
    from neuronserve.front.replica_metrics import ReplicaCounts

log = logging.getLogger("neuronserve.front")

REPLICA_HEADER = b"x-neuronserve-replica"


class _Process(Protocol):
    def returncode(self) -> int | None: ...


class Replica(Protocol):
    """What routing needs of a replica: engine/pool.py's Replica in the supervisor's process, a view of
    the board in a front worker (front/fleetview.py). `outstanding` and `routed` are this process's."""

    outstanding: int
    routed: int

    @property
    def index(self) -> int: ...

    @property
    def base_url(self) -> str: ...

    @property
    def phase(self) -> RPhase: ...

    @property
    def healthy(self) -> bool: ...

    @property
    def restarts(self) -> int: ...

    @property
    def proc(self) -> _Process | None: ...


class Fleet(Protocol):
    """The replicas routing chooses among (engine/pool.py's ReplicaPool, or a worker's FleetView)."""

    @property
    def replicas(self) -> Sequence[Replica]: ...


# Failures that happen before the replica answered anything: safe to send elsewhere.
_UNREACHED = UNREACHED


@dataclass
class RequestRoute:
    """Per request: the replicas it holds a count on, and the replica its session is pinned to."""

    picks: list[Replica] = field(default_factory=list)
    pinned: Replica | None = None

    def release(self, replica: Replica) -> None:
        if replica in self.picks:
            self.picks.remove(replica)
            replica.outstanding -= 1


_ROUTE: contextvars.ContextVar[RequestRoute | None] = contextvars.ContextVar(
    "neuronserve_route", default=None
)


def current_route() -> RequestRoute | None:
    return _ROUTE.get()


def enter_route() -> RequestRoute:
    """A fresh RequestRoute for the request running in this context (its task's own copy)."""
    route = RequestRoute()
    _ROUTE.set(route)
    return route


def replica_tag(route: RequestRoute) -> tuple[bytes, bytes] | None:
    """The `X-Neuronserve-Replica` header of the answer: the replica picked last, or the pinned one."""
    replica = route.picks[-1] if route.picks else route.pinned
    return None if replica is None else (REPLICA_HEADER, str(replica.index).encode())


def leave_route(route: RequestRoute) -> None:
    """Give back every replica count the request still holds (at the end of its response)."""
    for replica in list(route.picks):
        route.release(replica)


def routable(r: Replica) -> bool:
    """READY with a live process. A failing health check alone does not stop traffic to a replica
    (a saturated engine answers /health late); among routable replicas the healthy ones are preferred."""
    return r.phase == RPhase.READY and r.proc is not None and r.proc.returncode() is None


class Router(EngineClient):
    """An EngineClient whose requests go to the least-loaded READY replica."""

    def __init__(
        self,
        pool: Fleet,
        timeout_s: float,
        max_connections: int,
        counts: Callable[[], list[ReplicaCounts]] | None = None,
        first: int = 0,
    ) -> None:
        super().__init__(pool.replicas[0].base_url, timeout_s, max_connections)
        self.fleet = pool
        self.counts = counts  # the container's counts (several front processes), else this process's
        # Round robin on ties starts at `first` (front worker i at replica i: idle workers spread too).
        self._last = first - 1

    def pick(self, exclude: list[Replica]) -> Replica | None:
        replicas = self.fleet.replicas
        if len(replicas) == 1:  # no data parallel, the common case: no choice to make, no lists to build
            only = replicas[0]
            if not routable(only) or only in exclude:
                return None
            self._last = only.index
            return only
        ready = [r for r in replicas if routable(r) and r not in exclude]
        healthy = [r for r in ready if r.healthy]
        ready = healthy or ready
        if not ready:
            return None
        low = min(r.outstanding for r in ready)
        n = len(replicas)
        # Among the least loaded, the first index after the last one picked (round robin on ties).
        choice = min((r for r in ready if r.outstanding == low), key=lambda r: (r.index - self._last - 1) % n)
        self._last = choice.index
        return choice

    async def request(
        self, method: str, path_query: str, headers: dict[str, str] | None, data: bytes | None
    ) -> EngineResponse:
        route = _ROUTE.get()
        tried: list[Replica] = []
        while True:
            replica = self._choose(route, tried)
            replica.routed += 1
            if route is not None:
                replica.outstanding += 1
                route.picks.append(replica)
            try:
                return await self.call(replica.base_url, method, path_query, headers, data)
            except _UNREACHED as err:
                if route is not None:
                    route.release(replica)
                tried.append(replica)
                pinned = route is not None and route.pinned is not None
                if pinned or len(tried) > 1:
                    raise
                log.warning(
                    "replica %d unreachable (%s): retrying once elsewhere", replica.index, type(err).__name__
                )

    async def engine_metrics(self) -> bytes:
        """Every routable replica's /metrics merged with a `replica` label. One replica keeps the
        engine's text as it is (nothing to tell apart)."""
        if len(self.fleet.replicas) == 1:
            return await super().engine_metrics()
        from neuronserve.front.metrics import engine_metrics  # noqa: PLC0415
        from neuronserve.front.replica_metrics import merge  # noqa: PLC0415

        live = [r for r in self.fleet.replicas if routable(r)]
        texts = await asyncio.gather(*(engine_metrics(self.session(), r.base_url) for r in live))
        merged = merge({r.index: t.decode("utf-8", "replace") for r, t in zip(live, texts, strict=True)})
        return merged.encode()

    def replica_counts(self) -> bytes:
        """The front's own per-replica counts (routed, outstanding, restarts): read live on every
        scrape, unlike the engines' text, which /metrics caches (metrics.Scrapes)."""
        if len(self.fleet.replicas) == 1:
            return b""
        from neuronserve.front.replica_metrics import counts_of, front_counts  # noqa: PLC0415

        rows = self.counts() if self.counts is not None else counts_of(self.fleet.replicas)
        return front_counts(rows).encode()

    def _choose(self, route: RequestRoute | None, tried: list[Replica]) -> Replica:
        if route is not None and route.pinned is not None:
            if routable(route.pinned):
                return route.pinned
            raise NotReady(f"the session's replica {route.pinned.index} is not ready; retry later")
        replica = self.pick(tried)
        if replica is None:
            other = " other" if tried else ""
            raise NotReady(f"no{other} engine replica is ready; retry later")
        return replica


class ReplicaScope:
    """ASGI wrapper: a RequestRoute per request, released when the response ends; the replica header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = RequestRoute()
        token = _ROUTE.set(route)

        async def send_tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                tag = replica_tag(route)
                if tag is not None:
                    message = {**message, "headers": [*message.get("headers", ()), tag]}
            await send(message)

        try:
            await self.app(scope, receive, send_tagged)
        finally:
            leave_route(route)
            _ROUTE.reset(token)
