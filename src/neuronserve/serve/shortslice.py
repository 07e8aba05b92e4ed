"""Ask the kernel for a short scheduling slice for the calling thread (the door's process).

Why: with the front saturating its core and the engine and clients the others, a probe's wait is
mostly the door's process waiting for a core once its accept wakes it. Linux's EEVDF scheduler
(6.6 on) picks the eligible task with the earliest virtual deadline, and a task's deadline is its
slice ahead of it, so a task that asks for a short slice is run sooner when it wakes (Linux
commit 857b158dc5e8, "sched/eevdf: Use sched_attr::sched_runtime to set request/slice suggestion",
and its parent, "sched/eevdf: Allow shorter slices to wakeup-preempt", both in 6.12).
The slice is asked with sched_setattr(2) under SCHED_OTHER at the thread's own nice value, which
needs no privilege; it is clamped to 0.1-100 ms by the kernel. The door runs well under 0.1 ms per
probe, so the smallest slice costs it nothing. Measured on this machine (kernel 6.18):
docs/PERFORMANCE.md, "`/ping` from the door's process".

On a kernel before 6.12 the request is accepted and has no effect; where the call is refused or
unknown (another architecture, seccomp), nothing changes either: this is a best-effort hint, never a
reason to fail.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct

log = logging.getLogger("neuronserve.serve")

SLICE_NS = 100_000  # the kernel's smallest
SCHED_OTHER = 0
# sched_setattr's number per architecture (Linux's syscall tables: arch/x86/entry/syscalls/syscall_64.tbl,
# include/uapi/asm-generic/unistd.h)
SYSCALL = {"x86_64": 314, "aarch64": 274}
# struct sched_attr (include/uapi/linux/sched/types.h), SCHED_ATTR_SIZE_VER1: 56 bytes
ATTR = struct.Struct("<IIQiIQQQII")


def ask(slice_ns: int = SLICE_NS) -> bool:
    """Ask for `slice_ns` for the calling thread; whether the kernel accepted the call."""
    number = SYSCALL.get(os.uname().machine)
    if number is None:
        return False
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    attr = ctypes.create_string_buffer(ATTR.pack(ATTR.size, SCHED_OTHER, 0, nice, 0, slice_ns, 0, 0, 0, 0))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        accepted = libc.syscall(number, 0, attr, 0) == 0
    except (OSError, AttributeError):
        return False
    if not accepted:
        log.debug("no short scheduling slice: sched_setattr failed, errno %d", ctypes.get_errno())
    return bool(accepted)
