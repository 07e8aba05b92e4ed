"""A stream's CPU per chunk in the front's process, with and without the chunk pipe (not a test).

Runs a real uvicorn with the front's connection protocol (serve/connections.py) on 127.0.0.1 and an
app that streams N chunks through front/streaming.py's Stream behind the two `send` wrappers every
engine stream crosses (the gate's `_Exchange`, and a start-only tag as the replica scope's). The client
is curl, reading to /dev/null. `/send` takes the pipe out of the scope, so every chunk crosses `send`;
`/pipe` leaves it (serve/chunkpipe.py). Prints the server's CPU per chunk for each, alternating.

    PYTHONPATH=src:. python bench/bench_chunkpipe.py [ROUNDS]

docs/PERFORMANCE.md ("A stream's middle chunks") has the results.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import AsyncGenerator
from typing import Any

import uvicorn
import uvloop

from neuronserve.front.gate import _Exchange
from neuronserve.front.streaming import PIPE_KEY, Stream
from neuronserve.serve.connections import ConnectionLimits, protocol_class

N = 200_000
CHUNK = b"data: " + b"x" * 150 + b"\n\n"
cpu: dict[str, list[float]] = {}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["path"] != "/pipe":
        scope["extensions"].pop(PIPE_KEY, None)
    exchange = _Exchange(send, b"id")

    async def tagged(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (b"x-replica", b"0")]}
        await exchange.send(message)

    async def chunks() -> AsyncGenerator[bytes, None]:
        for i in range(N):
            yield CHUNK
            if i % 8 == 0:
                await asyncio.sleep(0)  # the loop turns, as between engine reads

    start = time.process_time()
    await Stream(chunks(), media_type="text/event-stream")(scope, receive, tagged)
    cpu.setdefault(scope["path"], []).append((time.process_time() - start) / N * 1e6)


async def main(rounds: int) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app, http=protocol_class(ConnectionLimits()), lifespan="off", log_config=None, access_log=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    port = sock.getsockname()[1]
    for _ in range(rounds):
        for path in ("/send", "/pipe"):
            curl = await asyncio.create_subprocess_exec("curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}{path}")
            await curl.wait()
    server.should_exit = True
    await task
    for path, values in cpu.items():
        print(f"{path}: {' '.join(f'{v:.2f}' for v in values)} us/chunk (min {min(values):.2f})")


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
