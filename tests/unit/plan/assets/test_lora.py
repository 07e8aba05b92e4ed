"""Multi-LoRA as vllm-neuron 0.2.2+lts runs it (plan/assets/lora.py, overrides.check_lora): each configuration
the plugin's source (or vLLM 0.11.0 / NxD Inference under it) rejects is refused naming the variables,
and its neighbour passes; the adapter list the plan writes, the argv it renders and what requests must
name."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import (
    LLAMA_ENV,
    LORA_ENV,
    additional,
    asset_facts,
    asset_plan,
    asset_refusal,
    flag,
    plan,
    refusal,
)
from tests.support.vllm_cli import check_argv

from neuronserve.plan.assets.lora import request_support
from neuronserve.types import LaunchPlan, RequestSupport

WORK = "/tmp/neuronserve"
CKPT = f"{WORK}/assets/lora-ckpt.json"
ROOT = Path(__file__).resolve().parents[4]


def lora_list(p: LaunchPlan) -> dict[str, Any]:
    """The plugin's adapter list as the stager will write it."""
    doc = json.loads(p.files[CKPT])
    assert isinstance(doc, dict)
    return doc


def modules_argv(p: LaunchPlan) -> list[str]:
    """The tokens after --lora-modules."""
    argv = list(p.argv)
    start = argv.index("--lora-modules") + 1
    end = next((i for i in range(start, len(argv)) if argv[i].startswith("--")), len(argv))
    return argv[start:end]


def test_the_plan_writes_the_adapter_list_from_the_staged_paths() -> None:
    p = asset_plan(LORA_ENV)
    assert lora_list(p) == {
        "lora-ckpt-dir": f"{WORK}/assets",
        "lora-ckpt-paths": {"a": f"{WORK}/assets/lora/a", "b": "/adapters/b"},
        "lora-ckpt-paths-cpu": {"a": f"{WORK}/assets/lora/a", "b": "/adapters/b"},
    }
    assert additional(p)["override_neuron_config"] == {"lora_ckpt_json": CKPT}
    assert modules_argv(p) == [f"a={WORK}/assets/lora/a", "b=/adapters/b"]
    assert "--enable-lora" in p.argv
    assert p.neuron_override == {"lora_ckpt_json": CKPT}


