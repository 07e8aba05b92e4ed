"""`neuronserve plan --recommend`: the configurations of a model that `plan` accepts on an instance, best
first by a goal, each with the plan's speed estimate and the settings to paste.

The shell around plan/fit/recommend.py (pure): read the model's config.json (and safetensors headers when
a local directory is given), the instance (--instance-type, NEURONSERVE_INSTANCE_TYPE, or the host's
devices) and the price (plan/fit/prices.py, --price-per-hour), then plan every candidate with the very
build_plan `neuronserve plan` runs: the user's settings, the model's directory, the instance and the
candidate's SM_VLLM_* on top. Before any candidate, the user's own settings are planned once with the
fit check off (`_preflight`): what `plan` refuses whatever the TP (the model, the instance, the lane, a
malformed setting) is refused here with the plan's own error, exit 2.

Exit status: 0 with a recommendation; 2 when the plan refuses (its error), and when nothing fits or
nothing meets --max-tpot-ms / --max-ttft-ms (the document or table is printed all the same, with the
reason).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

from neuronserve.config.fit import parse_fit
from neuronserve.config.table import VARS
from neuronserve.counts import positive, whole
from neuronserve.errors import ConfigError
from neuronserve.host import facts as hostfacts
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import instances, memory, prices, recommend
from neuronserve.plan.fit.estimate import speculation_text
from neuronserve.plan.fit.instances import GIB, InstanceFacts
from neuronserve.types import LaunchPlan

NOTHING_FITS = 2  # the exit status when no configuration fits (as `plan` exits on an HBM refusal)


def add_arguments(p: Any) -> None:
    p.add_argument(
        "--recommend",
        action="store_true",
        help="list the TP / DP / max_model_len / max_num_seqs that plan accepts on the instance, each with "
        "its speed estimate, best first by --goal",
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
        "and the settings that set it, else the model's max_position_embeddings), then by --goal; or by "
        "--goal alone (`goal`, old name `throughput`)",
    )
    p.add_argument(
        "--goal",
        choices=recommend.GOALS,
        default="throughput",
        help="--recommend: rank by the estimate's instance output tokens/s (throughput), its TPOT "
        "(latency) or dollars per million output tokens (cost: on-demand price, docs/FIT.md)",
    )
    p.add_argument(
        "--price-per-hour",
        type=float,
        default=None,
        help="--recommend: the instance's USD per hour for --goal cost (default: the dated on-demand "
        "table, plan/fit/prices.py, SageMaker rates for ml. types; a type or region it lacks needs it)",
    )
    p.add_argument(
        "--region",
        default=None,
        help="--recommend: the region of the on-demand price (default AWS_REGION, AWS_DEFAULT_REGION, "
        f"else {prices.DEFAULT_REGION})",
    )
    p.add_argument(
        "--max-tpot-ms", type=float, default=None, help="--recommend: drop configurations estimated slower"
    )
    p.add_argument(
        "--max-ttft-ms", type=float, default=None, help="--recommend: drop configurations estimated slower"
    )


def _model(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str, ModelFacts]:
    """(name, directory the plan reads, its facts): --model-config (a config.json, or a model directory:
    its config.json and safetensors headers, as --model-dir), else --model-dir, else SM_VLLM_MODEL's
    local directory. A lone config.json stands for its directory (the plan is given its facts)."""
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
        where = os.path.dirname(args.model_config) or "."  # as the user wrote it: the plan's errors name it
        return args.model_config, where, ModelFacts(kind="dir", config=doc)
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
    return path, path, facts


def _instance(
    args: argparse.Namespace, environ: Mapping[str, str], host: HostFacts | None = None
) -> InstanceFacts:
    """--instance-type, else NEURONSERVE_INSTANCE_TYPE, else the host's devices. The flag is named as the
    variable it sets (as `plan --instance-type` does), so the errors are the plan's."""
    lnc = whole(VARS["NEURON_LOGICAL_NC_CONFIG"].read(environ) or "")
    name = args.instance_type or VARS["NEURONSERVE_INSTANCE_TYPE"].read(environ)
    if name:
        return instances.instance_facts(name, lnc, "NEURONSERVE_INSTANCE_TYPE")
    host = host or hostfacts.gather(environ)
    detected = instances.facts_for_host(host.neuron_devices, host.physical_cores, lnc)
    if detected is None:
        raise ConfigError(
            "--recommend needs an instance: --instance-type (e.g. ml.inf2.xlarge) or "
            "NEURONSERVE_INSTANCE_TYPE",
            ("--instance-type", "NEURONSERVE_INSTANCE_TYPE"),
        )
    return detected


