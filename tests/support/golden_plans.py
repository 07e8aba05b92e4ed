"""The golden plans: `neuronserve plan --json` documents (or refusals) of a fixed matrix of configurations,
lanes and hosts, kept in tests/data/golden-plans.json so that a change to what the plan prints is a visible,
reviewed diff rather than an accident.

Regenerate after an intended change with `python -m tests.support.golden_plans --write` and read the diff;
`tests/unit/plan/test_golden_plans.py` compares every entry byte for byte.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tests.support.configs import CONFIGS, CONFIGS_0_11_ONLY, LLAMA, VERSIONS

from neuronserve.commands.plan import plan_document
from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.host import clitables
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts

GOLDEN = Path(__file__).parents[1] / "data" / "golden-plans.json"

# No plugin installed: the lane comes from NEURONSERVE_STACK, as on a laptop.
LAPTOP_VERSIONS = {k: v for k, v in VERSIONS.items() if k != "vllm-neuron"}
PATHS = {"/m": ModelFacts("dir", LLAMA, "x", None), "/draft": ModelFacts("dir", LLAMA, "y", True)}
TABLES = clitables.load_all()  # the packaged vLLM option tables, as host/facts.py gathers them

# (name, extra environment, device, facts keyword arguments); a laptop sees no cores, so a configuration
# without a TP is given LAPTOP_TP (its own setting wins).
LAPTOP_TP = {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}
HOSTS: list[tuple[str, dict[str, str], str | None, dict[str, Any]]] = [
    ("neuron-32-cores-2.27", {}, None, {"neuron_devices": 1, "visible_cores": 32, "versions": VERSIONS}),
    ("cpu", {}, "cpu", {"neuron_devices": 0, "visible_cores": None, "versions": LAPTOP_VERSIONS}),
    (
        "laptop-2.28-inf2.48xlarge",
        {"NEURONSERVE_STACK": "2.28", "NEURONSERVE_INSTANCE_TYPE": "ml.inf2.48xlarge"},
        "neuron",
        {"neuron_devices": 0, "visible_cores": None, "versions": LAPTOP_VERSIONS},
    ),
    (
        "laptop-2.27-trn1.32xlarge",
        {"NEURONSERVE_STACK": "2.27", "NEURONSERVE_INSTANCE_TYPE": "trn1.32xlarge"},
        "neuron",
        {"neuron_devices": 0, "visible_cores": None, "versions": LAPTOP_VERSIONS},
    ),
    (
        "laptop-2.32-trn2.48xlarge",
        {"NEURONSERVE_STACK": "2.32", "NEURONSERVE_INSTANCE_TYPE": "trn2.48xlarge"},
        "neuron",
        {"neuron_devices": 0, "visible_cores": None, "versions": LAPTOP_VERSIONS},
    ),
    (
        "laptop-2.33-trn2.3xlarge",
        {"NEURONSERVE_STACK": "2.33", "NEURONSERVE_INSTANCE_TYPE": "trn2.3xlarge"},
        "neuron",
        {"neuron_devices": 0, "visible_cores": None, "versions": LAPTOP_VERSIONS},
    ),
    (
        "laptop-2.27-inf2.xlarge",
        {"NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge"},
        "neuron",
        {"neuron_devices": 0, "visible_cores": None, "versions": LAPTOP_VERSIONS},
    ),
]

# Settings beyond tests/support/configs.py that reach other branches of the plan.
EXTRA_CONFIGS: list[dict[str, str]] = [
    {"SM_VLLM_MODEL": "/m", "SM_VLLM_MAX_MODEL_LEN": "4096", "SM_VLLM_TENSOR_PARALLEL_SIZE": "8"},
    {"SM_VLLM_MODEL": "/m", "SM_VLLM_MAX_MODEL_LEN": "2048", "SM_VLLM_DATA_PARALLEL_SIZE": "2"},
    {"SM_VLLM_MODEL": "/m", "SM_VLLM_MAX_MODEL_LEN": "2048", "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"},
    {"SM_VLLM_MODEL": "/m", "SM_VLLM_MAX_MODEL_LEN": "2048", "SM_VLLM_MAX_NUM_SEQS": "64"},
    {"OPTION_MODEL_ID": "/m", "TENSOR_PARALLEL_DEGREE": "max", "OPTION_N_POSITIONS": "2048"},
    {"SM_VLLM_MODEL": "/m", "SAGEMAKER_BIND_TO_PORT": "9090", "NEURONSERVE_REQUIRE_CACHE_HIT": "true"},
    # An s3:// EAGLE draft (configuration 10 had it with LoRA, a pair refused since:
    # plan/lanes/nxdi/combinations.py).
    {
        "OPTION_MODEL_ID": "org/model",
        "OPTION_N_POSITIONS": "512",
        "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "s3://b/draft/", '
        '"num_speculative_tokens": 3}',
    },
]


# The speed estimate on every instance family and lane that plans it (plan/fit/estimate.py), with real
# model shapes (tests/data/models): (lane, instance, model directory, TP, max_num_seqs, max_model_len),
# and speculation on both kinds of lane (NxD Inference's fused step, vLLM's proposer): EAGLE heads from
# the hub, counted as their targets imply.
MODELS = Path(__file__).parents[1] / "data" / "models"
_SPEC = '{{"method": "{0}", "model": "org/{0}-head", "num_speculative_tokens": {1}}}'
NXDI_EAGLE = {"SM_VLLM_SPECULATIVE_CONFIG": _SPEC.format("eagle", 4)}
NATIVE_EAGLE3 = {
    "SM_VLLM_SPECULATIVE_CONFIG": _SPEC.format("eagle3", 3),
    "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}',
}
ESTIMATE_SPECULATION: dict[str, dict[str, str]] = {"eagle-k4": NXDI_EAGLE, "eagle3-k3": NATIVE_EAGLE3}
ESTIMATE_CASES: list[tuple[str, str, str, int, int, int] | tuple[str, str, str, int, int, int, str]] = [
    ("2.27", "inf2.xlarge", "Llama-3.2-1B", 2, 8, 4096),
    ("2.27", "inf2.48xlarge", "Llama-3.1-8B", 8, 32, 4096),
    ("2.27", "trn1.32xlarge", "Llama-3.3-70B-Instruct", 32, 8, 8192),
    ("2.27", "trn1n.32xlarge", "Mixtral-8x7B-v0.1", 16, 16, 4096),
    ("2.27", "trn2.48xlarge", "Llama-3.3-70B-Instruct", 64, 4, 8192),
    ("2.28", "inf2.24xlarge", "Qwen3-8B", 4, 16, 4096),
    ("2.28", "trn1.2xlarge", "Qwen2.5-7B", 2, 4, 2048),
    ("2.28", "trn2.3xlarge", "Llama-3.1-8B", 4, 32, 4096),
    ("2.32", "trn2.48xlarge", "Llama-3.1-8B", 8, 16, 8192),
    ("2.32", "trn2u.48xlarge", "Qwen3-8B", 16, 64, 4096),
    ("2.33", "trn2.48xlarge", "Qwen3-32B", 16, 8, 8192),
    ("2.33", "trn2.3xlarge", "Llama-3.1-8B", 4, 8, 4096),
    ("2.27", "inf2.48xlarge", "Llama-3.1-8B", 8, 4, 4096, "eagle-k4"),
    ("2.32", "trn2.48xlarge", "Llama-3.1-8B", 8, 2, 2048, "eagle3-k3"),
]


def estimate_entries() -> dict[str, Any]:
    """The plan's `estimate` (and the memory it rests on) for ESTIMATE_CASES."""
    out: dict[str, Any] = {}
    for lane, instance, name, tp, seqs, length, *spec in ESTIMATE_CASES:
        config = json.loads((MODELS / name / "config.json").read_text())
        paths = {"/m": ModelFacts("dir", config, "x", None)}
        facts = HostFacts(
            python="py", cores_source="test", paths=paths, option_tables=TABLES, versions=LAPTOP_VERSIONS
        )
        env = {
            "SM_VLLM_MODEL": "/m",
            "NEURONSERVE_STACK": lane,
            "NEURONSERVE_INSTANCE_TYPE": instance,
            "SM_VLLM_TENSOR_PARALLEL_SIZE": str(tp),
            "SM_VLLM_MAX_NUM_SEQS": str(seqs),
            "SM_VLLM_MAX_MODEL_LEN": str(length),
            "NEURONSERVE_FIT_CHECK": "warn",
            **(ESTIMATE_SPECULATION[spec[0]] if spec else {}),
        }
        doc = plan_document(build_plan(parse_settings(env, device="neuron"), facts))
        out[f"estimate/{lane}-{instance}/{name}" + (f"/{spec[0]}" if spec else "")] = {
            "env": env,
            "estimate": doc["estimate"],
            "memory": doc["memory"],
        }
    return out


