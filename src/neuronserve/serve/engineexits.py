"""Which engine processes have exited, seen through pidfds (pidfd_open(2), Linux 5.3+): stdlib only, for
the front's publishing thread (serve/doorprocess.py: a wait that ends when an engine exits) and the
door's process (serve/doorchild.py: a probe answered from bytes built while an engine that has since
exited was alive goes to the front's loop instead).

Why pidfds: the door's process is not the engines' parent, so it cannot waitpid them, and a pid alone
can be reused; a pidfd names the process itself and turns readable when it exits (man 2 pidfd_open,
"the file descriptor becomes readable when the process terminates"). Where pidfd_open is missing the
pid is not followed: its death waits for the next publication, as before.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterable


class EngineExits:
    """pidfds of the pids it is told to follow; a process seen exited is remembered, not followed again
    (its pid would wake every wait)."""

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}  # pid -> pidfd
        self._exited: set[int] = set()
        self._unwatched: set[int] = set()  # no pidfd to be had for it (not Linux 5.3+, say)

    def follow(self, pids: Iterable[int]) -> None:
        wanted = set(pids)
        for pid in set(self._fds) - wanted:
            os.close(self._fds.pop(pid))
        for pid in wanted - set(self._fds) - self._exited - self._unwatched:
            try:
                self._fds[pid] = os.pidfd_open(pid)
            except ProcessLookupError:  # gone already
                self._exited.add(pid)
            except OSError:
                self._unwatched.add(pid)

    def fds(self) -> list[int]:
        return list(self._fds.values())

    def exited(self, readable: Iterable[int]) -> None:
        """Mark the processes whose pidfds are among `readable` as exited."""
        ready = set(readable)
        for pid, fd in list(self._fds.items()):
            if fd in ready:
                os.close(self._fds.pop(pid))
                self._exited.add(pid)

    def gone(self, pids: Iterable[int]) -> bool:
        """Whether any of `pids` has exited (followed from now on; a poll that does not wait)."""
        listed = tuple(pids)
        self.follow(listed)
        if self._fds:
            readable, _, _ = select.select(self.fds(), [], [], 0)
            self.exited(readable)
        return any(pid in self._exited for pid in listed)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