def test_argv_and_override_name_only_local_paths() -> None:
    p = asset_plan({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/ c=s3://bkt/c.tar.gz d=org/adapter"})
    text = " ".join(p.argv) + json.dumps(p.neuron_override) + p.files[CKPT]
    assert "s3://" not in text and "org/adapter" not in text
    assert [(a.name, a.fetch, a.local) for a in p.assets if a.kind == "lora"] == [
        ("a", "s3", f"{WORK}/assets/lora/a"),
        ("c", "archive", f"{WORK}/assets/lora/c"),
        ("d", "hub", f"{WORK}/assets/lora/d"),
    ]


def test_the_work_dir_decides_every_local_path() -> None:
    p = asset_plan({**LORA_ENV, "NEURONSERVE_WORK_DIR": "/scratch/ns/"})
    assert p.files == {
        "/scratch/ns/assets/lora-ckpt.json": p.files["/scratch/ns/assets/lora-ckpt.json"],
    }
    doc = json.loads(p.files["/scratch/ns/assets/lora-ckpt.json"])
    assert doc["lora-ckpt-dir"] == "/scratch/ns/assets"
    assert doc["lora-ckpt-paths"]["a"] == "/scratch/ns/assets/lora/a"


def test_the_plugin_always_gets_an_override_to_pop_from() -> None:
    """`_get_nxdi_lora_config` pops from override_neuron_config (runner :175-177): a plan without any
    override key still renders an empty override."""
    assert additional(asset_plan({}))["override_neuron_config"] == {}


# --- refused by the source, and the neighbour that passes -------------------------------------------------


@pytest.mark.parametrize(
    ("env", "names", "neighbour"),
    [
        # --lora-modules without a LoRA config: vLLM cannot register the adapters.
        (
            {"SM_VLLM_LORA_MODULES": "a=s3://bkt/a/"},
            ("SM_VLLM_LORA_MODULES", "SM_VLLM_ENABLE_LORA"),
            {"SM_VLLM_LORA_MODULES": "a=s3://bkt/a/", "SM_VLLM_ENABLE_LORA": "true"},
        ),
        # LoRA on with no adapters: NxD Inference compiles only the listed adapters.
        (
            {"SM_VLLM_ENABLE_LORA": "true"},
            ("SM_VLLM_ENABLE_LORA", "SM_VLLM_LORA_MODULES"),
            LORA_ENV,
        ),
        # Two adapter lists: the plan writes its own.
        (
            {**LORA_ENV, "SM_NEURON_LORA_CKPT_JSON": "/m/lora.json"},
            ("SM_VLLM_LORA_MODULES", "SM_NEURON_LORA_CKPT_JSON"),
            {"SM_VLLM_ENABLE_LORA": "true", "SM_NEURON_LORA_CKPT_JSON": "/m/lora.json"},
        ),
        # More adapters than max_loras and no host memory for the rest.
        (
            {**LORA_ENV, "SM_VLLM_MAX_LORAS": "1"},
            ("SM_VLLM_LORA_MODULES", "SM_VLLM_MAX_LORAS"),
            {**LORA_ENV, "SM_VLLM_MAX_LORAS": "1", "SM_VLLM_MAX_CPU_LORAS": "2"},
        ),
        (
            {**LORA_ENV, "SM_VLLM_MAX_LORAS": "1", "SM_VLLM_MAX_CPU_LORAS": "1"},
            ("SM_VLLM_LORA_MODULES", "SM_VLLM_MAX_LORAS"),
            {**LORA_ENV, "SM_VLLM_MAX_LORAS": "2", "SM_VLLM_MAX_CPU_LORAS": "2"},
        ),
        # vLLM's LoRAConfig: max_cpu_loras >= max_loras.
        (
            {**LORA_ENV, "SM_VLLM_MAX_LORAS": "2", "SM_VLLM_MAX_CPU_LORAS": "1"},
            ("SM_VLLM_MAX_CPU_LORAS", "SM_VLLM_MAX_LORAS"),
            {**LORA_ENV, "SM_VLLM_MAX_LORAS": "2", "SM_VLLM_MAX_CPU_LORAS": "2"},
        ),
        # ... also against the max_loras the plan derives from the adapters (it passed as
        # `--max-loras 2 --max-cpu-loras 1`, which vLLM refuses at start).
        (
            {**LORA_ENV, "SM_VLLM_MAX_CPU_LORAS": "1"},
            ("SM_VLLM_MAX_CPU_LORAS", "SM_VLLM_MAX_LORAS"),
            {**LORA_ENV, "SM_VLLM_MAX_CPU_LORAS": "2"},
        ),
        # vLLM's MaxLoRARanks.
        (
            {**LORA_ENV, "SM_VLLM_MAX_LORA_RANK": "20"},
            ("SM_VLLM_MAX_LORA_RANK",),
            {**LORA_ENV, "SM_VLLM_MAX_LORA_RANK": "32"},
        ),
        (
            {**LORA_ENV, "OPTION_MAX_LORA_RANK": "20"},
            ("OPTION_MAX_LORA_RANK",),
            {**LORA_ENV, "OPTION_MAX_LORA_RANK": "16"},
        ),
        # Names: one each, usable as a directory and a request's model.
        (
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/ a=s3://bkt/b/"},
            ("SM_VLLM_LORA_MODULES",),
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/ b=s3://bkt/b/"},
        ),
        (
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "../x=s3://bkt/a/"},
            ("SM_VLLM_LORA_MODULES",),
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "x=s3://bkt/a/"},
        ),
        (
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "s3://bkt/a/"},
            ("SM_VLLM_LORA_MODULES",),
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/"},
        ),
        (
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": ""},
            ("SM_VLLM_LORA_MODULES",),
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/"},
        ),
        (
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": '{"name": "a", "path": "s3://bkt/a/", "x": 1}'},
            ("SM_VLLM_LORA_MODULES",),
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": '{"name": "a", "path": "s3://bkt/a/"}'},
        ),
        # An adapter path that is not on this host, or relative to a CWD the engine does not share.
        (
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=/adapters/nothing"},
            ("SM_VLLM_LORA_MODULES",),
            {**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=/adapters/b"},
        ),
    ],
)
def test_refused_and_its_neighbour_passes(
    env: dict[str, str], names: tuple[str, ...], neighbour: dict[str, str]
) -> None:
    err = asset_refusal(env)
    assert err.variables == names, str(err)
    assert "Traceback" not in str(err)
    asset_plan(neighbour)


def test_a_relative_adapter_path_is_refused() -> None:
    f = asset_facts(paths={"adapters/r": asset_facts().paths["/adapters/b"]})
    err = asset_refusal({**LORA_ENV, "SM_VLLM_LORA_MODULES": "r=adapters/r"}, f)
    assert "give the absolute path" in str(err) and err.variables == ("SM_VLLM_LORA_MODULES",)


