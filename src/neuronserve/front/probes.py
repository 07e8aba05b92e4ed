"""The answers of /ping and /live, from state alone: one function for the route (front/handlers.py)
and for the probe door (serve/probedoor.py), which answers them from its own thread while the event
loop is busy. Both must give the same bytes, so both build them here.

Why nothing here awaits or touches the loop: the door calls it from another thread. It reads the
state's fields and verdicts, which are plain values or callables that read plain values
(front/state.py, serve/watchdog.py, serve/lifecycle.py `Supervisor.verdict`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

from neuronserve.front.state import ServerState


def ping(state: ServerState) -> Response:
    """SageMaker's /ping: 200 with no body when READY and the engine answers its health check, else 503
    with the phase and why (front/state.py `ping_body`)."""
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
