"""Builders shared by the plan tests: host facts, a plan from an environment, and its refusal.

One set of defaults: `facts()` is a Neuron host with 32 visible cores (cores_source "test") and the
image's versions, `plan()` builds from exactly the environment given. A test that needs another host
or a base environment says so at the call, or uses one of the named fixtures below, each built from
those same builders with its departures written out:
- `llama_*`: the /m Llama directory on a 2-core host (LLAMA_ENV: TP 2, 2048 tokens, 4 sequences);
- `replica_*`: the /m Llama directory on a 24-core host with two CPUs (the data-parallel tests);
- `sized_*`: a public model of tests/data/models on a named instance (the HBM fit tests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.support.configs import VERSIONS

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.host import clitables
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.resolution import Resolution, Speculation
from neuronserve.types import LaunchPlan

PYTHON = "/usr/bin/python3"
DATA = Path(__file__).parents[1] / "data" / "models"


# A hub model at TP 2, 128 tokens and 4 sequences: the environment most build_plan tests start from.
HUB_MODEL = {
    "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "128",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}


def facts(cores: int | None = 32, **kw: Any) -> HostFacts:
    """A host with `cores` visible NeuronCores (None: none found, and no Neuron device)."""
    base: dict[str, Any] = {
        "python": PYTHON,
        "neuron_devices": 1 if cores else 0,
        "visible_cores": cores,
        "cores_source": "test",
        "versions": dict(VERSIONS),
        "option_tables": clitables.load_all(),  # the engine flags checked as `neuronserve plan` checks them
    }
    base.update(kw)
    return HostFacts(**base)


def local_model(config: Mapping[str, Any] | None) -> ModelFacts:
    """A local model directory whose config.json is `config`."""
    return ModelFacts("dir", dict(config) if config is not None else None, "d" * 64, None)


def plan(
    env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = (), device: str | None = None
) -> LaunchPlan:
    """build_plan of exactly `env` (and the arguments after `--`) on `f`, else facts()."""
    return build_plan(parse_settings(env, extra_args=extra, device=device), f or facts())


def refusal(
    env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = (), device: str | None = None
) -> ConfigError:
    """The ConfigError plan() raises (the test fails when it plans)."""
    with pytest.raises(ConfigError) as err:
        plan(env, f, extra, device)
    return err.value


def refused(
    env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = (), device: str | None = None
) -> str:
    """refusal()'s message."""
    return str(refusal(env, f, extra, device))


# --- the /m Llama directory on a 2-core host -------------------------------------------------------------

LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "max_position_embeddings": 2048,
    "num_key_value_heads": 8,
    "head_dim": 64,
}
LLAMA_ENV = {
    "SM_VLLM_MODEL": "/m",
    "SM_VLLM_MAX_MODEL_LEN": "2048",
    "SM_VLLM_MAX_NUM_SEQS": "4",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
}


def llama_facts(cores: int | None = 2, config: dict[str, Any] | None = None, **kw: Any) -> HostFacts:
    """facts() with the /m Llama directory (or `config`), a Neuron device even when no cores are
    visible, and cores found by neuron-ls."""
    paths = {"/m": local_model(config or LLAMA), **kw.pop("paths", {})}
    return facts(
        cores, **{"python": "py", "neuron_devices": 1, "cores_source": "neuron-ls", **kw, "paths": paths}
    )


def llama_plan(env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = ()) -> LaunchPlan:
    """plan() of LLAMA_ENV updated with `env`, on llama_facts() unless `f`."""
    return plan({**LLAMA_ENV, **env}, f or llama_facts(), extra)


def llama_refusal(
    env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = ()
) -> ConfigError:
    """llama_plan()'s refusal."""
    return refusal({**LLAMA_ENV, **env}, f or llama_facts(), extra)


def llama_refused(env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = ()) -> str:
    """llama_plan()'s refusal message."""
    return str(llama_refusal(env, f, extra))


def flag(p: LaunchPlan, name: str) -> str:
    """The value after flag `name` in the plan's argv."""
    return p.argv[p.argv.index(name) + 1]


def additional(p: LaunchPlan) -> dict[str, object]:
    """The plan's --additional-config document."""
    doc = json.loads(flag(p, "--additional-config"))
    assert isinstance(doc, dict)
    return doc


# --- the data-parallel host ------------------------------------------------------------------------------

REPLICA_LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "max_position_embeddings": 2048,
}
REPLICA_ENV = {"SM_VLLM_MODEL": "/m", "SM_VLLM_MAX_MODEL_LEN": "2048", "SM_VLLM_MAX_NUM_SEQS": "4"}


def replica_facts(
    cores: int | None = 24, cpus: tuple[int, ...] = (0, 1), source: str = "neuron-ls"
) -> HostFacts:
    """facts() with `cores` found by `source`, the CPU ids this process may use, and the /m Llama."""
    return facts(
        cores,
        python="py",
        cores_source=source,
        versions={"vllm": "0.11.0", "vllm-neuron": "0.2.2+lts"},
        paths={"/m": local_model(REPLICA_LLAMA)},
        cpus=cpus,
    )