def test_lora_before_0_2_2_is_refused_and_0_2_2_passes() -> None:
    f = asset_facts()
    old = dataclasses.replace(f, versions={**f.versions, "vllm-neuron": "0.2.0"})
    err = asset_refusal(LORA_ENV, old)
    assert "NotImplementedError in vllm-neuron 0.2.0" in str(err)
    assert err.variables == ("SM_VLLM_ENABLE_LORA",)
    asset_plan(LORA_ENV, f)


def test_more_adapters_than_max_loras_with_host_memory_keeps_max_loras_on_device() -> None:
    p = asset_plan({**LORA_ENV, "SM_VLLM_MAX_LORAS": "1", "SM_VLLM_MAX_CPU_LORAS": "2"})
    doc = lora_list(p)
    assert doc["lora-ckpt-paths"] == {"a": f"{WORK}/assets/lora/a"}
    assert doc["lora-ckpt-paths-cpu"] == {"a": f"{WORK}/assets/lora/a", "b": "/adapters/b"}
    assert (flag(p, "--max-loras"), flag(p, "--max-cpu-loras")) == ("1", "2")


def test_an_unset_max_loras_becomes_the_adapter_count_and_is_said() -> None:
    """At vLLM's default 1, max_cpu_loras would be 1 and NxD Inference would refuse two adapters."""
    p = asset_plan(LORA_ENV)
    assert list(p.argv).count("--max-loras") == 1 and flag(p, "--max-loras") == "2"
    assert "max_loras set to 2, the adapters SM_VLLM_LORA_MODULES names: set SM_VLLM_MAX_LORAS" in " ".join(
        p.warnings
    )
    one = asset_plan({**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/"})
    assert "--max-loras" not in one.argv  # one adapter: vLLM's default 1 holds it


def test_vllm_json_forms_are_read() -> None:
    one = asset_plan({**LORA_ENV, "SM_VLLM_LORA_MODULES": '{"name": "a", "path": "s3://bkt/a/"}'})
    assert modules_argv(one) == [f"a={WORK}/assets/lora/a"]
    many = '[{"name": "a", "path": "s3://bkt/a/"}, "b=/adapters/b"]'
    assert modules_argv(asset_plan({**LORA_ENV, "SM_VLLM_LORA_MODULES": many})) == [
        f"a={WORK}/assets/lora/a",
        "b=/adapters/b",
    ]


def test_lmi_names_map_onto_the_same_flags() -> None:
    env = {
        "OPTION_ENABLE_LORA": "true",
        "OPTION_MAX_LORAS": "2",
        "OPTION_MAX_LORA_RANK": "32",
        "OPTION_MAX_CPU_LORAS": "4",
        "SM_VLLM_LORA_MODULES": LORA_ENV["SM_VLLM_LORA_MODULES"],
    }
    p = asset_plan(env)
    assert "--enable-lora" in p.argv
    assert (flag(p, "--max-loras"), flag(p, "--max-lora-rank"), flag(p, "--max-cpu-loras")) == (
        "2",
        "32",
        "4",
    )
    assert lora_list(p)["lora-ckpt-paths"] == {"a": f"{WORK}/assets/lora/a", "b": "/adapters/b"}
    assert asset_refusal({**env, "OPTION_ENABLE_LORA": "false"}).variables == (
        "SM_VLLM_LORA_MODULES",
        "OPTION_ENABLE_LORA",
    )


def test_a_users_own_adapter_list_is_still_honoured_without_lora_modules() -> None:
    own = {"SM_VLLM_ENABLE_LORA": "true", "SM_NEURON_LORA_CKPT_JSON": "/m/lora.json"}
    p = asset_plan(own)
    assert additional(p)["override_neuron_config"] == {"lora_ckpt_json": "/m/lora.json"}
    assert p.files == {} and "--lora-modules" not in p.argv
    assert any("no adapter is named for vLLM" in w for w in p.warnings)
    assert p.request_support.lora_adapters == () and p.request_support.adapter_required


def test_adapters_named_after_the_separator_are_served_as_given() -> None:
    own = {"SM_VLLM_ENABLE_LORA": "true", "SM_NEURON_LORA_CKPT_JSON": "/m/lora.json"}
    p = plan({**LLAMA_ENV, **own}, asset_facts(), extra=["--lora-modules", "x=/a/x", "y=/a/y", "--seed", "1"])
    assert p.request_support.lora_adapters == ("x", "y")
    assert list(p.argv[-5:]) == ["--lora-modules", "x=/a/x", "y=/a/y", "--seed", "1"]
    assert not any("no adapter is named" in w for w in p.warnings)
    err = refusal({**LLAMA_ENV, **LORA_ENV}, asset_facts(), extra=["--lora-modules=x=/a/x"])
    assert err.variables == ("SM_VLLM_LORA_MODULES", "--lora-modules")


# --- what requests must name ------------------------------------------------------------------------------


def test_on_neuron_every_request_must_name_a_served_adapter() -> None:
    support = asset_plan(LORA_ENV).request_support
    assert support.lora_adapters == ("a", "b") and support.adapter_required is True
    off = asset_plan({}).request_support
    assert off.lora_adapters == () and off.adapter_required is False


def test_on_cpu_adapters_are_listed_not_required_and_nothing_is_written() -> None:
    p = asset_plan(
        {**LORA_ENV, "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/ b=/adapters/b h=org/adapter"}, device="cpu"
    )
    assert p.request_support.lora_adapters == ("a", "b", "h") and p.request_support.adapter_required is False
    assert modules_argv(p) == [f"a={WORK}/assets/lora/a", "b=/adapters/b", "h=org/adapter"]  # vLLM fetches h
    assert p.files == {} and p.neuron_override is None
    assert [a.name for a in p.assets if a.kind == "lora"] == ["a", "b"]


def test_the_request_support_of_the_capabilities_is_kept() -> None:
    """The adapters are added onto the capabilities computed elsewhere, never reset them."""
    base = RequestSupport(logprobs=False, why={"logprobs": "x"})
    out = request_support(base, [], lora=True, device="neuron", integration="plugin", plugin_version=None)
    assert (out.logprobs, out.why, out.adapter_required) == (False, {"logprobs": "x"}, True)
    old = request_support(base, [], lora=True, device="neuron", integration="plugin", plugin_version="0.2.0")
    assert old.adapter_required is False


# --- through the command ----------------------------------------------------------------------------------


def test_plan_json_through_the_command_names_local_paths_valid_for_vllm_0_11_0() -> None:
    env = {
        "PATH": "",
        "PYTHONPATH": str(ROOT / "src"),
        "SM_MODEL_DIR": "/nonexistent",
        "SM_VLLM_MODEL": "org/model",
        "SM_VLLM_MAX_MODEL_LEN": "1024",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_MAX_NUM_SEQS": "2",
        "SM_VLLM_ENABLE_LORA": "true",
        "SM_VLLM_LORA_MODULES": "a=s3://bkt/a/ c=s3://bkt/c.tar.gz",
        "OPTION_MAX_LORA_RANK": "16",
        "SM_VLLM_CHAT_TEMPLATE": "s3://bkt/t/chat.jinja",
        "NEURONSERVE_WORK_DIR": "/w",
    }
    r = subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", "--json", "--device", "neuron"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["assets"] == [
        {"kind": "model", "source": "org/model", "local": "/w/model"},
        {"kind": "lora", "source": "s3://bkt/a/", "local": "/w/assets/lora/a", "name": "a"},
        {"kind": "lora", "source": "s3://bkt/c.tar.gz", "local": "/w/assets/lora/c", "name": "c"},
        {
            "kind": "chat_template",
            "source": "s3://bkt/t/chat.jinja",
            "local": "/w/assets/chat_template/chat.jinja",
        },
    ]
    assert doc["request_support"]["lora_adapters"] == ["a", "c"]
    assert doc["request_support"]["adapter_required"] is True
    argv = doc["argv"]
    assert "s3://" not in " ".join(argv) and argv[argv.index("--model") + 1] == "/w/model"
    assert check_argv(argv, "0.11.0") == []


@pytest.mark.parametrize(
    ("off", "said"),
    [
        ({}, "set SM_VLLM_ENABLE_LORA=true"),
        ({"OPTION_ENABLE_LORA": "false"}, "set OPTION_ENABLE_LORA=true, or unset SM_VLLM_LORA_MODULES"),
    ],
)
def test_adapters_with_lora_off_name_the_switch_the_user_set(off: dict[str, str], said: str) -> None:
    """The fix names the variable that turned LoRA off, not a name the deployment does not use."""
    err = asset_refusal({"SM_VLLM_LORA_MODULES": "a=s3://bkt/a/", **off})
    assert said in str(err)
