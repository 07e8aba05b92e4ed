"""Stack lanes: which lane plans, what it reports, which instances it refuses, and its cache key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import ASSET_PATHS, HUB_MODEL, facts, model_config, plan, refusal
from tests.support.vllm_cli import check_argv
from tests.unit.plan.test_build_vllm_cli import run_cli

import neuronserve.plan.lanes.registry as lanes
from neuronserve.config.settings import parse_settings
from neuronserve.config.table import VARS
from neuronserve.errors import ConfigError
from neuronserve.lane_ids import LANE_IDS
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.types import LaunchPlan

NO_PLUGIN = {"vllm": None, "vllm-neuron": None}
LANE_FILES = Path(__file__).resolve().parents[4] / "docker" / "lanes"


def pins(stack: dict[str, Any]) -> dict[str, Any]:
    """The lane's four pins of a plan's "stack" (the NxD Inference lanes add "nxd_inference")."""
    return {k: v for k, v in stack.items() if k != "nxd_inference"}


def laptop(**kw: object) -> HostFacts:
    """A host without the plugin (a laptop planning for an image)."""
    return facts(versions=dict(NO_PLUGIN), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("version", "lane"),
    [("0.2.2+lts", "2.27"), ("0.2.0", "2.27"), ("0.4.1", "2.28"), ("0.24.0.1.1.0", "2.32"), (None, "2.27")],
)
def test_the_installed_plugin_chooses_the_lane(version: str | None, lane: str) -> None:
    chosen = lanes.choose_lane(None, facts(versions={"vllm-neuron": version}))
    assert chosen is lanes.LANES[lane]


def test_neuronserve_stack_chooses_the_lane_on_a_laptop() -> None:
    p = plan({**HUB_MODEL, "NEURONSERVE_STACK": "2.28"}, laptop())
    assert pins(p.stack) == {"lane": "2.28", "sdk": "2.28.0", "vllm_neuron": "0.4.1", "vllm": "0.13.0"}


def test_a_stack_that_disagrees_with_the_plugin_is_refused_naming_both() -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.28"})
    assert "NEURONSERVE_STACK=2.28" in str(err) and "vllm-neuron 0.2.2+lts (lane 2.27)" in str(err)
    assert err.variables == ("NEURONSERVE_STACK",)


@pytest.mark.parametrize("lane", sorted(lanes.LANES))
def test_each_lanes_pins_are_its_build_files(lane: str) -> None:
    """The stack the plan reports is the one docker/lanes/<lane>.env builds."""
    env = dict(
        line.split("=", 1)
        for line in (LANE_FILES / f"{lane}.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    pins = lanes.LANES[lane]
    assert (pins.sdk, pins.vllm_neuron, pins.vllm) == (
        env["NEURON_SDK_VERSION"],
        env["VLLM_NEURON_VERSION"],
        env["VLLM_VERSION"],
    )


def test_an_unknown_stack_is_refused_listing_the_lanes() -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.30"}, laptop())
    assert "NEURONSERVE_STACK" in str(err)
    assert all(lane in str(err) for lane in ("2.27", "2.28", "2.32"))


def test_an_unknown_installed_plugin_is_refused() -> None:
    err = refusal(HUB_MODEL, facts(versions={"vllm-neuron": "0.9.0"}))
    assert "vllm-neuron 0.9.0" in str(err) and "2.28 (vllm-neuron 0.4.1)" in str(err)


@pytest.mark.parametrize("instance", ["inf2.xlarge", "ml.trn1.32xlarge", "trn1n.32xlarge"])
def test_lane_2_32_refuses_inf2_and_trn1_pointing_to_2_28(instance: str) -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.32", "NEURONSERVE_INSTANCE_TYPE": instance}, laptop())
    text = str(err)
    assert f"NEURONSERVE_INSTANCE_TYPE={instance}" in text and "lane 2.32" in text
    assert "use lane 2.28" in text and "NEURONSERVE_STACK=2.28" in text


def test_lanes_2_27_and_2_28_refuse_trn3_pointing_to_the_newest_trn3_lane() -> None:
    for stack in ("2.27", "2.28"):
        err = refusal(
            {**HUB_MODEL, "NEURONSERVE_STACK": stack, "NEURONSERVE_INSTANCE_TYPE": "trn3.x"}, laptop()
        )
        assert f"lane {stack}" in str(err) and "not trn3: use lane 2.33" in str(err)


def test_lane_2_32_refuses_detected_neuroncore_v2_devices() -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.32"}, laptop(neuron_devices=1, physical_cores=2))
    assert "detected devices" in str(err) and "use lane 2.28" in str(err)


def test_lanes_2_27_and_2_28_run_every_instance_family() -> None:
    for stack in ("2.27", "2.28"):
        for instance in ("inf2.48xlarge", "trn1.32xlarge", "trn2.48xlarge"):
            env = {**HUB_MODEL, "NEURONSERVE_STACK": stack, "NEURONSERVE_INSTANCE_TYPE": instance}
            assert plan(env, laptop(visible_cores=2)).stack["lane"] == stack


def test_the_cache_key_covers_the_lane_and_keeps_2_27_keys() -> None:
    default = plan(HUB_MODEL, laptop())
    named = plan({**HUB_MODEL, "NEURONSERVE_STACK": "2.27"}, laptop())
    other = plan({**HUB_MODEL, "NEURONSERVE_STACK": "2.28"}, laptop())
    assert default.cache_key == named.cache_key
    assert other.cache_key not in (None, default.cache_key)


# --- golden: the same user configurations through every lane ------------------------------------------

TEXT = {"num_key_value_heads": 8, "head_dim": 128}
PIXTRAL = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "text_config": TEXT}
QWEN2_VL = {
    "model_type": "qwen2_vl",
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "text_config": TEXT,
}
PATHS = {
    "/m": ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64),
    "/pixtral": ModelFacts("dir", PIXTRAL, "p" * 64),
    "/qwen2vl": ModelFacts("dir", QWEN2_VL, "q" * 64),
    **ASSET_PATHS,
}
INSTANCES = {"inf2": ("inf2.xlarge", "2"), "trn1": ("trn1.2xlarge", "2"), "trn2": ("trn2.3xlarge", "4")}
EAGLE = {"method": "eagle", "model": "/drafts/eagle", "num_speculative_tokens": 4}
CONFIGS: dict[str, dict[str, str]] = {
    "llama-3.1-8b": {},
    "prefix-caching": {"SM_VLLM_ENABLE_PREFIX_CACHING": "true"},
    "lora": {"SM_VLLM_ENABLE_LORA": "true", "SM_VLLM_LORA_MODULES": "b=/adapters/b"},
    "eagle": {"SM_VLLM_SPECULATIVE_CONFIG": json.dumps(EAGLE)},
    "pixtral-batch-8": {"SM_VLLM_MODEL": "/pixtral", "SM_VLLM_MAX_NUM_SEQS": "8"},
    "qwen2-vl": {"SM_VLLM_MODEL": "/qwen2vl"},
}
# What each lane owes each configuration that it refuses (a phrase of the refusal); the rest plan.
REFUSALS: dict[tuple[str, str], str] = {
    # NxD Inference 0.7.14366 (lane 2.27's, assumed off the image) has no pixtral: test_models.py
    ("2.27", "pixtral-batch-8"): "model type 'pixtral', which NxD Inference 0.7.14366 (assumed",
    ("2.27", "qwen2-vl"): "Qwen2VLForConditionalGeneration cannot be loaded by vllm-neuron 0.2.x",
    ("2.32", "lora"): "LoRA is not in this lane (2.32)",
    ("2.32", "eagle"): "needs on-device sampling in lane 2.32",
    ("2.33", "lora"): "LoRA is not in this lane (2.33)",
    ("2.33", "eagle"): "needs on-device sampling in lane 2.33",
}
VLLM = {lane.lane: lane.vllm for lane in lanes.LANES.values()}


def lane_plan(lane: str, instance: str, config: str) -> LaunchPlan:
    """Llama-3.1-8B (or the config's model) at 4096 tokens and 4 sequences on `instance`, planned on a
    laptop for `lane`."""
    name, tp = INSTANCES[instance]
    env = {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": tp,
        "NEURONSERVE_DEVICE": "neuron",
        "NEURONSERVE_INSTANCE_TYPE": name,
        "NEURONSERVE_STACK": lane,
        **CONFIGS[config],
    }
    return plan(env, facts(None, versions=dict(NO_PLUGIN), paths=PATHS))


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("instance", sorted(INSTANCES))
@pytest.mark.parametrize("lane", sorted(lanes.LANES))
def test_each_lane_plans_its_form_or_owes_its_refusal(lane: str, instance: str, config: str) -> None:
    """Every planned argv is one the lane's own vLLM accepts (its CLI table); every refusal is the one
    the lane owes: an instance it cannot run first (before any download), then its own rules."""
    owed = REFUSALS.get((lane, config))
    if instance not in lanes.LANES[lane].families:
        owed = f"lane {lane} (vllm-neuron {lanes.LANES[lane].vllm_neuron}) runs on trn2, trn2u, trn3 only"
    if owed is not None:
        with pytest.raises(ConfigError) as err:
            lane_plan(lane, instance, config)
        assert owed in str(err.value)
        return
    p = lane_plan(lane, instance, config)
    assert check_argv(p.argv, VLLM[lane]) == []
    assert pins(p.stack) == lanes.LANES[lane].stack_json()
    config_doc = json.loads(p.argv[p.argv.index("--additional-config") + 1])
    if lanes.LANES[lane].generation == "nxdi":
        assert set(config_doc) <= {"override_neuron_config", "max_prompt_length"}
        assert "NEURON_COMPILED_ARTIFACTS" in p.env
    else:
        assert "neuron_config" in config_doc and "override_neuron_config" not in config_doc
        assert "--device" not in p.argv and "NEURON_COMPILED_ARTIFACTS" not in p.env


@pytest.mark.parametrize("config", ["llama-3.1-8b", "prefix-caching", "lora", "eagle"])
@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_2_28_renders_the_same_settings_as_2_27_under_another_key(instance: str, config: str) -> None:
    """The two NxD Inference lanes share the plan: the same override keys and argv, another cache key."""
    old, new = lane_plan("2.27", instance, config), lane_plan("2.28", instance, config)
    assert new.argv == old.argv and new.neuron_override == old.neuron_override
    assert new.files == old.files  # LoRA's adapter list, when named at start
    assert new.cache_key != old.cache_key


def test_the_golden_llama_argv_of_2_27_is_unchanged() -> None:
    p = lane_plan("2.27", "inf2", "llama-3.1-8b")
    assert list(p.argv[3:]) == [
        "--model", "/m", "--host", "127.0.0.1", "--port", "8081",
        "--tensor-parallel-size", "2", "--max-model-len", "4096", "--max-num-seqs", "4",
        "--dtype", "bfloat16", "--no-enable-prefix-caching",
        "--additional-config", '{"override_neuron_config":{}}',
    ]  # fmt: skip
    assert pins(p.stack) == {"lane": "2.27", "sdk": "2.27.1", "vllm_neuron": "0.2.2+lts", "vllm": "0.11.0"}


def test_2_28_runs_pixtral_above_batch_4_and_nests_qwen2_vl() -> None:
    pixtral = lane_plan("2.28", "trn2", "pixtral-batch-8")
    assert pixtral.argv[pixtral.argv.index("--max-num-seqs") + 1] == "8"
    assert set(pixtral.neuron_override or {}) == {"text_neuron_config"}
    qwen = lane_plan("2.28", "inf2", "qwen2-vl")
    # Qwen2-VL's vision encoder also gets what NxD Inference 2.28 asserts of it (test_multimodal_vision.py)
    assert set(qwen.neuron_override or {}) == {"text_neuron_config", "vision_neuron_config"}


def test_2_28_refuses_a_top_level_key_for_qwen2_vl_like_2_27_for_pixtral() -> None:
    env = {**CONFIGS["qwen2-vl"], "SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true"}
    err = refusal(
        {**HUB_MODEL, **env, "NEURONSERVE_STACK": "2.28"}, facts(versions=dict(NO_PLUGIN), paths=PATHS)
    )
    assert "for Qwen2VLForConditionalGeneration vllm-neuron 0.4.1 accepts only text_neuron_config" in str(err)


def test_2_28_loads_gpt_oss_which_2_27_cannot() -> None:
    gpt = {
        "model_type": "gpt_oss",
        "architectures": ["GptOssForCausalLM"],
        "num_key_value_heads": 8,
        "head_dim": 64,
    }
    host = facts(versions=dict(NO_PLUGIN), paths={"/g": ModelFacts("dir", gpt, "g" * 64)})
    env = {**HUB_MODEL, "SM_VLLM_MODEL": "/g", "SM_VLLM_MAX_MODEL_LEN": "128"}
    assert "GPT-OSS cannot be loaded by vllm-neuron 0.2.x" in str(
        refusal({**env, "NEURONSERVE_STACK": "2.27"}, host)
    )
    assert plan({**env, "NEURONSERVE_STACK": "2.28"}, host).stack["lane"] == "2.28"


CPU_SAMPLING = {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"}


def test_structured_outputs_follow_the_lane_on_cpu_sampling() -> None:
    old = plan({**HUB_MODEL, **CPU_SAMPLING, "NEURONSERVE_STACK": "2.27"}, laptop())
    new = plan({**HUB_MODEL, **CPU_SAMPLING, "NEURONSERVE_STACK": "2.28"}, laptop())
    assert old.request_support.structured_outputs is False and new.request_support.structured_outputs is True
    assert "structured_outputs" not in new.request_support.why
    device = plan({**HUB_MODEL, "NEURONSERVE_STACK": "2.28"}, laptop()).request_support
    assert device.structured_outputs is False
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null" in device.why["structured_outputs"]
    for p in (old, new):  # the rest is the same in both lanes: prompt logprobs never
        assert (p.request_support.logprobs, p.request_support.prompt_logprobs) == (True, False)


def test_lora_adapters_are_still_required_per_request_in_2_28() -> None:
    p = lane_plan("2.28", "trn1", "lora")
    assert p.request_support.adapter_required and p.request_support.lora_adapters == ("b",)


def test_2_28_plans_lora_without_named_adapters_and_says_how_they_arrive() -> None:
    env = {**HUB_MODEL, "SM_VLLM_ENABLE_LORA": "true"}
    assert "needs its adapters named" in str(refusal({**env, "NEURONSERVE_STACK": "2.27"}, laptop()))
    modules = {"SM_NEURON_TARGET_MODULES": '["q_proj", "v_proj"]'}  # none: test_lora_lanes.py
    p = plan({**env, **modules, "NEURONSERVE_STACK": "2.28"}, laptop())
    assert any("loads them at run time" in w for w in p.warnings)


def test_eagle3_is_refused_on_both_lanes_as_the_plugin_source_wires_it() -> None:
    """Both plugins turn on NxD Inference's EAGLE path for "eagle" only (plan/lanes/nxdi/speculation.py)."""
    spec = {**EAGLE, "method": "eagle3"}
    env = {"SM_VLLM_SPECULATIVE_CONFIG": json.dumps(spec)}
    for lane, plugin in (("2.27", "0.2.2+lts"), ("2.28", "0.4.1")):
        base = {**CONFIGS["eagle"], **env}
        err = refusal(
            {**HUB_MODEL, **base, "SM_VLLM_MAX_MODEL_LEN": "128", "NEURONSERVE_STACK": lane},
            facts(versions=dict(NO_PLUGIN), paths=PATHS),
        )
        assert f'"method": "eagle3" is not run as asked on vllm-neuron {plugin}' in str(err)


def test_the_plan_command_reports_the_lane_and_refuses_what_it_owes() -> None:
    """`neuronserve plan` end to end (its own process reads the environment and this host's facts)."""
    env = {"SM_VLLM_MODEL": "a/b", "SM_VLLM_MAX_MODEL_LEN": "64", "NEURONSERVE_STACK": "2.28"}
    r = run_cli(["--json", "--device", "cpu"], env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stack"] == lanes.LANE_2_28.stack_json()  # on the CPU: the pins alone
    text = run_cli(["--device", "cpu"], env)
    assert "stack:       lane 2.28 (Neuron SDK 2.28.0, vllm-neuron 0.4.1, vLLM 0.13.0)" in text.stdout
    bad = run_cli(["--device", "cpu"], {**env, "NEURONSERVE_STACK": "2.99"})
    assert bad.returncode == 2 and "NEURONSERVE_STACK" in bad.stderr and "2.32" in bad.stderr
    assert "Traceback" not in bad.stderr
    inf2 = run_cli(
        ["--device", "cpu"], {**env, "NEURONSERVE_STACK": "2.32", "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge"}
    )
    assert inf2.returncode == 2 and "use lane 2.28" in inf2.stderr and "Traceback" not in inf2.stderr


def test_neuronserve_stack_accepts_exactly_the_registrys_lanes() -> None:
    """config/hosttable.py's row reads neuronserve/lane_ids.py, which the registry is keyed by."""
    assert tuple(lanes.LANES) == LANE_IDS
    assert lanes.DEFAULT is lanes.LANES["2.27"]
    for lane in LANE_IDS:
        assert parse_settings({**HUB_MODEL, "NEURONSERVE_STACK": f" {lane} "}).stack == lane
    with pytest.raises(ConfigError) as err:
        parse_settings({**HUB_MODEL, "NEURONSERVE_STACK": "2.29"})
    assert err.value.variables == ("NEURONSERVE_STACK",)
    assert "2.27 | 2.28 | 2.32 | 2.33 (docs/LANES.md)" in VARS["NEURONSERVE_STACK"].help
