"""plan.assets (plan/assets/kinds.py, plan/assets/locate.py): everything the engine reads from disk, the
model first, each at a local path decided from the work dir; the argv and the override name only those
paths, and the cache key covers each asset's identity."""

from __future__ import annotations

import json

import pytest
from tests.support.builders import (
    ASSET_PATHS,
    LORA_ENV,
    additional,
    asset_facts,
    asset_plan,
    asset_refusal,
    flag,
    local_model,
)

from neuronserve.config.settings import parse_settings
from neuronserve.plan.assets.kinds import identity, local_candidates
from neuronserve.plan.cachekey import cache_key, key_inputs
from neuronserve.plan.facts import ModelFacts

WORK = "/tmp/neuronserve"
A = f"{WORK}/assets"
EAGLE = '{"method": "eagle", "model": "%s", "num_speculative_tokens": 4}'
# Every kind of asset, in two launches: LoRA with speculative decoding is refused on Neuron (NxD
# Inference's fused speculation ignores the adapter: plan/lanes/nxdi/combinations.py).
SHARED = {
    "SM_NEURON_QUANTIZED": "true",
    "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "s3://bkt/q/model.pt",
    "SM_VLLM_CHAT_TEMPLATE": "s3://bkt/t/chat.jinja",
}
EVERY_KIND = {**LORA_ENV, **SHARED}
WITH_DRAFT = {"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % "s3://bkt/draft/", **SHARED}


def test_golden_assets_of_every_kind() -> None:
    p = asset_plan(EVERY_KIND)
    draft = asset_plan(WITH_DRAFT).assets[1]
    assert [a.as_json() for a in (*p.assets[:3], draft, *p.assets[3:])] == [
        {"kind": "model", "source": "/m", "local": "/m"},
        {"kind": "lora", "source": "s3://bkt/a/", "local": f"{A}/lora/a", "name": "a"},
        {"kind": "lora", "source": "/adapters/b", "local": "/adapters/b", "name": "b"},
        {"kind": "draft", "source": "s3://bkt/draft/", "local": f"{A}/draft"},
        {
            "kind": "quantized_checkpoint",
            "source": "s3://bkt/q/model.pt",
            "local": f"{A}/quantized_checkpoint/model.pt",
        },
        {
            "kind": "chat_template",
            "source": "s3://bkt/t/chat.jinja",
            "local": f"{A}/chat_template/chat.jinja",
        },
    ]
    assert [a.kind for a in asset_plan(WITH_DRAFT).assets] == [
        "model",
        "draft",
        "quantized_checkpoint",
        "chat_template",
    ]
    assert [(a.fetch, a.is_file, a.origin) for a in (*p.assets[:3], draft, *p.assets[3:])] == [
        ("local", False, "SM_VLLM_MODEL"),
        ("s3", False, "SM_VLLM_LORA_MODULES"),
        ("local", False, "SM_VLLM_LORA_MODULES"),
        ("s3", False, "SM_VLLM_SPECULATIVE_CONFIG"),
        ("s3", True, "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH"),
        ("s3", True, "SM_VLLM_CHAT_TEMPLATE"),
    ]


def test_argv_and_override_name_only_local_paths() -> None:
    p = asset_plan(EVERY_KIND)
    assert "s3://" not in " ".join(p.argv) and "s3://" not in json.dumps(p.neuron_override)
    q = asset_plan(WITH_DRAFT)
    assert "s3://" not in " ".join(q.argv) and "s3://" not in json.dumps(q.neuron_override)
    assert json.loads(flag(q, "--speculative-config"))["model"] == f"{A}/draft"
    assert list(q.argv).count("--speculative-config") == 1
    assert flag(p, "--chat-template") == f"{A}/chat_template/chat.jinja"
    assert list(p.argv).count("--chat-template") == 1
    assert additional(p)["override_neuron_config"] == {
        "lora_ckpt_json": f"{A}/lora-ckpt.json",
        "quantized": True,
        "quantized_checkpoints_path": f"{A}/quantized_checkpoint/model.pt",
    }


@pytest.mark.parametrize(
    ("env", "device", "fetch", "local"),
    [
        ({"SM_VLLM_MODEL": "s3://bkt/llama/"}, None, "s3", f"{WORK}/model"),
        ({"SM_VLLM_MODEL": "s3://bkt/llama.tar.gz"}, None, "archive", f"{WORK}/model"),
        ({"SM_VLLM_MODEL": "/tpl/model.tar.gz"}, None, "archive", f"{WORK}/model"),
        ({}, None, "local", "/m"),
        ({"SM_VLLM_MODEL": "org/model"}, None, "hub", f"{WORK}/model"),
        ({"SM_VLLM_MODEL": "s3://bkt/llama/"}, "cpu", "s3", f"{WORK}/model"),
    ],
)
def test_the_model_is_the_first_asset(
    env: dict[str, str], device: str | None, fetch: str, local: str
) -> None:
    p = asset_plan(env, device=device)
    first = p.assets[0]
    assert (first.kind, first.fetch, first.local, first.source) == ("model", fetch, local, p.model.uri)
    assert flag(p, "--model") == local


def test_the_sagemaker_directory_is_a_local_asset() -> None:
    f = asset_facts(sagemaker_model_dir_nonempty=True, paths={"/opt/ml/model": local_model({})})
    p = asset_plan({"SM_VLLM_MODEL": ""}, f)
    assert (p.assets[0].fetch, p.assets[0].local) == ("local", "/opt/ml/model")


def test_a_hub_model_stays_with_the_engine_on_cpu() -> None:
    """CPU: vLLM resolves a hub id itself (nothing to stage), as before."""
    p = asset_plan({"SM_VLLM_MODEL": "org/model"}, device="cpu")
    assert p.assets == () and flag(p, "--model") == "org/model" and p.model.local_path is None
    assert "--served-model-name" not in p.argv


def test_a_staged_hub_model_keeps_its_id_as_the_served_name() -> None:
    p = asset_plan({"SM_VLLM_MODEL": "org/model"})
    assert flag(p, "--served-model-name") == "org/model"
    named = asset_plan({"SM_VLLM_MODEL": "org/model", "SM_VLLM_SERVED_MODEL_NAME": "mine"})
    assert flag(named, "--served-model-name") == "mine" and list(named.argv).count("--served-model-name") == 1


# --- the draft --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "device", "fetch", "model"),
    [
        ("s3://bkt/draft/", None, "s3", f"{A}/draft"),
        ("s3://bkt/draft.tar.gz", None, "archive", f"{A}/draft"),
        ("org/eagle", None, "hub", f"{A}/draft"),
        ("/drafts/eagle", None, "local", "/drafts/eagle"),
        ("s3://bkt/draft/", "cpu", "s3", f"{A}/draft"),
        ("org/eagle", "cpu", None, "org/eagle"),
    ],
)
def test_the_draft(source: str, device: str | None, fetch: str | None, model: str) -> None:
    p = asset_plan({"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % source}, device=device)
    drafts = [a for a in p.assets if a.kind == "draft"]
    assert [(a.fetch, a.local) for a in drafts] == ([(fetch, model)] if fetch else [])
    assert json.loads(flag(p, "--speculative-config"))["model"] == model
    assert list(p.argv).count("--speculative-config") == 1


def test_a_draft_path_that_is_not_here_is_refused() -> None:
    err = asset_refusal({"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % "/drafts/none"})
    assert err.variables == ("SM_VLLM_SPECULATIVE_CONFIG",) and "no such directory" in str(err)
    asset_plan({"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % "/drafts/eagle"})


# --- the quantized checkpoint -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "fetch", "local"),
    [
        ("s3://bkt/q/", "s3", f"{A}/quantized_checkpoint"),
        ("s3://bkt/q/model.pt", "s3", f"{A}/quantized_checkpoint/model.pt"),
        ("s3://bkt/q.tar.gz", "archive", f"{A}/quantized_checkpoint"),
        ("/ckpt/q", "local", "/ckpt/q"),
    ],
)
def test_the_quantized_checkpoint(source: str, fetch: str, local: str) -> None:
    p = asset_plan({"SM_NEURON_QUANTIZED": "true", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": source})
    [asset] = [a for a in p.assets if a.kind == "quantized_checkpoint"]
    assert (asset.fetch, asset.local) == (fetch, local)
    assert additional(p)["override_neuron_config"]["quantized_checkpoints_path"] == local  # type: ignore[index]


def test_a_quantized_checkpoint_not_written_yet_is_left_to_nxd_inference() -> None:
    """On a compile the plugin writes the quantization there (loader.py:234-239): nothing to stage."""
    env = {"SM_NEURON_QUANTIZED": "true", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/ckpt/new"}
    p = asset_plan(env)
    assert [a.kind for a in p.assets] == ["model"]
    assert additional(p)["override_neuron_config"]["quantized_checkpoints_path"] == "/ckpt/new"  # type: ignore[index]


def test_the_cpu_plan_stages_no_quantized_checkpoint() -> None:
    env = {"SM_NEURON_QUANTIZED": "true", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "s3://bkt/q/"}
    assert [a.kind for a in asset_plan(env, device="cpu").assets] == ["model"]


# --- the chat template ------------------------------------------------------------------------------------


def test_a_local_template_file_is_used_in_place_and_template_text_passes_as_given() -> None:
    p = asset_plan({"SM_VLLM_CHAT_TEMPLATE": "/tpl/chat.jinja"})
    assert [(a.kind, a.fetch, a.local, a.is_file) for a in p.assets[1:]] == [
        ("chat_template", "local", "/tpl/chat.jinja", True)
    ]
    assert flag(p, "--chat-template") == "/tpl/chat.jinja"
    text = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    q = asset_plan({"SM_VLLM_CHAT_TEMPLATE": text})
    assert len(q.assets) == 1 and flag(q, "--chat-template") == text


@pytest.mark.parametrize(
    "value",
    ["/tpl/none.jinja", "chat.jinja", "s3://bkt/t/", "/adapters/b", "chatml", "my_template", "", "true"],
)
def test_a_template_file_that_cannot_be_read_is_refused(value: str) -> None:
    """vLLM reads a value without `{`, `}` or a newline as a path and fails at start when it is not
    there (a bare name such as `chatml` included); an empty value is a bare `--chat-template`."""
    err = asset_refusal({"SM_VLLM_CHAT_TEMPLATE": value})
    assert err.variables == ("SM_VLLM_CHAT_TEMPLATE",)


@pytest.mark.parametrize("text", ["{{ messages }}", "{% if x %}a{% endif %}", "<s>{x}", "line one\nline two"])
def test_template_text_by_vllms_own_test_passes_as_given(text: str) -> None:
    p = asset_plan({"SM_VLLM_CHAT_TEMPLATE": text})
    assert len(p.assets) == 1 and flag(p, "--chat-template") == text


# --- local sources ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=/tpl/none.tar.gz"}, "SM_VLLM_LORA_MODULES"),
        ({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=/tpl/chat.jinja"}, "SM_VLLM_LORA_MODULES"),
        ({"SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/tpl/chat.jinja"}, "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH"),
    ],
)
def test_a_local_source_of_the_wrong_kind_is_refused(env: dict[str, str], var: str) -> None:
    assert asset_refusal({"SM_NEURON_QUANTIZED": "true", **env}).variables == (var,)


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://"}, "SM_VLLM_LORA_MODULES"),
        ({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3:///a/"}, "SM_VLLM_LORA_MODULES"),
        ({"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % "s3://"}, "SM_VLLM_SPECULATIVE_CONFIG"),
        ({"SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "s3:///q/"}, "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH"),
        ({"SM_VLLM_CHAT_TEMPLATE": "s3:///t.jinja"}, "SM_VLLM_CHAT_TEMPLATE"),
    ],
)
def test_an_s3_source_without_a_bucket_is_refused(env: dict[str, str], var: str) -> None:
    """It planned, and staging failed only after the model was downloaded."""
    err = asset_refusal({"SM_NEURON_QUANTIZED": "true", **env})
    assert err.variables == (var,) and "no bucket name" in str(err)


def test_an_s3_source_at_a_bucket_root_plans() -> None:
    p = asset_plan({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt"})
    assert [(a.kind, a.source, a.fetch) for a in p.assets[1:]] == [("lora", "s3://bkt", "s3")]


def test_the_host_gathers_facts_on_local_asset_sources() -> None:
    env = {
        **LORA_ENV,
        "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/ckpt/q",
        "SM_VLLM_CHAT_TEMPLATE": "/tpl/chat.jinja",
    }
    assert local_candidates(parse_settings(env)) == [
        "s3://bkt/a/",
        "/adapters/b",
        "/ckpt/q",
        "/tpl/chat.jinja",
    ]
    assert local_candidates(parse_settings({"SM_VLLM_LORA_MODULES": "no-equals"})) == []


# --- the cache key ----------------------------------------------------------------------------------------


def key(env: dict[str, str], **paths: ModelFacts) -> str | None:
    f = asset_facts(paths={**ASSET_PATHS, **paths})
    return asset_plan(env, f).cache_key


def test_the_key_changes_with_an_adapters_identity_and_not_otherwise() -> None:
    base = key(LORA_ENV)
    assert base is not None
    assert key({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a2/ b=/adapters/b"}) != base  # source
    assert key({**LORA_ENV, "SM_VLLM_LORA_MODULES": "z=s3://bkt/a/ b=/adapters/b"}) != base  # name
    retrained = ModelFacts("dir", None, None, weights_digest="wb2")
    assert key(LORA_ENV, **{"/adapters/b": retrained}) != base  # local content
    assert key(LORA_ENV) == base
    assert key({**LORA_ENV, "NEURONSERVE_WORK_DIR": "/elsewhere"}) == base  # where it is staged
    assert key({**LORA_ENV, "SM_VLLM_CHAT_TEMPLATE": "s3://bkt/t/chat.jinja"}) == base  # not compiled
    assert key({**LORA_ENV, "SM_VLLM_SERVED_MODEL_NAME": "other"}) == base


def test_the_key_changes_with_the_draft_and_the_checkpoint() -> None:
    draft = key({"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % "s3://bkt/draft/"})
    assert key({"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % "s3://bkt/draft2/"}) != draft
    q = {"SM_NEURON_QUANTIZED": "true", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "s3://bkt/q/"}
    assert key(q) != key({**q, "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "s3://bkt/q2/"})
    assert key(q) == key({**q, "NEURONSERVE_WORK_DIR": "/elsewhere"})


def test_a_launch_without_assets_keeps_its_key() -> None:
    """Only the model: the hashed document has no `assets` entry, so keys already in caches hold."""
    p = asset_plan({})
    assert p.cache_key is not None and [a.kind for a in p.assets] == ["model"]
    assert "assets" not in key_inputs(p.model, None, {}, {})
    doc = key_inputs(p.model, None, {}, {}, [{"kind": "lora"}])
    assert doc["assets"] == [{"kind": "lora"}]
    assert cache_key(p.model, None, {}, {}) != cache_key(p.model, None, {}, {}, [{"kind": "lora"}])


def test_the_draft_and_the_template_add_no_asset_identity() -> None:
    """The draft is in the compiled graph already (the speculative config and a local draft's content):
    keys of launches with a draft stay what they were; the template is not compiled."""
    env = {"SM_VLLM_SPECULATIVE_CONFIG": EAGLE % "/drafts/eagle", "SM_VLLM_CHAT_TEMPLATE": "/tpl/chat.jinja"}
    p = asset_plan(env)
    assert [a.kind for a in p.assets] == ["model", "draft", "chat_template"]
    assert identity(list(p.assets), asset_facts()) == []
    assert [d["kind"] for d in identity(list(asset_plan(LORA_ENV).assets), asset_facts())] == ["lora", "lora"]
