"""`neuronserve plan`: print the launch plan (JSON or for a person) without touching network or devices.

Top-level imports are stdlib and light neuronserve modules only, so an invalid configuration is
answered in well under a second.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
from typing import Any

from neuronserve.redact import redact_argv, redact_env, redact_text, secret_values
from neuronserve.types import LaunchPlan


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


def plan_document(plan: LaunchPlan) -> dict[str, Any]:
    """The JSON shape of `neuronserve plan --json` (secrets redacted)."""
    return {
        "device": plan.device,
        "argv": redact_argv(plan.argv),
        "env": redact_env(plan.env),
        "model": {"source": plan.model.source, "uri": plan.model.uri, "local_path": plan.model.local_path},
        "neuron_override": plan.neuron_override,
        "cache_key": plan.cache_key,
        "warnings": list(plan.warnings),
        "integration": plan.integration,
        "engine": {"host": plan.engine_host, "port": plan.engine_port},
        "artifacts": dataclasses.asdict(plan.artifacts),
        "serve": dataclasses.asdict(plan.serve),
        "work_dir": plan.work_dir,
    }


def render_text(doc: dict[str, Any]) -> str:
    lines = [
        f"device:      {doc['device']} ({doc['integration']})",
        f"model:       {doc['model']['uri']} ({doc['model']['source']}"
        + (f", read from {doc['model']['local_path']})" if doc["model"]["local_path"] else ")"),
        f"cache key:   {doc['cache_key'] or '-'}",
        f"artifacts:   {doc['artifacts']['mode']} {doc['artifacts']['local_dir'] or ''} "
        f"{doc['artifacts']['remote_uri'] or ''}".rstrip(),
        f"engine:      {doc['engine']['host']}:{doc['engine']['port']}, front port {doc['serve']['port']}",
        "command:",
        "  " + shlex.join(doc["argv"]),
    ]
    if doc["env"]:
        lines.append("environment:")
        lines += [f"  {k}={shlex.quote(v)}" for k, v in sorted(doc["env"].items())]
    if doc["neuron_override"] is not None:
        lines.append("override_neuron_config: " + json.dumps(doc["neuron_override"], sort_keys=True))
    if doc["warnings"]:
        lines.append("warnings:")
        lines += [f"  - {w}" for w in doc["warnings"]]
    return "\n".join(lines)


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    from neuronserve.resolve import resolve_plan  # noqa: PLC0415 (keeps `plan --help` light)

    plan = resolve_plan(environ, device=args.device, extra_args=getattr(args, "extra_args", ()))
    doc = plan_document(plan)
    text = json.dumps(doc, indent=2, sort_keys=False) if args.json else render_text(doc)
    print(redact_text(text, secret_values(environ)))
    return 0
