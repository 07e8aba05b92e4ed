"""The short scheduling slice the door's process asks for (serve/shortslice.py): the kernel records it
for the calling thread only (read back from /proc, where this kernel shows a task's slice)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from neuronserve.serve import shortslice


def _slice_of(tid: int) -> int | None:
    for line in Path(f"/proc/self/task/{tid}/sched").read_text().splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return None


def test_the_calling_thread_gets_the_slice_and_the_others_keep_theirs() -> None:
    if os.uname().machine not in shortslice.SYSCALL or _slice_of(threading.get_native_id()) is None:
        pytest.skip(
            "this kernel does not show a task's slice (before EEVDF) or the architecture is not known"
        )
    main_before = _slice_of(threading.get_native_id())
    seen: dict[str, object] = {}

    def asker() -> None:
        seen["accepted"] = shortslice.ask(250_000)
        seen["slice"] = _slice_of(threading.get_native_id())

    thread = threading.Thread(target=asker)
    thread.start()
    thread.join()
    assert seen == {"accepted": True, "slice": 250_000}
    assert _slice_of(threading.get_native_id()) == main_before
