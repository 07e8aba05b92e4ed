"""Sticky sessions by SageMaker's stateful-session contract: a session lives on one replica.

Contract (aws/model-hosting-container-standards, docs/sagemaker/04_sticky_session_routing.md and
python/model_hosting_container_standards/sagemaker/sessions/transform.py, create_session.py,
close_session.py), enabled by SAGEMAKER_ENABLE_STATEFUL_SESSIONS=true:
- `X-Amzn-SageMaker-Session-Id: NEW_SESSION` with body `{"requestType": "NEW_SESSION"}` opens a session;
  the 200 answer carries `X-Amzn-SageMaker-New-Session-Id: <id>; Expires=<UTC time>`. The id matches
  `^[a-zA-Z0-9](-*[a-zA-Z0-9])*$` and the header `...; Expires=YYYY-MM-DDTHH:MM:SSZ` (the SageMaker
  runtime API's SessionIdHeader / NewSessionResponseHeader patterns).
- A request carrying the id goes to the session's replica (its prefix cache is warm there).
- Body `{"requestType": "CLOSE"}` with the id closes it; the answer carries
  `X-Amzn-SageMaker-Closed-Session-Id: <id>`.
- An unknown or expired id, or a requestType other than those two, is a 400 (the one error shape).
- Lifetime SAGEMAKER_SESSIONS_EXPIRATION seconds (default 1200), counted from creation.
Sessions never outlive their replica: when its engine dies, its sessions close (the new engine has none
of their cache, and a client must learn that instead of silently losing its state).

The id names its replica, so every front process routes a session alike; which ids are open lives in
sessionstore.py's ledger (one slot per open session, shared by the front processes).
"""

from __future__ import annotations

import json
import logging
import time

from neuronserve.front.errors import BadRequest, FrontError, NotReady, Overloaded, error_bytes
from neuronserve.front.gate import ASGIApp, Message, Receive, Scope, Send, declared_over
from neuronserve.front.router import Fleet, Router, current_route
from neuronserve.front.schema import TooDeep, loads
from neuronserve.front.sessionstore import SessionsFull, SessionStore

__all__ = ["SessionScope", "SessionStore", "SessionsFull", "expires_text"]

log = logging.getLogger("neuronserve.front")

SESSION_HEADER = b"x-amzn-sagemaker-session-id"
NEW_SESSION_HEADER = b"x-amzn-sagemaker-new-session-id"
CLOSED_SESSION_HEADER = b"x-amzn-sagemaker-closed-session-id"
NEW_SESSION = "NEW_SESSION"
CLOSE = "CLOSE"


def expires_text(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


class SessionScope:
    """ASGI wrapper for POST /invocations with a session header: open, close, or pin to a replica."""

    def __init__(self, app: ASGIApp, store: SessionStore, router: Router, pool: Fleet, limit: int) -> None:
        self.app = app
        self.store = store
        self.router = router
        self.pool = pool
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid = _header(scope, SESSION_HEADER) if scope["type"] == "http" else None
        ours = scope["path"] == "/invocations" and scope["method"] == "POST"
        # a declared body over the limit goes on unread: the route answers 413 from the header
        if sid is None or not ours or declared_over(scope, self.limit):
            await self.app(scope, receive, send)
            return
        body, complete = await _read(receive, self.limit)
        if not complete:  # over the payload limit: the route answers 413
            await self.app(scope, _replay(body, receive, more=True), send)
            return
        try:
            kind = _request_type(body)
        except TooDeep as err:
            await _error(send, BadRequest(f"the session body is {err}"))
            return
        if kind == NEW_SESSION:
            await self._open(send)
        elif kind == CLOSE:
            if self.store.close(sid):
                log.info("session %s closed", sid)
                await _answer(send, 200, b'{"closed": true}', [(CLOSED_SESSION_HEADER, sid.encode())])
            else:
                await _error(send, BadRequest(f"unknown or expired session id {sid!r}"))
        elif kind is not None:
            await _error(send, BadRequest(f"requestType must be {NEW_SESSION} or {CLOSE}, got {kind!r}"))
        elif sid == NEW_SESSION:
            await _error(send, BadRequest('a new session needs the body {"requestType": "NEW_SESSION"}'))
        else:
            index = self.store.lookup(sid)
            route = current_route()
            if index is None:
                await _error(send, BadRequest(f"unknown or expired session id {sid!r}"))
                return
            if route is not None:
                route.pinned = self.pool.replicas[index]
            await self.app(scope, _replay(body, receive), send)

    async def _open(self, send: Send) -> None:
        replica = self.router.pick([])
        if replica is None:
            await _error(send, NotReady("no engine replica is ready to hold a session; retry later"))
            return
        try:
            sid, expires = self.store.open(replica.index)
        except SessionsFull as err:
            await _error(send, Overloaded(str(err)), [(b"retry-after", b"1")])
            return
        route = current_route()
        if route is not None:
            route.pinned = replica
        log.info("session %s opened on replica %d", sid, replica.index)
        value = f"{sid}; Expires={expires_text(expires)}"
        body = json.dumps({"session_id": sid, "expires": expires_text(expires)}).encode()
        await _answer(send, 200, body, [(NEW_SESSION_HEADER, value.encode())])


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1").strip())
    return None


def _request_type(body: bytes) -> str | None:
    if b"requestType" not in body:
        return None
    try:
        parsed = loads(body)
    except TooDeep:
        raise
    except ValueError:
        return None
    value = parsed.get("requestType") if isinstance(parsed, dict) else None
    return None if value is None else str(value)


async def _read(receive: Receive, limit: int) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), True
        chunk = message.get("body", b"")
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts), not message.get("more_body", False) and size <= limit
        if not message.get("more_body", False):
            return b"".join(parts), True


def _replay(body: bytes, receive: Receive, more: bool = False) -> Receive:
    """The body already read, as one message, then the real channel (for disconnects)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return again


async def _answer(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, err: FrontError, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await _answer(send, err.status, error_bytes(err.status, err.message), extra or [])
