"""How a front process runs its server coroutine: the collector settled, then uvloop's loop when it
is installed (uvicorn[standard] picks it the same way), else asyncio's own.

One place for both kinds of front process, the supervisor (commands/serve.py) and each front worker
(serve/worker.py), so they never run on different loops or collector settings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from neuronserve.front.gctune import settle

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is importable; None: asyncio's default."""
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to its end, once everything is imported (front/gctune.py), on the loop above."""
    settle()
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
