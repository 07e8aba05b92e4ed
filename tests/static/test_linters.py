"""hadolint on both Dockerfiles and shellcheck on every shell script the image and its tests use."""

from __future__ import annotations

import subprocess

import pytest
from static_support import DOCKERFILES, SHELL_SCRIPTS, tool

pytestmark = pytest.mark.static


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_hadolint(kind: str) -> None:
    result = subprocess.run(
        [tool("hadolint"), "--no-color", "--failure-threshold", "info", str(DOCKERFILES[kind])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck() -> None:
    scripts = [str(p) for p in SHELL_SCRIPTS]
    result = subprocess.run([tool("shellcheck"), *scripts], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
