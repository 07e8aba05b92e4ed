"""`neuronserve plan --recommend`: the configurations of a model that fit an instance, best first.

The shell around plan/fit/recommend.py (pure): read the model's config.json (and safetensors headers when
a local directory is given) and the instance facts (--instance-type, NEURONSERVE_INSTANCE_TYPE, or the
host's devices), then print JSON or a table with the SM_VLLM_* lines of the best configuration.

Ranked by `--rank` (length by default: the user's max_model_len from --max-model-len or the settings
that set it, as `plan` reads them, else the model's own, first). Exit status: 0 with a recommendation,
2 when nothing fits (the document or table is printed all the same, with the reason and where it fits),
as `plan` exits 2 on an HBM refusal.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

import neuronserve.plan.lanes.registry as lanes
from neuronserve.config.fit import parse_fit
from neuronserve.config.table import VARS, read_group
from neuronserve.counts import positive, whole
from neuronserve.errors import ConfigError
from neuronserve.host import facts as hostfacts
from neuronserve.plan.fit import instances, memory, recommend
from neuronserve.plan.fit.instances import GIB, InstanceFacts

NOTHING_FITS = 2  # the exit status when no configuration fits (as `plan` exits on an HBM refusal)


def add_arguments(p: Any) -> None:
    p.add_argument(
        "--recommend",
        action="store_true",
        help="list every TP / DP / max_model_len / max_num_seqs that fits the instance's HBM, best first",
    )
    p.add_argument("--model-config", default=None, help="--recommend: the model's config.json")
    p.add_argument(
        "--model-dir", default=None, help="--recommend: a local model directory (default SM_VLLM_MODEL)"
    )
    p.add_argument(
        "--instance-type",
        default=None,
        help="instance to check the HBM fit for / recommend for, e.g. ml.inf2.48xlarge "
        "(env NEURONSERVE_INSTANCE_TYPE)",
    )
    p.add_argument("--max-model-len", type=int, default=None, help="--recommend: only this length")
    p.add_argument("--max-num-seqs", type=int, default=None, help="--recommend: only this batch size")
    p.add_argument(
        "--rank",
        choices=recommend.RANKS,
        default="length",
        help="--recommend: best first by length (the length wanted: --max-model-len, SM_VLLM_MAX_MODEL_LEN "
        "and the settings that set it, else the model's max_position_embeddings) or by throughput; exit 2 "
        "when nothing fits",
    )


def _model(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, dict[str, Any], int | None]:
    """The model's config.json: --model-config (a file, or a model directory: its config.json and
    safetensors headers, as --model-dir), else --model-dir, else SM_VLLM_MODEL's local directory."""
    if args.model_config and not os.path.isdir(args.model_config):
        try:
            with open(args.model_config, encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as err:
            why = "no such file" if isinstance(err, FileNotFoundError) else err.strerror or str(err)
            raise ConfigError(f"--model-config {args.model_config}: {why}", ("--model-config",)) from None
        except ValueError as err:
            raise ConfigError(
                f"--model-config {args.model_config}: not JSON ({err})", ("--model-config",)
            ) from None
        if not isinstance(doc, dict):
            raise ConfigError(
                f"--model-config {args.model_config}: a config.json is a JSON object", ("--model-config",)
            )
        return args.model_config, doc, None
    path = args.model_config or args.model_dir or VARS["SM_VLLM_MODEL"].read(environ) or ""
    origin = "--model-config" if args.model_config else "--model-dir" if args.model_dir else "SM_VLLM_MODEL"
    if not path:
        raise ConfigError(
            "--recommend needs a model: --model-config config.json or --model-dir DIR", ("--model-config",)
        )
    facts = hostfacts.model_facts(path)
    if facts.kind != "dir" or not facts.config:
        where = "a directory without a config.json" if facts.kind == "dir" else "no local directory"
        raise ConfigError(
            f"{origin}={path}: {where}; pass the model's config.json or the directory that holds it "
            "(--model-config)",
            (origin, "--model-config"),
        )
    return path, facts.config, facts.checkpoint_params


def _instance(args: argparse.Namespace, environ: Mapping[str, str]) -> InstanceFacts:
    lnc = whole(VARS["NEURON_LOGICAL_NC_CONFIG"].read(environ) or "")
    if args.instance_type:
        return instances.instance_facts(args.instance_type, lnc, "--instance-type")
    name = VARS["NEURONSERVE_INSTANCE_TYPE"].read(environ)
    if name:
        return instances.instance_facts(name, lnc, "NEURONSERVE_INSTANCE_TYPE")
    host = hostfacts.gather(environ)
    detected = instances.facts_for_host(host.neuron_devices, host.physical_cores, lnc)
    if detected is None:
        raise ConfigError(
            "--recommend needs an instance: --instance-type (e.g. ml.inf2.xlarge) or "
            "NEURONSERVE_INSTANCE_TYPE",
            ("--instance-type", "NEURONSERVE_INSTANCE_TYPE"),
        )
    return detected


def _check_lane(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """No recommendation for an instance the lane cannot run (the plan would refuse every one of them):
    the lane and the refusal are plan/lanes/registry.py's, as `plan` makes them."""
    stack = read_group(environ, "settings", ("stack",))["stack"]
    host = hostfacts.gather(environ)
    declared = args.instance_type or VARS["NEURONSERVE_INSTANCE_TYPE"].read(environ)
    lanes.check_instance(lanes.choose_lane(stack, host), declared, host)


def _dtype(environ: Mapping[str, str]) -> str:
    """The weights' dtype as SM_VLLM_DTYPE names it (bfloat16 when unset). The row reads it as the engine
    flag's value (a string, or a bool for `true`/`false`, which vLLM refuses and the estimate sizes as 2
    bytes like any other unknown name)."""
    value = VARS["SM_VLLM_DTYPE"].read(environ)
    if value is None:
        return "bfloat16"
    return value.strip() if isinstance(value, str) else str(value).lower()


def render_text(doc: dict[str, Any]) -> str:
    inst, model = doc["instance"], doc["model"]
    lines = [
        f"instance: {inst['name']}: {inst['neuron_cores']} NeuronCores of "
        f"{inst['hbm_bytes_per_core'] / GIB:g} GiB, {inst['hbm_bytes_per_s_per_core'] / 1e9:g} GB/s each",
        f"model:    {model['name']} ({model['parameters'] / 1e9:.2f} B parameters, {model['dtype']})",
    ]
    configs = doc["configurations"]
    if not configs:
        return "\n".join([*lines, "", doc["why_none"]])
    rank = doc["ranking"]
    lines.append(
        f"ranked:   by length, max_model_len {rank['max_model_len']} ({rank['max_model_len_from']}) first"
        if rank["by"] == "length"
        else "ranked:   by projected throughput"
    )
    lines += [f"note:     {doc['note']}"] if "note" in doc else []
    lines += ["", "  TP  DP  max_model_len  max_num_seqs  HBM/core  tokens/s (roofline)  ms/token"]
    for c in configs:
        m = c["memory"]
        lines.append(
            f"{c['tensor_parallel_size']:>4}{c['data_parallel_size']:>4}{c['max_model_len']:>15}"
            f"{c['max_num_seqs']:>14}{100 * m['utilization']:>9.0f}%"
            f"{c['projected_output_tokens_per_s']:>21.0f}"
            f"{c['projected_ms_per_output_token']:>10.2f}"
        )
    lines += ["", "best configuration:"]
    lines += [f"{k}={shlex.quote(v)}" for k, v in configs[0]["env"].items()]
    return "\n".join(lines)


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    name, config, params = _model(args, environ)
    try:
        shape = memory.model_shape(config)
    except memory.ShapeError as err:
        raise ConfigError(f"{name}: {err}", ("--model-config",)) from None
    instance = _instance(args, environ)
    _check_lane(args, environ)
    options = parse_fit(environ)
    if options.hbm_gib_per_core:
        instance = dataclasses.replace(instance, hbm_bytes_per_core=int(options.hbm_gib_per_core * GIB))
    dtype = _dtype(environ)
    size = memory.DTYPE_BYTES.get(dtype.lower(), 2)
    model = memory.Model(shape, memory.Precision(size, size), params)
    overhead = (
        memory.DEFAULT_OVERHEAD_BYTES if options.overhead_gib is None else int(options.overhead_gib * GIB)
    )
    for flag in ("max_model_len", "max_num_seqs"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be a positive integer", (f"--{flag}",))
    doc = recommend.document(
        os.path.basename(os.path.dirname(os.path.abspath(name))) if name.endswith(".json") else name,
        model,
        instance,
        overhead,
        dtype,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        rank=args.rank,
        wanted=_wanted(args, environ),
    )
    print(json.dumps(doc, indent=2) if args.json else render_text(doc))
    return 0 if doc["configurations"] else NOTHING_FITS


def _wanted(args: argparse.Namespace, environ: Mapping[str, str]) -> recommend.Wanted | None:
    """The user's max_model_len: --max-model-len, else the setting `plan` would compile
    (SM_VLLM_MAX_MODEL_LEN, OPTION_N_POSITIONS, MAX_TOTAL_TOKENS, serving.properties, ...); None leaves
    the model's own."""
    if args.max_model_len is not None:
        return recommend.Wanted(args.max_model_len, "--max-model-len")
    from neuronserve.launchplan import read_settings  # noqa: PLC0415 (the settings only when asked)

    settings = read_settings(environ, extra_args=getattr(args, "extra_args", ()))
    value = settings.get("max-model-len")
    if value is None or value is False:
        return None
    origin = settings.origin("max-model-len", "SM_VLLM_MAX_MODEL_LEN")
    tokens = positive(str(value))
    if tokens is None:
        raise ConfigError(f"{origin}={value!r} must be a positive integer", (origin,))
    return recommend.Wanted(tokens, origin)
