"""The plan side of the contract tier: plan each case as `neuronserve plan` would, then lay out on disk
what the engine would find after staging, so the stack reads the plan's own argv, environment and paths.

Model directories are tests/contract/data/models (config.json only: the stack stops before reading any
weight). Staging is played by writing, at each asset's planned local path, what the stack reads of it: the
model's config.json, a LoRA adapter's adapter_config.json (rank = the plan's max_lora_rank), a directory
for a quantized checkpoint, and the files the plan writes itself (plan.files: the LoRA adapter list).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.contract.cases import Case
from tests.support.configs import VERSIONS

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.host.modelfiles import model_facts
from neuronserve.plan import cachekey
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts
from neuronserve.types import LaunchPlan

MODELS = Path(__file__).parent / "data" / "models"
LANE_VERSIONS = {
    "2.27": {k: v for k, v in VERSIONS.items() if k != "vllm-neuron"},
    "2.28": {"vllm": "0.13.0", "neuronx-distributed-inference": "0.8.16251", "neuronx-cc": "2.23.6484.0"},
}
TARGETS = {"inf2": "inf2", "trn1": "trn1", "trn1n": "trn1", "trn2": "trn2", "trn2u": "trn2"}
# Host memory of each instance type in GiB (AWS's instance pages): vLLM sizes its swap space against it.
HOST_MEMORY_GIB = {
    "inf2.xlarge": 16,
    "inf2.8xlarge": 128,
    "inf2.24xlarge": 384,
    "inf2.48xlarge": 768,
    "trn1.2xlarge": 32,
    "trn1.32xlarge": 512,
    "trn2.3xlarge": 128,
    "trn2.48xlarge": 2048,
}
ADAPTER_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]
# Settings whose value the stack cannot read as given (adapters on S3 need staging): never left out and
# added back as they are.
UNRENDERED = frozenset({"SM_VLLM_LORA_MODULES"})


@dataclass
class Planned:
    """A case planned: the plan (or the refusal), what the cache key was computed from, and the request
    for the child (argv after the launch module, environment, device target and TP)."""

    case: Case
    plan: LaunchPlan | None = None
    refusal: ConfigError | None = None
    key_inputs: dict[str, Any] = field(default_factory=dict)
    request: dict[str, Any] | None = None


def model_dirs(root: Path) -> dict[str, Path]:
    """The test models copied under `root`, the draft given an lm_head.weight (EAGLE's rule: the plan
    reads the safetensors header for it)."""
    dirs: dict[str, Path] = {}
    for src in sorted(p for p in MODELS.iterdir() if p.is_dir()):
        dest = root / "models" / src.name
        shutil.copytree(src, dest, dirs_exist_ok=True)
        dirs[src.name] = dest
    header = json.dumps({"lm_head.weight": {"dtype": "BF16", "shape": [1, 1], "data_offsets": [0, 2]}})
    raw = header.encode()
    (dirs["eagle-draft"] / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0\0")
    return dirs


@contextmanager
def capture_key_inputs() -> Iterator[dict[str, Any]]:
    """Record the document plan/cachekey.py hashes while a plan is built (its graph part is the plan's
    prediction of the configuration NxD Inference builds)."""
    seen: dict[str, Any] = {}
    original = cachekey.cache_key

    def spy(*args: Any, **kwargs: Any) -> str:
        seen.update(cachekey.key_inputs(*args, **kwargs))
        return original(*args, **kwargs)

    cachekey.cache_key = spy  # type: ignore[assignment]
    try:
        yield seen
    finally:
        cachekey.cache_key = original  # type: ignore[assignment]


def plan_case(case: Case, root: Path, models: dict[str, Path]) -> Planned:
    work = root / "work" / case.id.replace("/", "__")
    env = {
        k: v.replace("{model}", str(models[case.model])).replace("{draft}", str(models["eagle-draft"]))
        for k, v in case.env.items()
    }
    env["NEURONSERVE_WORK_DIR"] = str(work)
    if case.golden is None:
        env |= {"NEURONSERVE_STACK": case.lane, "NEURONSERVE_INSTANCE_TYPE": case.instance}
    host: dict[str, Any] = {"neuron_devices": 0, "visible_cores": None, "versions": LANE_VERSIONS[case.lane]}
    host |= case.host
    paths = {str(p): model_facts(str(p)) for p in models.values()}
    facts = HostFacts(python="python3", cores_source="test", paths=paths, **host)
    out = Planned(case)
    with capture_key_inputs() as seen:
        try:
            out.plan = build_plan(parse_settings(env, device="neuron"), facts)
        except ConfigError as err:
            out.refusal = err
    out.key_inputs = dict(seen)
    if out.plan is not None:
        out.request = stage(out.plan, case, env, models)
    elif out.refusal is not None:
        out.request = unplanned_request(case, env, facts, out.refusal, models)
    return out


def stage(plan: LaunchPlan, case: Case, env: dict[str, str], models: dict[str, Path]) -> dict[str, Any]:
    """Lay out what staging would, and the child's request: the plan's argv, and the environment the
    engine gets (the container's, the plan's own over it: engine/process.py)."""
    rank = _flag(plan.argv, "--max-lora-rank") or "16"
    for asset in plan.assets:
        local = Path(asset.local)
        if asset.kind in ("model", "draft") and not (local / "config.json").exists():
            local.mkdir(parents=True, exist_ok=True)
            name = "eagle-draft" if asset.kind == "draft" else case.model
            shutil.copy(models[name] / "config.json", local)
        elif asset.kind == "lora":
            local.mkdir(parents=True, exist_ok=True)
            adapter = {"r": int(rank), "lora_alpha": 16, "target_modules": ADAPTER_MODULES}
            (local / "adapter_config.json").write_text(json.dumps(adapter))
        elif asset.is_file:
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text("{{ messages }}")
        else:
            local.mkdir(parents=True, exist_ok=True)
    for path, content in plan.files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    argv = list(plan.argv)
    start = argv.index("--model")
    instance = case.instance.removeprefix("ml.")
    return {
        "id": case.id,
        "argv": argv[start:],
        "env": {**env, **plan.env},
        "target": TARGETS[instance.split(".")[0]],
        "host_memory": HOST_MEMORY_GIB[instance] * 1024**3,
        "tp": int(_flag(argv, "--tensor-parallel-size") or 1),
    }


def unplanned_request(
    case: Case, env: dict[str, str], facts: HostFacts, refusal: ConfigError, models: dict[str, Path]
) -> dict[str, Any] | None:
    """A refused case still runs in the stack, to show whether the stack refuses it too: the plan of the
    same settings without the variables the refusal names, with those variables then added the way the
    stack reads them (a SM_VLLM_* flag as vLLM's flag, a SM_NEURON_* key into override_neuron_config,
    anything else into the engine's environment). None when even that plan is refused."""
    named = [name for name in refusal.variables if name in env and name not in UNRENDERED]
    found = next(filter(None, (_plan_without([name], env, facts) for name in named)), None)
    if found is None:
        return None
    plan, removed = found
    rest = {k: v for k, v in env.items() if k not in removed}
    request = stage(plan, case, rest, models)
    argv, request_env = request["argv"], request["env"]
    config = json.loads(_flag(argv, "--additional-config") or "{}")
    override = config.setdefault("override_neuron_config", {})
    for name, value in removed.items():
        if name.startswith("SM_VLLM_"):
            _set_flag(argv, "--" + name.removeprefix("SM_VLLM_").lower().replace("_", "-"), value)
            if name == "SM_VLLM_ENABLE_CHUNKED_PREFILL" and value.lower() == "true":
                # as the plan renders chunked prefill (plan/lanes/nxdi/engine.py): the custom scheduler
                # off, and the block size and chunk it was given
                request_env["DISABLE_NEURON_CUSTOM_SCHEDULER"] = "1"
                for var in ("SM_VLLM_BLOCK_SIZE", "SM_VLLM_MAX_NUM_BATCHED_TOKENS"):
                    if var in env:
                        _set_flag(
                            argv, "--" + var.removeprefix("SM_VLLM_").lower().replace("_", "-"), env[var]
                        )
        elif name == "SM_NEURON_OVERRIDE_CONFIG":
            _merge(override, json.loads(value))
        elif name.startswith("SM_NEURON_"):
            override[name.removeprefix("SM_NEURON_").lower()] = _json_or_text(value)
        else:
            request_env[name] = value
    if "--additional-config" in argv:
        argv[argv.index("--additional-config") + 1] = json.dumps(config)
    request["unplanned"] = sorted(removed)
    return request


def _plan_without(
    names: list[str], env: dict[str, str], facts: HostFacts
) -> tuple[LaunchPlan, dict[str, str]] | None:
    """The plan of `env` without `names`, and without what each further refusal names in turn (a
    setting that only goes with the removed one, e.g. the chunked prefill config with chunked prefill)."""
    names = list(names)
    for _ in range(4):
        rest = {k: v for k, v in env.items() if k not in names}
        try:
            return build_plan(parse_settings(rest, device="neuron"), facts), {n: env[n] for n in names}
        except ConfigError as err:
            more = [v for v in err.variables if v in env and v not in names and v not in UNRENDERED]
            if not more:
                return None
            names += more
    return None


def _set_flag(argv: list[str], flag: str, value: str) -> None:
    """A flag as vLLM reads it: true = the bare flag, false = absent, else the flag and the value."""
    if flag in argv:
        index = argv.index(flag)
        takes_value = index + 1 < len(argv) and not argv[index + 1].startswith("--")
        del argv[index : index + (2 if takes_value else 1)]
    if value.lower() == "true":
        argv.append(flag)
    elif value.lower() != "false":
        argv += [flag, value]


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None