def entries() -> dict[str, Any]:
    """Every golden entry, by a stable name: the plan document, or the refusal and its variables."""
    out: dict[str, Any] = {}
    configs = [*CONFIGS, *CONFIGS_0_11_ONLY, *EXTRA_CONFIGS]
    for host_name, host_env, device, kw in HOSTS:
        facts = HostFacts(python="py", cores_source="test", paths=PATHS, option_tables=TABLES, **kw)
        for index, config in enumerate(configs):
            tp_named = any("TENSOR_PARALLEL" in k or k in ("HF_NUM_CORES", "SM_NUM_GPUS") for k in config)
            laptop = kw["visible_cores"] is None and device != "cpu" and not tp_named
            env = {**(LAPTOP_TP if laptop else {}), **config, **host_env}
            key = f"{host_name}/{index:02d}"
            try:
                plan = build_plan(parse_settings(env, device=device), facts)
            except ConfigError as err:
                out[key] = {"env": env, "refused": str(err), "variables": list(err.variables)}
                continue
            doc = plan_document(plan)
            del doc["runs"]  # a CPU plan's is the vLLM installed on this host, not the plan's rules
            out[key] = {"env": env, "plan": doc}
    return {**out, **estimate_entries()}


def render() -> str:
    return json.dumps(entries(), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN.name}")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN} ({len(text)} bytes)")
        return 0
    same = GOLDEN.exists() and GOLDEN.read_text() == text
    print("golden plans unchanged" if same else "golden plans differ (run with --write after review)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
