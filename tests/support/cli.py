"""`python -m neuronserve ARGS` as a subprocess with exactly the environment a test gives it: the real CLI,
as a container's entrypoint or a user runs it, read from outside (exit status, stdout, stderr)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.server import REPO


def neuronserve(
    args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
