"""One real `neuronserve serve --device neuron` whose engine is the synthetic one (bench/synth_engine).

The mechanism of the tests' stand-in server (tests/support/standin_server.py): a Neuron plan renders
`python -m vllm.entrypoints.openai.api_server --host ... --port ...`, and with bench/synth_engine first
on PYTHONPATH that module is the synthetic server. The model directory holds only a config.json
(Llama-3.2-1B's, tests/data/models): the plan reads nothing else, and nothing is compiled. The engine
port is fixed by NEURONSERVE_ENGINE_PORT, so the benchmark can call the engine directly.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.ceiling import procs
from tests.support.server import free_port
from tests.support.standin_server import SERVER_PREFIXES

REPO = Path(__file__).resolve().parents[2]
SYNTH = REPO / "bench" / "synth_engine"
CONFIG = REPO / "tests" / "data" / "models" / "Llama-3.2-1B" / "config.json"
PROFILED = REPO / "bench" / "ceiling" / "profiled_serve.py"
# Besides the tests' prefixes: LMI's OPTION_* would switch the dialect, SYNTH_* is set per serve.
DROP = (*SERVER_PREFIXES, "OPTION_", "SYNTH_")


@dataclass
class Options:
    dialect: str = "tgi"  # NEURONSERVE_GENERATE_DIALECT
    workers: int | None = None  # NEURONSERVE_FRONT_WORKERS (not set when None)
    engine_procs: int = 1  # SYNTH_PROCS
    engine_access_log: bool = True  # as vLLM with the plan's argv (SYNTH_ACCESS_LOG)
    engine_step_s: float = 0.0  # SYNTH_STEP_S: 0 = as fast as it can
    engine_nice: int | None = None  # NEURONSERVE_ENGINE_NICE (the default when None)
    cprofile_out: Path | None = None  # run the front under bench/ceiling/profiled_serve.py


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    port: int
    engine_port: int
    log_path: Path
    model: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def environment(tmp: Path, port: int, engine_port: int, opts: Options) -> dict[str, str]:
    model = tmp / "model"
    model.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CONFIG, model / "config.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROP)}
    env.update(
        # the caller's path after ours: packages installed with `pip --target` on a bare host still import
        PYTHONPATH=os.pathsep.join(
            p for p in [str(SYNTH), str(REPO / "src"), os.environ.get("PYTHONPATH")] if p
        ),
        SM_VLLM_MODEL=str(model),
        SM_VLLM_MAX_MODEL_LEN="4096",
        SM_VLLM_MAX_NUM_SEQS="64",
        SM_VLLM_TENSOR_PARALLEL_SIZE="1",
        NEURON_RT_VISIBLE_CORES="0",
        NEURONSERVE_WORK_DIR=str(tmp / "work"),
        SAGEMAKER_BIND_TO_PORT=str(port),
        NEURONSERVE_ENGINE_PORT=str(engine_port),
        NEURONSERVE_GENERATE_DIALECT=opts.dialect,
        SYNTH_PROCS=str(opts.engine_procs),
        SYNTH_ACCESS_LOG="1" if opts.engine_access_log else "0",
        SYNTH_STEP_S=str(opts.engine_step_s),
    )
    if opts.workers is not None:
        env["NEURONSERVE_FRONT_WORKERS"] = str(opts.workers)
    if opts.engine_nice is not None:
        env["NEURONSERVE_ENGINE_NICE"] = str(opts.engine_nice)
    return env


def _get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _wait_ready(serve: Serve, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if serve.proc.poll() is not None:
            raise SystemExit(f"neuronserve serve exited ({serve.proc.returncode}):\n{serve.log_tail()}")
        try:
            if _get(serve.port, "/ping")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    serve.stop()
    raise SystemExit(f"neuronserve serve was not READY in {timeout_s:.0f} s:\n{serve.log_tail()}")


def start(tmp: Path, name: str, opts: Options, timeout_s: float = 90.0) -> Serve:
    """A READY serve on free ports; SystemExit with its log when it is not READY in time."""
    tmp = tmp / name
    tmp.mkdir(parents=True, exist_ok=True)
    port, engine_port = free_port(), free_port()
    env = environment(tmp, port, engine_port, opts)
    if opts.cprofile_out is not None:
        argv = [sys.executable, str(PROFILED), str(opts.cprofile_out), "serve", "--device", "neuron"]
    else:
        argv = [sys.executable, "-m", "neuronserve", "serve", "--device", "neuron"]
    log_path = tmp / "serve.log"
    with log_path.open("ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(tmp))
    serve = Serve(proc, port, engine_port, log_path, env["SM_VLLM_MODEL"])
    t0 = time.monotonic()
    _wait_ready(serve, timeout_s)
    status, body = _get(engine_port, "/v1/models")
    if status != 200 or serve.model.encode() not in body:
        serve.stop()
        raise SystemExit(f"the synthetic engine on :{engine_port} is not the one serve started ({status})")
    roles = procs.split(serve.pid)
    print(
        f"  serve {name}: READY in {time.monotonic() - t0:.1f} s, front :{port} (pids "
        f"{sorted(roles.front)}), engine :{engine_port} (pids {sorted(roles.engine)})",
        flush=True,
    )
    return serve
