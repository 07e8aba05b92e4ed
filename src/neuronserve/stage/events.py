"""Compile-cache events (hit, miss, publish_ok, publish_failed, corrupt) for whoever counts them.

Why a tiny observer instead of return values: publishing runs in the background and must never
raise, and a corrupt cache entry is handled (as a miss) deep inside staging; the front's metrics
still need to know. Staging does not import the front: the serve lifecycle subscribes here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("neuronserve.stage")
_lock = threading.Lock()
_listeners: list[Callable[[str], None]] = []


def subscribe(listener: Callable[[str], None]) -> Callable[[], None]:
    """Add `listener`; returns the function that removes it."""
    with _lock:
        _listeners.append(listener)

    def unsubscribe() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unsubscribe


def emit(event: str) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # a counter must never break staging
            log.exception("cache event listener failed")
