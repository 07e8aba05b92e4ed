"""A test-only route that blocks the event loop, composed in front of the real front: a synchronous
sleep, as a wedged call or a saturated loop would hold it (tests/integration/serve/test_watchdog.py)."""

from __future__ import annotations

import time
from typing import Any

BLOCK_PATH = "/test-only/block"


def blocking(app: Any, seconds: float) -> Any:
    """`app`, with BLOCK_PATH sleeping `seconds` on the loop itself, then answering 204."""

    async def composed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == BLOCK_PATH:
            time.sleep(seconds)  # blocks the event loop: no await, nothing else runs
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return composed
