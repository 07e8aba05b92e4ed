"""Blocking work for the event loop, on daemon threads: staging, publishing (serve and compile).

Why not `asyncio.to_thread`: the loop's default executor is joined when the loop closes, so a SIGTERM
during a long download or upload would wait for it (SageMaker kills 30 s after SIGTERM, Kubernetes
after the grace period). A daemon thread is simply abandoned when the process exits; what it wrote is
made safe by the stager's own rules (a temp dir renamed when complete, a manifest written last).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_daemon_thread(fn: Callable[..., T], *args: Any, name: str = "stage") -> asyncio.Future[T]:
    """Run `fn` on a daemon thread (named `name`); its result or exception arrives as a future on this
    loop (the module docstring says why not `asyncio.to_thread`)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def target() -> None:
        outcome: tuple[bool, Any]
        try:
            outcome = (True, fn(*args))
        except BaseException as err:  # handed to the loop, which re-raises it in the awaiting task
            outcome = (False, err)
        with contextlib.suppress(RuntimeError):  # the loop closed first: nobody is waiting
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future
