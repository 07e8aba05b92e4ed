"""The answers of /ping and /live, from state alone (front/handlers.py's routes).

Why from state, on the event loop that serves every request: a loop that cannot answer fails its
probes by timeout, which is what SageMaker (/ping), ECS and a kubelet act on; nothing here awaits the
engine. It reads the state's fields and verdicts, which are plain values or callables that read plain
values (front/state.py, serve/watchdog.py, serve/lifecycle.py `Supervisor.verdict`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

from neuronserve.front.state import ServerState


def ping(state: ServerState) -> Response:
    """SageMaker's /ping: 200 with no body when READY, the engine answers its health check and the event
    loop runs on time, else 503 with the phase and why (front/state.py `ping_body`)."""
    if state.ready():
        return Response(status_code=200)
    return JSONResponse(state.ping_body(), status_code=503)


def live(state: ServerState) -> Response:
    """/live: 200 while every liveness check passes, else 503 naming the failed checks."""
    ok, body = state.live()
    return JSONResponse(body, status_code=200 if ok else 503)


def answer(state: ServerState, path: str) -> Response:
    """The response for `path`: "/ping", else /live's."""
    return ping(state) if path == "/ping" else live(state)
