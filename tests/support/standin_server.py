"""The real `neuronserve serve` (real uvicorn, real protocol, real gate) in front of the stand-in engine.

For tests of the front's connection handling: what they check happens before any engine work, so
the stand-in (tests/support/standin_engine, a small HTTP server answering every completion with one
token) replaces vLLM, and the server is ready in seconds without the engine lock. The plan is a
Neuron plan (the stand-in is what `python -m vllm.entrypoints.openai.api_server` runs with the
stand-in first on PYTHONPATH); nothing here needs a Neuron device.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from tests.support.server import REPO, free_port
from tests.support.tiny_model import tiny_model_dir

STANDIN = REPO / "tests" / "support" / "standin_engine"


@dataclass
class StandinServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _wait_ready(server: StandinServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.proc.poll() is None, server.log()[-3000:]
        try:
            if httpx.get(f"{server.url}/ping", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not ready in {timeout_s} s:\n{server.log()[-3000:]}")


# The variables of the caller's environment that would configure the server under test.
SERVER_PREFIXES = ("SM_VLLM_", "SAGEMAKER_", "NEURON", "VLLM_")


def standin_env(tmp: Path, port: int, *, drop: tuple[str, ...] = (), **settings: str) -> dict[str, str]:
    """The environment of `neuronserve serve` on `port` before the stand-in engine with the tiny model:
    the caller's environment less what would configure the server (and the `drop` prefixes), then the
    tiny model's settings, then `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SERVER_PREFIXES + drop)}
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO / "src")]),
        SM_VLLM_MODEL=str(tiny_model_dir()),
        SM_VLLM_MAX_MODEL_LEN="512",
        SM_VLLM_MAX_NUM_SEQS="4",
        SM_VLLM_TENSOR_PARALLEL_SIZE="1",
        NEURON_RT_VISIBLE_CORES="0",
        NEURONSERVE_WORK_DIR=str(tmp / "work"),
        SAGEMAKER_BIND_TO_PORT=str(port),
        NEURONSERVE_ENGINE_PORT=str(free_port()),
        STANDIN_EVENTS=str(tmp / "standin-events.jsonl"),
        STANDIN_WRITE_S="0",
    )
    env.update(settings)
    return env


def standin_events(path: str | Path) -> list[dict[str, Any]]:
    """What the stand-in engine recorded in its $STANDIN_EVENTS file, one JSON line an event ([] before
    an engine started)."""
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@contextlib.contextmanager
def standin_server(
    tmp: Path, *, nofile_soft: int | None = None, ready: bool = True, **settings: str
) -> Iterator[StandinServer]:
    """The server with `settings` (NEURONSERVE_* etc.) on a free port; stopped (SIGTERM) afterwards.
    `nofile_soft`: the open-file soft limit the server starts with (as a container's 1024 would be).
    `ready=False`: handed over as soon as it runs, not once /ping is 200."""
    port = free_port()
    env = standin_env(tmp, port, **settings)
    log_path = tmp / "serve.log"
    # the shell lowers the soft limit, then becomes the server (no preexec_fn: unsafe with threads)
    lowered = ["bash", "-c", f'ulimit -Sn {nofile_soft} && exec "$@"', "bash"] if nofile_soft else []
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            [*lowered, sys.executable, "-m", "neuronserve", "serve", "--device", "neuron"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(tmp),
        )
    server = StandinServer(proc, port, log_path)
    try:
        if ready:
            _wait_ready(server, 90.0)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