def _dtype(environ: Mapping[str, str]) -> str:
    """The weights' dtype as SM_VLLM_DTYPE names it (bfloat16 when unset). The row reads it as the engine
    flag's value (a string, or a bool for `true`/`false`, which vLLM refuses and the estimate sizes as 2
    bytes like any other unknown name)."""
    value = VARS["SM_VLLM_DTYPE"].read(environ)
    if value is None:
        return "bfloat16"
    return value.strip() if isinstance(value, str) else str(value).lower()


class _Planner:
    """Plans the user's settings with a candidate's on top, as `neuronserve plan` would on the instance:
    the model's directory, NEURONSERVE_DEVICE=neuron, the instance, and the HBM fit check on (refuse)."""

    def __init__(
        self, args: argparse.Namespace, environ: Mapping[str, str], model_dir: str, model: ModelFacts
    ):
        from neuronserve.plan.fit.estimate import Workload  # noqa: PLC0415 (the estimate only when asked)

        self.base = {**environ, "SM_VLLM_MODEL": model_dir, "NEURONSERVE_DEVICE": "neuron"}
        self.extra = tuple(getattr(args, "extra_args", ()))
        # plan's --input-len/--output-len/--concurrency/--acceptance-length, as commands/plan.py reads them
        self.workload = Workload(
            args.input_len, args.output_len, args.concurrency, getattr(args, "acceptance_length", None)
        )
        host = hostfacts.gather(environ)
        self.facts = dataclasses.replace(host, paths={**host.paths, model_dir: model})

    def __call__(self, env: Mapping[str, str], fit: str = "refuse") -> LaunchPlan:
        from neuronserve.launchplan import read_settings  # noqa: PLC0415 (the settings only when asked)
        from neuronserve.plan.build import build_plan  # noqa: PLC0415

        merged = {**self.base, "NEURONSERVE_FIT_CHECK": fit, **env}
        settings = read_settings(merged, device="neuron", extra_args=self.extra)
        return build_plan(settings, self.facts, workload=self.workload)


def _preflight(plan_of: _Planner) -> None:
    """Plan the user's settings once, whatever the TP (1, one replica) and without the fit check: what
    the plan refuses then (the model, the instance, the lane, a malformed setting) it refuses for every
    candidate, and `--recommend` refuses with the plan's own error."""
    plan_of({"SM_VLLM_TENSOR_PARALLEL_SIZE": "1", "SM_VLLM_DATA_PARALLEL_SIZE": "1"}, fit="off")


