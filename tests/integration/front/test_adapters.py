"""SageMaker's adapter header through the real `neuronserve serve` with a LoRA adapter staged from a
local archive (as tests/integration/test_served_assets.py serves it) before the stand-in engine, which
answers with the model it was asked for: the header reaches the engine as the adapter's name on an
OpenAI body and on a TGI body, an unknown adapter is refused naming the served one in each dialect's
shape, and the plan's rule (vllm-neuron with LoRA on: an adapter on every request) still holds without
the header."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from tests.integration.test_served_assets import adapter_archive
from tests.support.standin_server import standin_server

from neuronserve.front.adapters import ADAPTER_HEADER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_the_header_selects_the_served_adapter_on_invocations(tmp_path: Path) -> None:
    archive = adapter_archive(tmp_path / "sql.tar.gz")
    env = {"SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_LORA_MODULES": f"sql={archive}"}
    with standin_server(tmp_path, **env) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        url, sql = "/invocations", {ADAPTER_HEADER: "sql"}
        r = client.post(url, json={"prompt": "hi", "max_tokens": 1}, headers=sql)
        assert r.status_code == 200 and r.json()["model"] == "sql", r.text
        r = client.post(url, json={"inputs": "standin-echo-model"}, headers=sql)  # TGI: adapter_id
        assert r.status_code == 200 and r.json() == [{"generated_text": "sql"}], r.text

        r = client.post(url, json={"prompt": "hi"}, headers={ADAPTER_HEADER: "zzz"})
        assert r.status_code == 400
        assert r.json()["error"]["message"].endswith("served adapters: sql")
        r = client.post(url, json={"inputs": "hi"}, headers={ADAPTER_HEADER: "zzz"})
        assert r.status_code == 422 and "served adapters: sql" in r.text
        r = client.post(url, json={"prompt": "hi"})  # no header, no adapter: the plan's rule
        assert r.status_code == 400 and "served adapters: sql" in r.json()["error"]["message"]
