"""scripts/serve-local as the README's first command, run as a user runs it (issue 29, item 9):

- a hub model the machine cannot get is one line and exit 2, not vLLM's traceback a minute later
  (HF_HUB_OFFLINE is no longer forced on a model the user chose);
- the demo listens on 127.0.0.1 only, as the README shows, and its first line says the URL (the JSON
  plan comes after it);
- Ctrl-C (SIGINT) and SIGTERM stop it with exit 0 and no traceback, each on a fresh real engine.

Its own engine: the shared server is stopped first (two engines do not fit the 2-core machine).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.checkout import bootstrap_env
from tests.support.server import ServerPool, free_port

pytestmark = [pytest.mark.integration, pytest.mark.after_shared_server(8)]

ROOT = Path(__file__).resolve().parents[2]
SERVE_LOCAL = str(ROOT / "scripts" / "serve-local")
HUB_ID = "Qwen/Qwen2.5-0.5B-Instruct"


@pytest.fixture(scope="module", autouse=True)
def _no_shared_server(server_pool: ServerPool) -> Iterator[None]:
    server_pool.close()
    yield


def _hub_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = bootstrap_env({"HF_HOME": str(tmp_path / "hf"), "SM_VLLM_MODEL": HUB_ID})
    env.pop("HF_HUB_OFFLINE", None)  # the test runner's: a user who names a hub model has not set it
    return {**env, **extra}


@pytest.mark.parametrize("offline", [False, True])
def test_a_hub_model_out_of_reach_is_one_line(tmp_path: Path, offline: bool) -> None:
    extra = {"HF_HUB_OFFLINE": "1"} if offline else {"HF_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    started = time.monotonic()
    out = subprocess.run(
        [SERVE_LOCAL], env=_hub_env(tmp_path, **extra), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert lines and lines[-1].startswith(f"serve-local: error: SM_VLLM_MODEL={HUB_ID} "), out.stderr
    assert ("HF_HUB_OFFLINE is set" in lines[-1]) is offline
    assert "Traceback" not in out.stderr and len(lines) <= 3, out.stderr
    assert time.monotonic() - started < 60  # before any engine starts


def _listening(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on `port` (/proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def _start(tmp_path: Path, name: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    env = bootstrap_env(
        {
            "SAGEMAKER_BIND_TO_PORT": str(port),
            "NEURONSERVE_ENGINE_PORT": str(free_port()),
            "NEURONSERVE_WORK_DIR": str(tmp_path / f"work-{name}"),
        }
    )
    log = tmp_path / f"{name}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen([SERVE_LOCAL], env=env, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 420  # a first run converts SmolLM2 (~30 s) before the engine starts
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-4000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2).status_code == 200:
                return proc, port, log
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise TimeoutError(log.read_text()[-4000:])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_demo_says_where_it_serves_listens_locally_and_stops_cleanly(tmp_path: Path, sig: int) -> None:
    proc, port, log = _start(tmp_path, signal.Signals(sig).name)
    try:
        ours = [x for x in log.read_text().splitlines() if " INFO neuronserve." in x]
        assert f"serving SmolLM2-135M-Instruct at http://127.0.0.1:{port}:" in ours[0]
        assert len(ours[0]) < 400 and "plan: {" in ours[1]  # the summary first, the JSON plan after
        assert any("NEURONSERVE_FRONT_WORKERS=auto chose 1 front process(es)" in x for x in ours[2:])
        assert _listening(port) == {"0100007F"}  # 127.0.0.1 only, not 0.0.0.0 (00000000)
        body = {
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 20,
            "temperature": 0,
        }
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200 and "Paris" in r.json()["choices"][0]["message"]["content"]
    finally:
        proc.send_signal(sig)
        code = proc.wait(timeout=90)
    text = log.read_text()
    assert code == 0, text[-4000:]
    assert "Traceback" not in text and "EngineDeadError" not in text, text[-6000:]
    assert "exit 0" in text.splitlines()[-1]
    said = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    assert f"stop requested ({said}): draining" in text


def test_serve_itself_says_a_hub_model_out_of_reach_before_the_engine_starts(tmp_path: Path) -> None:
    """`neuronserve serve --device cpu` run directly (not through serve-local's preflight): staging
    asks as the engine would (stage/hubprobe.py) and the start ends in one line naming the setting,
    with no engine started and no traceback."""
    port = free_port()
    env = _hub_env(tmp_path, HF_HUB_OFFLINE="1", SAGEMAKER_BIND_TO_PORT=str(port))
    env.update(NEURONSERVE_WORK_DIR=str(tmp_path / "work"), NEURONSERVE_HOST="127.0.0.1")
    started = time.monotonic()
    out = subprocess.run(
        [str(ROOT / "scripts" / "neuronserve"), "serve", "--device", "cpu"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    last = [x for x in out.stderr.splitlines() if x.strip()][-1]
    assert last.startswith(f"neuronserve serve: error: staging failed: SM_VLLM_MODEL={HUB_ID} is not in "), (
        last
    )
    assert "HF_HUB_OFFLINE is set" in last
    both = out.stdout + out.stderr
    assert "Traceback" not in both and "[engine]" not in both  # no engine ever started
    assert time.monotonic() - started < 60
