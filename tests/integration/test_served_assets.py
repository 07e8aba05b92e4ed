"""The real `neuronserve serve` wires a Neuron plan's assets and request support end to end: before the
engine starts, the LoRA adapter (a local .tar.gz) is staged by stage_all and the plugin's adapter list
(plan.files) is written naming the staged path; the engine's argv names only local paths; and the front
enforces plan.request_support (no logprobs on device, an adapter on every request). Unit tests of the
plan, the stager and the front each pass if one of these links is dropped; this one does not.

The engine is the stand-in executable (tests/support/standin_engine): no vLLM starts, so this needs no
engine lock. It records its argv and the adapter list it found at start in $STANDIN_EVENTS.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import httpx
import pytest
from tests.support.standin_server import standin_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CANARY = "hf_wiringCanary0123456789"
ADAPTER_CONFIG = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]}


def adapter_archive(path: Path) -> Path:
    data = json.dumps(ADAPTER_CONFIG).encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("adapter_config.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_serve_stages_the_adapter_writes_its_list_first_and_enforces_the_plans_request_support(
    tmp_path: Path,
) -> None:
    archive = adapter_archive(tmp_path / "sql.tar.gz")
    env = {"SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_LORA_MODULES": f"sql={archive}", "HF_TOKEN": CANARY}
    with standin_server(tmp_path, **env) as server:
        staged = tmp_path / "work" / "assets" / "lora" / "sql"
        assert json.loads((staged / "adapter_config.json").read_text()) == ADAPTER_CONFIG
        start = next(
            e
            for e in map(json.loads, (tmp_path / "standin-events.jsonl").read_text().splitlines())
            if e["event"] == "start"
        )
        assert start["lora_ckpt_json"] is not None, (
            "the adapter list was not written before the engine started"
        )
        assert str(staged) in start["lora_ckpt_json"]
        argv = start["argv"]
        assert argv[argv.index("--lora-modules") + 1] == f"sql={staged}"
        assert str(archive) not in " ".join(argv)

        url = f"{server.url}/v1/completions"
        ok = httpx.post(url, json={"model": "sql", "prompt": "hi", "max_tokens": 1}, timeout=30)
        assert ok.status_code == 200, ok.text
        logprobs = httpx.post(url, json={"model": "sql", "prompt": "hi", "max_tokens": 1, "logprobs": 1})
        assert logprobs.status_code == 400 and "logprobs" in logprobs.json()["error"]["message"]
        no_adapter = httpx.post(url, json={"prompt": "hi", "max_tokens": 1}, timeout=30)
        assert (
            no_adapter.status_code == 400 and "served adapters: sql" in no_adapter.json()["error"]["message"]
        )