def replica_plan(
    env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = (), device: str = "neuron"
) -> LaunchPlan:
    """plan() of REPLICA_ENV updated with `env`, on replica_facts() unless `f`, on Neuron unless said."""
    return plan({**REPLICA_ENV, **env}, f or replica_facts(), extra, device)


def replica_refusal(
    env: Mapping[str, str], f: HostFacts | None = None, extra: Sequence[str] = (), device: str = "neuron"
) -> ConfigError:
    """replica_plan()'s refusal."""
    return refusal({**REPLICA_ENV, **env}, f or replica_facts(), extra, device)


# --- a public model on a named instance ------------------------------------------------------------------

OVERHEAD = 1_610_612_736  # the default HBM overhead per core, 1.5 GiB, written out
SIZED_VERSIONS = {"vllm": "0.11.0", "vllm-neuron": "0.2.2+lts", "neuronx-distributed-inference": "0.7.14366"}


def model_config(name: str) -> dict[str, Any]:
    """config.json of tests/data/models/`name`."""
    doc = json.loads((DATA / name / "config.json").read_text())
    assert isinstance(doc, dict)
    return doc


def sized_plan(
    name: str,
    instance: str,
    tp: int,
    length: int | None,
    seqs: int,
    *,
    versions: dict[str, str] | None = None,
    **env: str,
) -> LaunchPlan:
    """Model `name` at /m on NEURONSERVE_INSTANCE_TYPE `instance` (no devices detected), TP `tp`,
    max_model_len `length` (None: derived) and `seqs` sequences, plus `env` (on SIZED_VERSIONS unless
    `versions`)."""
    host = facts(
        None,
        python="py",
        cores_source="unknown",
        versions=dict(versions or SIZED_VERSIONS),
        paths={"/m": ModelFacts("dir", model_config(name), "d" * 64)},
    )
    values = {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": str(tp),
        "SM_VLLM_MAX_NUM_SEQS": str(seqs),
        "NEURONSERVE_DEVICE": "neuron",
        "NEURONSERVE_INSTANCE_TYPE": instance,
        **env,
    }
    if length:
        values["SM_VLLM_MAX_MODEL_LEN"] = str(length)
    return plan(values, host)


def sized_refused(
    name: str,
    instance: str,
    tp: int,
    length: int | None,
    seqs: int,
    *,
    versions: dict[str, str] | None = None,
    **env: str,
) -> str:
    """sized_plan()'s refusal message."""
    with pytest.raises(ConfigError) as err:
        sized_plan(name, instance, tp, length, seqs, versions=versions, **env)
    return str(err.value)


# --- one rule called directly ----------------------------------------------------------------------------


def raised(fn: Any, *args: Any, **kw: Any) -> ConfigError:
    """The ConfigError `fn(*args, **kw)` raises (the test fails when it returns)."""
    with pytest.raises(ConfigError) as err:
        fn(*args, **kw)
    return err.value


def resolution(
    origins: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    warnings: list[str] | None = None,
    *,
    override: dict[str, Any] | None = None,
    spec: Any = None,
) -> Resolution:
    """A Resolution for calling one rule directly: `origins` as the rule reads them, `env` the user's
    passthrough environment, and `warnings` the list the rule's warnings land in (a fresh one unless
    given, so a test can keep asserting on its own list)."""
    return Resolution(
        origins=dict(origins or {}),
        override=override if override is not None else {},
        user_env=dict(env or {}),
        speculation=Speculation.parse(spec),
        warnings=warnings if warnings is not None else [],
    )


# --- assets: adapters, a draft, a checkpoint and a template on the /m Llama host ----------------------------

# Local things the asset tests name: an adapter directory (with its sampled weights digest), an EAGLE
# draft, a quantized checkpoint directory and a chat template file.
ASSET_PATHS = {
    "/adapters/b": ModelFacts("dir", None, None, weights_digest="wb"),
    "/drafts/eagle": ModelFacts("dir", LLAMA, "e" * 64, True, weights_digest="we"),
    "/ckpt/q": ModelFacts("dir", None, None, weights_digest="wq"),
    "/tpl/chat.jinja": ModelFacts("file"),
    "/tpl/model.tar.gz": ModelFacts("file"),
}
# Two adapters, one on S3 and one local (the multi-LoRA environment most LoRA tests start from).
LORA_ENV = {"SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/ b=/adapters/b"}


def asset_facts(**kw: Any) -> HostFacts:
    """llama_facts() with the ASSET_PATHS (more or other paths: `paths=`)."""
    return llama_facts(paths={**ASSET_PATHS, **kw.pop("paths", {})}, **kw)


def asset_plan(env: Mapping[str, str], f: HostFacts | None = None, device: str | None = None) -> LaunchPlan:
    """plan() of LLAMA_ENV updated with `env` on asset_facts() (Neuron unless `device`)."""
    return plan({**LLAMA_ENV, **env}, f or asset_facts(), device=device)


def asset_refusal(
    env: Mapping[str, str], f: HostFacts | None = None, device: str | None = None
) -> ConfigError:
    """asset_plan()'s refusal."""
    return refusal({**LLAMA_ENV, **env}, f or asset_facts(), device=device)
