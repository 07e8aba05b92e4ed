"""A real event-loop stall seen by /live: the real front (app, gate) on uvicorn with the server's own
config and connection guards (serve/listener.py), the real loop watchdog (serve/watchdog.py) wired to
the state as serve() wires it, and one test-only route composed in front of the gate that blocks the
loop with a synchronous sleep, as a wedged call would. A /live sent during the stall is answered once
the loop runs again, 503 on the loop check; once the stall is older than the bound, 200 again.

The server's phases, a stalled stage and a dead engine through `neuronserve serve` itself:
tests/integration/serve/test_live.py.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from tests.support.blocking import blocking

from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.proxy import make_client
from neuronserve.front.state import Phase, ServerState
from neuronserve.serve import listener
from neuronserve.serve.connections import ConnectionLimits
from neuronserve.serve.watchdog import LoopWatchdog
from neuronserve.types import ServeOptions

pytestmark = pytest.mark.integration  # uvicorn on a real port

BOUND_S = 1.0
BLOCK_S = 2.5


Stall = Callable[[str], dict[str, httpx.Response]]


@pytest.fixture
def state() -> ServerState:
    state = ServerState()
    state.move(Phase.LOADING)
    return state


@pytest.fixture
def stall(state: ServerState) -> Stall:
    """`stall(route)`: the server on `state` with the watchdog wired, and its answers to `route` before
    ("before"), during ("during", with how long it "waited") and after ("after") a BLOCK_S stall of its
    loop by the test-only route ("block")."""

    def run_stall(route: str) -> dict[str, httpx.Response]:
        watchdog = LoopWatchdog(BOUND_S)
        state.loop_verdict = watchdog.verdict
        opts = ServeOptions(host="127.0.0.1", port=0)
        engine = make_client("http://127.0.0.1:9", 5.0, 8)
        app = blocking(Gate(create_app(state, opts, engine), state, 4), BLOCK_S)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        answers: dict[str, httpx.Response] = {}

        def client() -> None:
            with httpx.Client(base_url=url, timeout=30) as http:
                answers["before"] = http.get(route)
                block = lambda: answers.setdefault("block", http.get("/test-only/block"))  # noqa: E731
                blocker = threading.Thread(target=block)
                blocker.start()
                time.sleep(0.5)  # the loop is blocked now
                with httpx.Client(base_url=url, timeout=30) as other:
                    sent = time.monotonic()
                    answers["during"] = other.get(route)  # answered when the loop runs again
                    answers["waited"] = httpx.Response(200, text=f"{time.monotonic() - sent:.2f}")
                    blocker.join()
                    time.sleep(BOUND_S + 0.6)
                    answers["after"] = other.get(route)

        async def run() -> None:
            import uvicorn

            server = uvicorn.Server(listener.uvicorn_config(app, opts, ConnectionLimits()))
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started:
                await asyncio.sleep(0.01)
            watchdog.start(asyncio.get_running_loop())
            thread = threading.Thread(target=client)
            thread.start()
            while thread.is_alive():
                await asyncio.sleep(0.05)
            server.should_exit = True
            await task

        try:
            asyncio.run(run())
        finally:
            watchdog.stop()
            asyncio.run(engine.aclose())
        return answers

    return run_stall


def test_a_stalled_loop_is_503_on_the_loop_check_then_live_again(stall: Stall) -> None:
    answers = stall("/live")
    assert answers["before"].status_code == 200 and answers["before"].json()["live"] is True
    assert answers["block"].status_code == 204
    during = answers["during"]
    assert float(answers["waited"].text) > 1.0  # it really waited for the blocked loop
    assert during.status_code == 503, during.text
    body = during.json()
    assert body["failed"] == ["loop"] and body["phase"] == "LOADING"
    assert body["checks"]["loop"].startswith(("the event loop has not run for", "the event loop stalled for"))
    assert "NEURONSERVE_LIVE_LOOP_STALL_S=1" in body["checks"]["loop"]
    assert answers["after"].status_code == 200, answers["after"].text


def test_ping_is_503_naming_the_stall_then_200_again(state: ServerState, stall: Stall) -> None:
    """READY, engine healthy: a /ping sent during a stall is answered when the loop runs again, 503
    with the watchdog's reason (the loop serves requests late: the load balancer should know); once
    the stall is older than the bound, 200 again. Without the loop check it was a 200."""
    state.set_engine_health(True)
    state.move(Phase.READY)
    answers = stall("/ping")
    assert answers["before"].status_code == 200
    during = answers["during"]
    assert during.status_code == 503, during.text
    body = during.json()
    assert body["phase"] == "READY" and body["detail"] == body["loop"], body
    assert body["loop"].startswith(("the event loop has not run for", "the event loop stalled for"))
    assert "NEURONSERVE_LIVE_LOOP_STALL_S=1" in body["loop"]
    assert answers["after"].status_code == 200, answers["after"].text
