"""The configurations the contract tier runs through the stack, on lanes 2.27 and 2.28.

- every feature of docs/FEATURES.md alone and every pair of them, on inf2, trn1 and trn2 (a pair goes to
  one instance family in turn, so each family sees a third of them; each feature alone sees all three);
- the cases issue 25 lists (named `issue-<item>-...`);
- every Neuron plan of the golden matrix (tests/support/golden_plans.py), with its "/m" and "/draft" made
  real model directories (built by tests/contract/planning.py).

A case's settings may name `{model}` and `{draft}`: the model directory of its `model` and the EAGLE draft.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

from tests.support.configs import CONFIGS, CONFIGS_0_11_ONLY
from tests.support.golden_plans import EXTRA_CONFIGS, HOSTS, LAPTOP_TP

INSTANCES = {"inf2": "inf2.48xlarge", "trn1": "trn1.32xlarge", "trn2": "trn2.48xlarge"}
LANES = ("2.27", "2.28")
TEXT_MODEL = "llama-1b-4k"
MULTIMODAL = {"2.27": ("llama4-scout", "pixtral-12b"), "2.28": ("llama4-scout", "pixtral-12b", "qwen2-vl-7b")}
# TP per model: within each instance's cores and dividing the model's heads.
TP = {"llama-1b-4k": "2", "llama4-scout": "8", "pixtral-12b": "8", "qwen2-vl-7b": "4", "mixtral-8x7b-2l": "8"}

BASE = {"SM_VLLM_MODEL": "{model}", "SM_VLLM_MAX_MODEL_LEN": "2048", "SM_VLLM_MAX_NUM_SEQS": "4"}
LORA = {
    "SM_VLLM_ENABLE_LORA": "true",
    "SM_VLLM_LORA_MODULES": "a=s3://adapters/a/ b=s3://adapters/b/",
    "SM_VLLM_MAX_LORAS": "2",
    "SM_VLLM_MAX_LORA_RANK": "16",
}
EAGLE = '{"method": "eagle", "model": "{draft}", "num_speculative_tokens": 4}'
# Each feature as settings (the multimodal models are a feature too: they change the model).
FEATURES: dict[str, dict[str, str]] = {
    "prefix": {"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_BLOCK_SIZE": "32"},
    "chunked": {
        "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
        "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
        "SM_VLLM_BLOCK_SIZE": "32",
    },
    "blockkv": {"SM_NEURON_IS_BLOCK_KV_LAYOUT": "true"},
    "lora": LORA,
    "eagle": {"SM_VLLM_SPECULATIVE_CONFIG": EAGLE},
    "quant": {
        "SM_NEURON_QUANTIZED": "true",
        "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "s3://checkpoints/int8/",
        "SM_NEURON_QUANTIZATION_TYPE": "per_channel_symmetric",
    },
    "cpusampling": {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"},
    "ondevice": {
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"do_sample": true, "dynamic": true, "global_topk": 64}'
    },
    "tools": {"SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true", "SM_VLLM_TOOL_CALL_PARSER": "llama3_json"},
    "multimodal": {},
}
# Settings that combine two features where one alone would be written differently.
PAIR_FIXUPS = {
    frozenset({"cpusampling", "ondevice"}): {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"top_k": 1}'},
}
# A multimodal model takes override keys only under text_neuron_config / vision_neuron_config (vllm-neuron
# loader _validate_image_to_text_override_neuron_config): the features set by an override key, nested.
NESTED = {
    "chunked": ("SM_NEURON_CHUNKED_PREFILL_CONFIG", "chunked_prefill_config"),
    "blockkv": ("SM_NEURON_IS_BLOCK_KV_LAYOUT", "is_block_kv_layout"),
    "cpusampling": ("SM_NEURON_ON_DEVICE_SAMPLING_CONFIG", "on_device_sampling_config"),
    "ondevice": ("SM_NEURON_ON_DEVICE_SAMPLING_CONFIG", "on_device_sampling_config"),
}


def nested(name: str) -> dict[str, str]:
    """The feature's settings for a multimodal model: its override key under text_neuron_config."""
    env = dict(FEATURES[name])
    if name in NESTED:
        var, key = NESTED[name]
        value = json.loads(env.pop(var))
        env["SM_NEURON_OVERRIDE_CONFIG"] = json.dumps({"text_neuron_config": {key: value}})
    return env


