"""`neuronserve serve`: settings -> plan -> front on :8080 -> stage -> engine -> READY -> publish.

Top level imports only the stdlib and light modules; the server stack (fastapi, uvicorn, httpx) is
imported inside `run`, so `neuronserve plan` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import socket
from typing import Any

from neuronserve import logsetup
from neuronserve.errors import EngineError
from neuronserve.host.secrets import with_secrets
from neuronserve.launchplan import resolve_plan
from neuronserve.redact import redact_plan_fields, redact_text, secret_values
from neuronserve.types import LaunchPlan


def add_arguments(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the SageMaker contract (/ping, /invocations) on :8080")
    p.add_argument(
        "--device",
        choices=("neuron", "cpu"),
        default=None,
        help="engine device (default: NEURONSERVE_DEVICE or auto)",
    )


def redacted_plan(plan: LaunchPlan) -> dict[str, Any]:
    """The plan as logged: secret-looking env values and flag values replaced by ***."""
    data = dataclasses.asdict(plan)
    data["argv"], data["env"] = redact_plan_fields(plan.argv, plan.env)
    return data


def _flag(argv: tuple[str, ...], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def url(address: tuple[Any, ...]) -> str:
    """Where a person on this host reaches the front bound to `address` (socket.getsockname())."""
    host, port = str(address[0]), int(address[1])
    if host in ("0.0.0.0", "::"):
        local = "127.0.0.1" if host == "0.0.0.0" else "[::1]"
        return f"http://{local}:{port} (listening on every interface, {host} port {port})"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def summary(plan: LaunchPlan, address: tuple[Any, ...]) -> str:
    """The start in one line: the URL, the model and what shapes its memory; the plan's JSON follows."""
    argv = plan.argv
    name = _flag(argv, "--served-model-name") or plan.model.uri
    shape = [f"{plan.device} device"]
    for flag, label in (("--max-model-len", "max_model_len"), ("--tensor-parallel-size", "TP")):
        value = _flag(argv, flag)
        if value is not None:
            shape.append(f"{label} {value}")
    if len(plan.replicas) > 1:
        shape.append(f"{len(plan.replicas)} engine replicas")
    return (
        f"serving {name} at {url(address)}: model {plan.model.uri} ({plan.model.source}), "
        f"{', '.join(shape)}; /ping answers 200 once the engine is ready"
    )


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise EngineError(
            f"cannot listen on {host}:{port} ({err}): set SAGEMAKER_BIND_TO_PORT to a free port"
        ) from err
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def _listen_shared(host: str, port: int, count: int) -> list[socket.socket]:
    from neuronserve.serve.workers import reuseport_sockets  # noqa: PLC0415

    try:
        return reuseport_sockets(host, port, count)
    except OSError as err:
        raise EngineError(
            f"cannot listen on {host}:{port} ({err}): set SAGEMAKER_BIND_TO_PORT to a free port"
        ) from err


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    logsetup.setup(logsetup.parse_format(environ))
    # HF_TOKEN_SECRET_ARN -> HF_TOKEN, before the plan: staging and the engine inherit the mapping.
    environ = with_secrets(environ)
    plan = resolve_plan(environ, device=args.device, extra_args=tuple(args.extra_args))
    from neuronserve.serve.workers import Workers, usable_cpus, worker_count  # noqa: PLC0415

    count, sizing = worker_count(plan.serve.front_workers, len(plan.replicas))
    # Bind before importing the server stack (~0.5-1.5 s of imports): the kernel accepts connections
    # into the backlog at once, and they are answered as soon as the app is up. With several front
    # workers they start now, importing in parallel with this process (serve/workers.py).
    workers = None
    if count > 1:
        socks = _listen_shared(plan.serve.host, plan.serve.port, count)
        sock = socks[0]
        workers = Workers(plan, environ, socks, logsetup.parse_format(environ))
    else:
        sock = _listen(plan.serve.host, plan.serve.port)
    log = logging.getLogger("neuronserve.serve")
    # One line a person reads first (where, what); the whole plan after it, for the record.
    log.info("%s", redact_text(summary(plan, sock.getsockname()), secret_values(environ)))
    log.info("plan: %s", redact_text(json.dumps(redacted_plan(plan), sort_keys=True), secret_values(environ)))
    for warning in plan.warnings:
        log.warning("%s", warning)
    if sizing:
        log.info("%s", sizing)
    if workers is not None:
        log.info("%d front workers share port %d (NEURONSERVE_FRONT_WORKERS)", count, sock.getsockname()[1])
        cpus = usable_cpus()
        if count > cpus:
            log.warning(
                "NEURONSERVE_FRONT_WORKERS=%d is more than the %d CPU(s) this container may use: the workers "
                "share them with each other and the engines",
                count,
                cpus,
            )
        workers.start()

    from neuronserve.serve import eventloop  # noqa: PLC0415
    from neuronserve.serve.server import serve  # noqa: PLC0415

    return eventloop.run(serve(plan, environ, None if workers else sock, workers))
