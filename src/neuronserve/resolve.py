"""resolve_plan: settings + host facts -> LaunchPlan, the one call serve/stage/plan commands make.

TEMPORARY minimal version (CPU only, SM_VLLM_* flags, a local model directory) so the serve and stage
work can start; the launch-plan issue replaces the body with the full settings/facts/plan pipeline.
The signature is the contract and stays.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence

from neuronserve.errors import ConfigError
from neuronserve.types import LaunchPlan, ModelSpec, ServeOptions


def _flag_tokens(name: str, value: str) -> list[str]:
    flag = "--" + name.lower().replace("_", "-")
    low = value.strip().lower()
    if low in ("", "true"):
        return [flag]
    if low == "false":
        return []
    if value.strip().startswith("["):
        items = json.loads(value)
        return [flag, *[str(i) for i in items]] if items else []
    return [flag, value]


def _serve_options(environ: Mapping[str, str], port: int) -> ServeOptions:
    """TEMPORARY: the front's settings (the full plan maps the same names with validation)."""
    startup = environ.get("SAGEMAKER_STARTUP_TIMEOUT")
    return ServeOptions(
        port=port,
        max_payload_mb=float(environ.get("SAGEMAKER_MAX_PAYLOAD_IN_MB", "6")),
        max_concurrency=int(environ.get("NEURONSERVE_MAX_CONCURRENCY", "256")),
        request_timeout_s=float(environ.get("SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS", "600")),
        drain_grace_s=float(environ.get("NEURONSERVE_DRAIN_GRACE_S", "25")),
        startup_timeout_s=float(startup) if startup else None,
    )


def resolve_plan(
    environ: Mapping[str, str],
    *,
    device: str | None = None,
    extra_args: Sequence[str] = (),
) -> LaunchPlan:
    """Build the launch plan from an environment mapping (read once by the CLI) and CLI choices."""
    model = environ.get("SM_VLLM_MODEL") or environ.get("HF_MODEL_ID")
    if not model:
        raise ConfigError("no model configured: set SM_VLLM_MODEL or HF_MODEL_ID", ("SM_VLLM_MODEL",))
    port = int(environ.get("SAGEMAKER_BIND_TO_PORT", "8080"))
    engine_port = int(environ.get("NEURONSERVE_ENGINE_PORT", "8081"))
    work_dir = environ.get("NEURONSERVE_WORK_DIR", "/tmp/neuronserve")
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    argv += ["--host", "127.0.0.1", "--port", str(engine_port)]
    for key in sorted(environ):
        if key.startswith("SM_VLLM_") and key != "SM_VLLM_MODEL":
            argv += _flag_tokens(key[len("SM_VLLM_") :], environ[key])
    argv += list(extra_args)
    return LaunchPlan(
        device="cpu",
        argv=tuple(argv),
        env={},
        model=ModelSpec(source="local", uri=model, local_path=model, origin="SM_VLLM_MODEL"),
        neuron_override=None,
        cache_key=None,
        warnings=(),
        engine_port=engine_port,
        serve=_serve_options(environ, port),
        work_dir=work_dir,
        integration="cpu",
    )
