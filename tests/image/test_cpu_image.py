"""The CPU image really built and really run: neuronserve serves a tiny model inside it, probed from outside.

Docker SDK where an engine answers; podman/buildah here (see image_support). The Neuron image cannot be
built on these machines (its repositories are unreachable): only its `wheel` stage is built, below.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from image_support import (
    CPU_IMAGE,
    ROOT,
    BuildahContainer,
    docker_client,
    free_port,
    podman_build,
)

pytestmark = [pytest.mark.image, pytest.mark.timeout(2400)]

READY_TIMEOUT_S = 150


def tiny_model() -> Path:
    """The shared tiny random Llama (tests/support/tiny_model.py), built once and cached."""
    path = ROOT / "tests" / "support" / "tiny_model.py"
    spec = importlib.util.spec_from_file_location("ns_tiny_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.tiny_model_dir())


@pytest.fixture(scope="module")
def cpu_image(engine: str) -> str:
    if engine == "docker":
        client: Any = docker_client()
        versions = dict(
            line.split("=", 1)
            for line in (ROOT / "docker" / "versions.env").read_text().splitlines()
            if line and not line.startswith("#")
        )
        client.images.build(
            path=str(ROOT), dockerfile="docker/Dockerfile.cpu", tag=CPU_IMAGE, buildargs=versions, rm=True
        )
        return CPU_IMAGE
    seconds = podman_build()
    print(f"podman build of docker/Dockerfile.cpu: {seconds:.1f} s")
    return CPU_IMAGE


def _inspect(engine: str, image: str) -> dict[str, Any]:
    if engine == "docker":
        client: Any = docker_client()
        attrs: dict[str, Any] = client.images.get(image).attrs["Config"]
        return attrs
    out = subprocess.run(["podman", "image", "inspect", image], capture_output=True, text=True, check=True)
    image = json.loads(out.stdout)[0]
    config: dict[str, Any] = image["Config"]
    # podman reports the health check beside Config (docker inside it).
    config.setdefault("Healthcheck", image.get("Healthcheck"))
    return config


def test_image_metadata(engine: str, cpu_image: str) -> None:
    config = _inspect(engine, cpu_image)
    assert config["Entrypoint"] == ["/usr/bin/tini", "-s", "--", "serve"]
    assert "8080/tcp" in config["ExposedPorts"]
    assert config["Labels"]["com.amazonaws.sagemaker.capabilities.accept-bind-to-port"] == "true"
    assert config["User"] == "1000:1000"
    assert "/ping" in " ".join(config["Healthcheck"]["Test"])


@pytest.fixture
def container(engine: str, cpu_image: str) -> Iterator[BuildahContainer]:
    if engine != "podman":
        pytest.skip("covered by the docker-SDK test on hosts with a Docker engine")
    ctr = BuildahContainer(cpu_image, f"ns-image-test-{free_port()}")
    try:
        yield ctr
    finally:
        ctr.stop()
        ctr.remove()


def test_serve_plan_inside_the_image(container: BuildahContainer, tmp_path: Path) -> None:
    log = tmp_path / "plan.log"
    env = {"SM_VLLM_MODEL": "/opt/ml/model", "SM_VLLM_MAX_MODEL_LEN": "512", "NEURONSERVE_DEVICE": "cpu"}
    container.start(["serve", "plan", "--json"], env, log)
    assert container.proc is not None
    code = container.proc.wait(timeout=120)
    text = log.read_text()
    assert code == 0, text
    plan = json.loads(text[text.index("{") :])
    assert plan["argv"], plan


def _wait_ready(url: str, ctr: BuildahContainer, log: Path) -> float:
    import httpx

    start = time.monotonic()
    while time.monotonic() - start < READY_TIMEOUT_S:
        assert ctr.proc is not None
        if ctr.proc.poll() is not None:
            pytest.fail(
                f"serve exited with {ctr.proc.returncode} before it was ready:\n{log.read_text()[-4000:]}"
            )
        try:
            if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                return time.monotonic() - start
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"/ping not 200 within {READY_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


def test_serve_in_the_image_answers_ping_and_invocations(container: BuildahContainer, tmp_path: Path) -> None:
    import httpx

    model = tiny_model()
    container.copy(model, "/opt/ml/model")
    port, engine_port = free_port(), free_port()
    env = {
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "NEURONSERVE_ENGINE_PORT": str(engine_port),
        "NEURONSERVE_DEVICE": "cpu",
        "SM_VLLM_MAX_MODEL_LEN": "512",
        "SM_VLLM_MAX_NUM_SEQS": "2",
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_DTYPE": "float32",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    log = tmp_path / "serve.log"
    container.start(["serve"], env, log)
    url = f"http://127.0.0.1:{port}"
    ready = _wait_ready(url, container, log)
    print(f"serve in the image: /ping 200 after {ready:.1f} s")

    chat = httpx.post(
        f"{url}/invocations",
        json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "temperature": 0},
        timeout=70,
    )
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"]
    completion = httpx.post(f"{url}/invocations", json={"prompt": "the sky is", "max_tokens": 4}, timeout=70)
    assert completion.status_code == 200, completion.text
    assert completion.json()["usage"]["completion_tokens"] >= 1
    bad = httpx.post(f"{url}/invocations", content=b"{not json", timeout=30)
    assert 400 <= bad.status_code < 500

    code = container.stop(grace=30)
    assert code is not None
    # graceful: serve handled SIGTERM and exited 0. 143 (128 + SIGTERM) is a process the signal
    # killed unhandled, and 137 the SIGKILL after the grace: both are what this rules out.
    assert code == 0, f"exit {code}:\n{log.read_text()[-3000:]}"


def test_docker_sdk_path(engine: str, cpu_image: str, tmp_path: Path) -> None:
    """Where a Docker engine answers: `docker run IMAGE serve` with the model mounted, probed from outside."""
    if engine != "docker":
        pytest.skip("no Docker engine answers on this machine (podman/buildah path used instead)")
    import httpx

    client: Any = docker_client()
    port = free_port()
    ctr = client.containers.run(
        cpu_image,
        "serve",
        detach=True,
        ports={"8080/tcp": ("127.0.0.1", port)},
        volumes={str(tiny_model()): {"bind": "/opt/ml/model", "mode": "ro"}},
        environment={
            "SM_VLLM_MAX_MODEL_LEN": "512",
            "SM_VLLM_ENFORCE_EAGER": "true",
            "VLLM_CPU_KVCACHE_SPACE": "1",
        },
        shm_size="1g",
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            pytest.fail(ctr.logs()[-4000:].decode())
        answer = httpx.post(
            f"http://127.0.0.1:{port}/invocations", json={"prompt": "hi", "max_tokens": 4}, timeout=70
        )
        assert answer.status_code == 200, answer.text
        ctr.stop(timeout=30)
        assert ctr.wait(timeout=30)["StatusCode"] == 0  # 143 would be an unhandled SIGTERM
    finally:
        ctr.remove(force=True)


def test_neuron_dockerfile_wheel_stage_builds(engine: str) -> None:
    """The Neuron Dockerfile's stage that needs no Neuron repository, really built (Debian base here)."""
    if engine != "podman":
        pytest.skip("the Neuron image is built by buildspec.yml where Docker runs")
    tag = "localhost/neuronserve:neuron-wheel-test"
    seconds = podman_build(tag=tag, target="wheel", dockerfile="docker/Dockerfile")
    print(f"podman build --target wheel of docker/Dockerfile: {seconds:.1f} s")
    ctr = BuildahContainer(tag, f"ns-wheel-{free_port()}")
    try:
        listing = subprocess.run(
            ["buildah", "run", "--isolation=chroot", ctr.name, "--", "ls", "/wheels"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
    finally:
        ctr.remove()
    assert listing.strip().startswith("neuronserve-") and listing.strip().endswith("-py3-none-any.whl")
