"""The shapes the phases share (types.py): their JSON forms in `plan --json`, what the front asks of
RequestSupport, staging progress, and ServeOptions' defaults, which are the settings rows' own."""

from __future__ import annotations

from dataclasses import fields

import pytest

from neuronserve.config.table import VARS
from neuronserve.types import (
    CAPABILITIES,
    AssetSpec,
    LaunchPlan,
    ModelSpec,
    Progress,
    RequestSupport,
    ServeOptions,
)


def test_asset_json_names_an_adapter_only() -> None:
    model = AssetSpec("model", "s3://b/m/", "/w/model", "s3", origin="SM_VLLM_MODEL")
    adapter = AssetSpec("lora", "s3://b/a/", "/w/lora/a", "s3", name="a")
    assert model.as_json() == {"kind": "model", "source": "s3://b/m/", "local": "/w/model"}
    assert adapter.as_json() == {"kind": "lora", "source": "s3://b/a/", "local": "/w/lora/a", "name": "a"}


def test_request_support_json_and_allows() -> None:
    support = RequestSupport(
        logprobs=False, penalties=False, lora_adapters=("a",), why={"logprobs": "because"}
    )
    assert [c for c in CAPABILITIES if not support.allows(c)] == ["logprobs", "penalties"]
    assert support.as_json() == {
        "logprobs": False,
        "prompt_logprobs": True,
        "penalties": False,
        "structured_outputs": True,
        "lora_adapters": ["a"],
        "adapter_required": False,
        "why": {"logprobs": "because"},
    }
    assert all(RequestSupport().allows(c) for c in CAPABILITIES)


@pytest.mark.parametrize(
    ("done", "total", "want"), [(50, 200, 25.0), (0, 10, 0.0), (5, None, None), (5, 0, None)]
)
def test_progress_percent(done: int, total: int | None, want: float | None) -> None:
    assert Progress("model", done, total, 0.0, None).percent == want


def test_serve_options_defaults_are_the_rows_defaults() -> None:
    rows = {v.field.removeprefix("serve."): v for v in VARS.values() if v.field.startswith("serve.")}
    defaults = ServeOptions()
    assert len(rows) > 10
    for name, row in rows.items():
        assert getattr(defaults, name) == row.default, (name, row.name)
    assert {f.name for f in fields(ServeOptions)} <= set(rows)  # every option has a row (the host too)


def test_a_plan_carries_its_defaults() -> None:
    plan = LaunchPlan("cpu", ("python",), {}, ModelSpec("local", "/m", "/m"), None, None, ())
    assert (plan.engine_host, plan.engine_port, plan.replicas, plan.files) == ("127.0.0.1", 8081, (), {})
    assert plan.serve == ServeOptions() and plan.request_support == RequestSupport()