def _goal(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[recommend.Goal, prices.Price | None]:
    """The goal, its filters and the instance's price (--price-per-hour, else the table's; a cost goal
    without a price is refused, naming the flag)."""
    for flag in ("price_per_hour", "max_tpot_ms", "max_ttft_ms"):
        value = getattr(args, flag)
        if value is not None and not value > 0:
            raise ConfigError(f"--{flag.replace('_', '-')} must be a positive number", (f"--{flag}",))
    name = args.instance_type or VARS["NEURONSERVE_INSTANCE_TYPE"].read(environ) or ""
    region = (
        args.region
        or VARS["AWS_REGION"].read(environ)
        or VARS["AWS_DEFAULT_REGION"].read(environ)
        or prices.DEFAULT_REGION
    )
    price: prices.Price | None
    if args.price_per_hour is not None:
        price = prices.Price(args.price_per_hour, name, None, "--price-per-hour")
    else:
        price = prices.on_demand(name, region) if name else None
    if args.goal == "cost" and price is None:
        market = "SageMaker " if name.strip().lower().startswith("ml.") else ""
        market += f"no on-demand price for {name or 'a detected instance'} in {region}"
        raise ConfigError(
            f"--goal cost needs the instance's hourly price: {market} (plan/fit/prices.py, "
            f"{prices.DATE}); pass --price-per-hour USD",
            ("--price-per-hour", "--goal"),
        )
    goal = recommend.Goal(
        args.goal, args.max_tpot_ms, args.max_ttft_ms, None if price is None else price.usd_per_hour
    )
    return goal, price


def _seconds(ms: float) -> str:
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def render_text(doc: dict[str, Any]) -> str:
    inst, model, rank = doc["instance"], doc["model"], doc["ranking"]
    lines = [
        f"instance: {inst['name']}: {inst['neuron_cores']} NeuronCores of "
        f"{inst['hbm_bytes_per_core'] / GIB:g} GiB, {inst['hbm_bytes_per_s_per_core'] / 1e9:g} GB/s each",
        f"model:    {model['name']} ({model['parameters'] / 1e9:.2f} B parameters, {model['dtype']})",
    ]
    price = doc.get("price")
    if price:
        table = f"on demand in {price['region']}: plan/fit/prices.py of {prices.DATE}"
        where = "--price-per-hour" if price["source"] == "--price-per-hour" else table
        lines.append(f"price:    ${price['usd_per_hour']:g}/h ({where})")
    goal = {
        "throughput": "instance output tokens/s",
        "latency": "TPOT",
        "cost": "$ per million output tokens",
    }
    order = f"by {rank['goal']} ({goal[rank['goal']]})"
    lines.append(
        f"ranked:   by length, max_model_len {rank['max_model_len']} ({rank['max_model_len_from']}) first, "
        f"then {order}"
        if rank["by"] == "length"
        else f"ranked:   {order}"
    )
    lines += [f"note:     {doc['note']}"] if "note" in doc else []
    lines += [f"dropped:  {d['count']} x {d['reason']}" for d in doc["dropped"]]
    configs = doc["configurations"]
    if not configs:
        return "\n".join([*lines, "", doc["why_none"]])
    est = configs[0]["estimate"]
    lines += [
        f"estimate: {est['input_len']} tokens in, {est['output_len']} out per request, max_num_seqs live "
        "per replica (--input-len, --output-len, --concurrency)",
        f"basis:    {est['basis']}",
    ]
    lines += [speculation_text(est["speculation"])] if est.get("speculation") else []
    cost = doc.get("price") is not None
    head = "  TP  DP  max_model_len  max_num_seqs  HBM/core  TTFT ms  TPOT ms  tokens/s (instance)"
    lines += ["", head + ("  $/M tokens" if cost else "")]
    for c in configs:
        e = c["estimate"]
        row = (
            f"{c['tensor_parallel_size']:>4}{c['data_parallel_size']:>4}{c['max_model_len']:>15}"
            f"{c['max_num_seqs']:>14}{100 * c['memory']['utilization']:>9.0f}%"
            f"{_seconds(e['ttft_ms']):>9}{_seconds(e['tpot_ms']):>9}{e['instance_output_tokens_per_s']:>21,.0f}"
        )
        cost_of = c["usd_per_million_output_tokens"]
        lines.append(row + (f"{cost_of:>12.3f}" if cost and cost_of is not None else ""))
    lines += ["", "best configuration:"]
    lines += [f"{k}={shlex.quote(v)}" for k, v in configs[0]["env"].items()]
    return "\n".join(lines)


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.instance_type:  # read like the variable, as `plan --instance-type` does
        instances.refuse_unserved(args.instance_type, "--instance-type")  # named as typed, as plan does
        environ = {**environ, "NEURONSERVE_INSTANCE_TYPE": args.instance_type}
    for flag in ("max_model_len", "max_num_seqs"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be a positive integer", (f"--{flag}",))
    name, model_dir, facts = _model(args, environ)
    try:
        shape = memory.model_shape(facts.config or {})
    except memory.ShapeError as err:
        raise ConfigError(f"{name}: {err}", ("--model-config",)) from None
    plan_of = _Planner(args, environ, model_dir, facts)
    _preflight(plan_of)
    instance = _instance(args, environ, plan_of.facts)
    options = parse_fit(environ)
    if options.hbm_gib_per_core:
        instance = dataclasses.replace(instance, hbm_bytes_per_core=int(options.hbm_gib_per_core * GIB))
    goal, price = _goal(args, environ)
    dtype = _dtype(environ)
    size = memory.DTYPE_BYTES.get(dtype.lower(), 2)
    overhead = (
        memory.DEFAULT_OVERHEAD_BYTES if options.overhead_gib is None else int(options.overhead_gib * GIB)
    )
    request = recommend.Request(
        name=os.path.basename(os.path.dirname(os.path.abspath(name))) if name.endswith(".json") else name,
        model=memory.Model(shape, memory.Precision(size, size), facts.checkpoint_params),
        instance=instance,
        overhead=overhead,
        dtype=dtype,
        lnc=(VARS["NEURON_LOGICAL_NC_CONFIG"].read(environ) or "").strip() or None,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        rank=args.rank,
        wanted=_wanted(args, environ),
        goal=goal,
    )
    doc = recommend.document(request, plan_of)
    doc["price"] = None if price is None else price.as_json()
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
