"""The `serve` script really run, with a recording `python3` first on PATH: the argv it execs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from static_support import ROOT

pytestmark = pytest.mark.static


@pytest.fixture
def recorder(tmp_path: Path) -> Path:
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$$" "$@"\n')
    fake.chmod(0o755)
    return tmp_path


def run_serve(recorder: Path, *args: str) -> tuple[list[str], int]:
    env = {"PATH": f"{recorder}:{os.environ['PATH']}"}
    result = subprocess.run(
        [str(ROOT / "entrypoint" / "serve"), *args], env=env, capture_output=True, text=True, check=True
    )
    pid, *argv = result.stdout.splitlines()
    return argv, int(pid)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), ["-m", "neuronserve", "serve"]),
        (("serve",), ["-m", "neuronserve", "serve"]),
        (("serve", "--", "--enforce-eager"), ["-m", "neuronserve", "serve", "--", "--enforce-eager"]),
        (("plan", "--json"), ["-m", "neuronserve", "plan", "--json"]),
        (("serve", "plan", "--json"), ["-m", "neuronserve", "plan", "--json"]),
        # the args of the EKS manifests' containers (deploy/k8s/pod.py): the stage initContainer, the Job
        (("stage",), ["-m", "neuronserve", "stage"]),
        (("compile",), ["-m", "neuronserve", "compile"]),
        (("--version",), ["-m", "neuronserve", "--version"]),
        (("--port", "9000"), ["-m", "neuronserve", "serve", "--port", "9000"]),
        (("arg with space",), ["-m", "neuronserve", "serve", "arg with space"]),
    ],
)
def test_serve_maps_arguments(recorder: Path, args: tuple[str, ...], expected: list[str]) -> None:
    argv, _ = run_serve(recorder, *args)
    assert argv == expected


def test_serve_execs_so_neuronserve_keeps_the_pid(recorder: Path) -> None:
    # With exec, python3 replaces the shell: the pid it reports is the one subprocess started.
    env = {"PATH": f"{recorder}:{os.environ['PATH']}"}
    proc = subprocess.Popen([str(ROOT / "entrypoint" / "serve")], env=env, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=10)
    assert int(out.splitlines()[0]) == proc.pid
