"""A stager killed mid-download, as a pod is: the child process, its SIGKILL once it reached the point a
test wants, and what a resume then fetched again."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

from tests.s3.conftest import wait_for
from tests.support.server import REPO


def kill_when(module_args: list[str], env: dict[str, str], ready: Callable[[], bool], timeout: float) -> None:
    """`python -m MODULE ARGS` with this environment, `env` and the checkout's code, SIGKILLed once
    `ready()` (which must hold within `timeout` s: else the child's stderr, if it died, says why)."""
    with subprocess.Popen(
        [sys.executable, "-m", *module_args],
        env={**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *sys.path])},
        cwd=REPO,
        stderr=subprocess.PIPE,
    ) as child:
        try:
            if not wait_for(ready, timeout):
                raise AssertionError(
                    child.communicate()[1].decode() if child.poll() is not None else "no progress"
                )
        finally:
            child.kill()  # SIGKILL, as a pod is killed (a no-op once it exited); the with waits for it


def fetched_again(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The GETs per key between two counts, of the keys that had any."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