@dataclass(frozen=True)
class Case:
    """One configuration: its id, lane, instance type, model and settings (what the stack should do with it
    is the stack's to say; the issue 25 items cases reproduce are in tests/contract/known.py)."""

    id: str
    lane: str
    instance: str
    model: str
    env: dict[str, str]
    golden: str | None = None  # the golden entry it comes from
    host: dict[str, object] = field(default_factory=dict)  # HostFacts fields beyond the instance type


def _with(model: str, *parts: dict[str, str]) -> dict[str, str]:
    env = {**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": TP[model]}
    for part in parts:
        env.update(part)
    if model != TEXT_MODEL:
        env["NEURONSERVE_FIT_CHECK"] = "warn"  # a 109B or 12B model on few cores: estimate said, not refused
    return env


def feature_cases() -> list[Case]:
    out: list[Case] = []
    names = list(FEATURES)
    families = itertools.cycle(INSTANCES)
    for lane in LANES:
        out.append(Case(f"{lane}/base/inf2", lane, INSTANCES["inf2"], TEXT_MODEL, _with(TEXT_MODEL)))
        for name in names:
            models = MULTIMODAL[lane] if name == "multimodal" else (TEXT_MODEL,)
            for model, family in itertools.product(models, INSTANCES):
                env = _with(model, FEATURES[name])
                cid = f"{lane}/{name}/{model}/{family}" if name == "multimodal" else f"{lane}/{name}/{family}"
                out.append(Case(cid, lane, INSTANCES[family], model, env))
        for a, b in itertools.combinations(names, 2):
            models = MULTIMODAL[lane] if "multimodal" in (a, b) else (TEXT_MODEL,)
            for model in models:
                family = next(families)
                parts = (nested(a), nested(b)) if model != TEXT_MODEL else (FEATURES[a], FEATURES[b])
                env = _with(model, *parts, PAIR_FIXUPS.get(frozenset({a, b}), {}))
                suffix = f"/{model}" if model != TEXT_MODEL else ""
                cid = f"{lane}/{a}+{b}{suffix}/{family}"
                out.append(Case(cid, lane, INSTANCES[family], model, env))
    return out


def issue_cases() -> list[Case]:
    """The cases issue 25 lists under "Why", each on both lanes unless the item names one."""
    out: list[Case] = []
    trn1 = INSTANCES["trn1"]
    for lane in LANES:
        quant = {k: v for k, v in FEATURES["quant"].items() if k != "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH"}
        native = {**FEATURES["prefix"], "DISABLE_NEURON_CUSTOM_SCHEDULER": "1"}
        out += [
            Case(
                f"{lane}/issue-3-quantized-without-path",
                lane,
                trn1,
                TEXT_MODEL,
                _with(TEXT_MODEL, quant),
            ),
            Case(
                f"{lane}/issue-4-native-scheduler-prefix",
                lane,
                trn1,
                TEXT_MODEL,
                _with(TEXT_MODEL, native),
            ),
            Case(
                f"{lane}/issue-5-block-kv-alone",
                lane,
                trn1,
                TEXT_MODEL,
                _with(TEXT_MODEL, FEATURES["blockkv"]),
            ),
            Case(
                f"{lane}/issue-9-tool-parser-alone",
                lane,
                trn1,
                TEXT_MODEL,
                _with(TEXT_MODEL, {"SM_VLLM_TOOL_CALL_PARSER": "llama3_json"}),
            ),
            Case(
                f"{lane}/issue-9-on-device-sampling-disabled",
                lane,
                trn1,
                TEXT_MODEL,
                _with(TEXT_MODEL, {"NEURON_ON_DEVICE_SAMPLING_DISABLED": "1"}),
            ),
            Case(
                f"{lane}/issue-9-global-topk-512",
                lane,
                trn1,
                TEXT_MODEL,
                _with(
                    TEXT_MODEL,
                    {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"dynamic": true, "global_topk": 512}'},
                ),
            ),
        ]
        for key, value in (("SM_VLLM_MAX_LORAS", "1"), ("SM_VLLM_MAX_LORA_RANK", "32")):
            env = _with(TEXT_MODEL, LORA, {key: value})
            out.append(Case(f"{lane}/issue-7-lora-{key[8:].lower()}-{value}", lane, trn1, TEXT_MODEL, env))
    # Refusals resting on an estimate (the HBM fit, Pixtral's documented length): each names its override.
    big = {k: v for k, v in _with("llama4-scout").items() if k != "NEURONSERVE_FIT_CHECK"}
    long = {**_with("pixtral-12b"), "SM_VLLM_MAX_MODEL_LEN": "12288"}
    long.pop("NEURONSERVE_FIT_CHECK")
    out += [
        Case("2.27/estimate-hbm-llama4-on-8-cores", "2.27", INSTANCES["inf2"], "llama4-scout", big),
        Case("2.28/estimate-pixtral-above-10240", "2.28", trn1, "pixtral-12b", long),
    ]
    out += [
        Case(
            "2.27/issue-6-pixtral",
            "2.27",
            trn1,
            "pixtral-12b",
            _with("pixtral-12b"),
            ("multimodal",),
        ),
        Case(
            "2.28/issue-11-block-size-256",
            "2.28",
            trn1,
            TEXT_MODEL,
            _with(TEXT_MODEL, FEATURES["prefix"], {"SM_VLLM_BLOCK_SIZE": "256"}),
        ),
        Case(
            "2.27/issue-11-lora-rank-1",
            "2.27",
            trn1,
            TEXT_MODEL,
            _with(TEXT_MODEL, LORA, {"SM_VLLM_MAX_LORA_RANK": "1"}),
        ),
        Case(
            "2.28/issue-11-lora-without-adapters",
            "2.28",
            trn1,
            TEXT_MODEL,
            _with(TEXT_MODEL, {"SM_VLLM_ENABLE_LORA": "true"}),
        ),
    ]
    return out


def issue_42_cases() -> list[Case]:
    """Issue 42 items 3, 5 and 10 on both lanes: a misspelt override key, a length beyond the trained
    positions, and the speculative configurations the plugin does not run as asked."""
    out: list[Case] = []
    trn1 = INSTANCES["trn1"]
    spec = '{{"method": "{method}", "model": "{{draft}}", "num_speculative_tokens": 4}}'
    for lane in LANES:
        settings = {
            "misspelt-override": {"SM_NEURON_SEQUENCE_PARALEL_ENABLED": "true"},
            "beyond-trained-positions": {"SM_VLLM_MAX_MODEL_LEN": "8192"},
            "eagle3": {"SM_VLLM_SPECULATIVE_CONFIG": spec.format(method="eagle3")},
            "ngram": {
                "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "ngram", "num_speculative_tokens": 4, '
                '"prompt_lookup_max": 4}'
            },
            "plain-draft-model": {
                "SM_VLLM_SPECULATIVE_CONFIG": '{"model": "{model}", "num_speculative_tokens": 4}'
            },
            "eagle3-override-with-prefix": {
                **FEATURES["prefix"],
                "SM_VLLM_SPECULATIVE_CONFIG": EAGLE,
                "SM_NEURON_IS_EAGLE3": "true",
            },
        }
        for name, env in settings.items():
            out.append(Case(f"{lane}/issue-42-{name}", lane, trn1, TEXT_MODEL, _with(TEXT_MODEL, env)))
        mixtral = _with("mixtral-8x7b-2l", {"SM_VLLM_SPECULATIVE_CONFIG": EAGLE})
        out.append(
            Case(f"{lane}/issue-42-eagle-llama-draft-on-mixtral", lane, trn1, "mixtral-8x7b-2l", mixtral)
        )
    return out


def golden_cases() -> list[Case]:
    """The golden matrix's Neuron hosts of lanes 2.27 and 2.28, every configuration, as golden_plans.py
    builds it (the laptop hosts get its LAPTOP_TP when the configuration names no TP)."""
    out: list[Case] = []
    configs = [*CONFIGS, *CONFIGS_0_11_ONLY, *EXTRA_CONFIGS]
    for host_name, host_env, device, kw in HOSTS:
        lane = host_env.get("NEURONSERVE_STACK", "2.27")
        if device == "cpu" or lane not in LANES:
            continue
        instance = host_env.get("NEURONSERVE_INSTANCE_TYPE") or INSTANCES["trn1"]
        for index, config in enumerate(configs):
            tp_named = any("TENSOR_PARALLEL" in k or k in ("HF_NUM_CORES", "SM_NUM_GPUS") for k in config)
            laptop = kw["visible_cores"] is None and not tp_named
            env = {**(LAPTOP_TP if laptop else {}), **config, **host_env}
            env = {k: v.replace('"/draft"', '"{draft}"') for k, v in env.items()}
            env = {k: ("{model}" if v == "/m" else v) for k, v in env.items()}
            host = dict(kw)
            golden = f"{host_name}/{index:02d}"
            out.append(Case(f"golden/{golden}", lane, instance, TEXT_MODEL, env, golden=golden, host=host))
    return out


def all_cases() -> list[Case]:
    return [*feature_cases(), *issue_cases(), *issue_42_cases(), *golden_cases()]
