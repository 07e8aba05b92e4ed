"""`neuronserve compile`: the cache warmer. Compile once, push the artifacts to the keyed S3 cache, exit.

Why a command of its own: a Neuron compile takes minutes to an hour, and a serving replica that
compiles is a replica that does not serve (autoscaled pods must start on cache hits, with
NEURONSERVE_REQUIRE_CACHE_HIT=true). One command suits a Kubernetes Job, an ECS run-task, a SageMaker
processing or training job and CodeBuild: it reads the same environment as `serve` (and its one flag,
`--device`), makes the same plan, so the same cache key, and opens no HTTP port.

The run: plan (a refusal is exit 2, as for `serve`) -> the remote entry already complete? exit 0 at
once, no download and no engine -> stage the model and assets (`stage.stage_all`) -> start the engine
(`engine.pool`: replica 0 alone with data parallel, as a serving miss does) until its /health answers
(`engine.health`), i.e. compiled and loaded -> stop it -> push the artifacts (`stage.publish_compiled`,
the manifest last) -> exit 0. An engine that exits before READY (or misses SAGEMAKER_STARTUP_TIMEOUT)
is a failed compile: its directory is cleared and the engine started again, up to
NEURONSERVE_COMPILE_RETRIES times, then exit 1 with its last lines. SIGTERM (or SIGINT) stops the
engine and exits 143 (130): the entry is written only by the manifest's single PUT, so a stop never
leaves a half-published entry (an unfinished upload stays under `uploads/<id>/`, named by no manifest).

Without a remote cache there is nothing to warm: exit 2 naming NEURONSERVE_CACHE_URI (a compile into
this job's own disk would be thrown away with it). NEURONSERVE_REQUIRE_CACHE_HIT, which the serving
replicas set, is ignored here with a notice: filling the cache is this command's job.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Any, TypeVar

from neuronserve import logsetup
from neuronserve.commands.serve import redacted_plan
from neuronserve.config.table import VARS
from neuronserve.errors import ConfigError, EngineError, NeuronServeError
from neuronserve.host.secrets import with_secrets
from neuronserve.launchplan import resolve_plan
from neuronserve.redact import redact_text, secret_values
from neuronserve.types import LaunchPlan

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Mapping

log = logging.getLogger("neuronserve.compile")
STOPPED = {"SIGTERM": 143, "SIGINT": 130}  # the exit code of a stop, by signal
POLL_S = 0.1  # as the serve supervisor polls its engines (serve/lifecycle.py)
T = TypeVar("T")


def add_arguments(sub: Any) -> None:
    p = sub.add_parser(
        "compile",
        help="compile the planned model once and push the artifacts to the keyed S3 cache, then exit "
        "(no HTTP port: a Kubernetes Job, ECS task, SageMaker job or CodeBuild step)",
    )
    p.add_argument(
        "--device",
        choices=("neuron", "cpu"),
        default=None,
        help="engine device (default: NEURONSERVE_DEVICE or auto); only a Neuron plan compiles",
    )


def for_compile(plan: LaunchPlan) -> LaunchPlan:
    """The plan `compile` runs: refused (ConfigError, exit 2) when there is nothing to compile or
    nowhere to push it; a required cache hit dropped (compiling is what makes the hit)."""
    if plan.device != "neuron":
        raise ConfigError(
            f"neuronserve compile compiles Neuron graphs; this plan's device is {plan.device}: run it where "
            "NEURONSERVE_DEVICE=neuron (or --device neuron) plans, with the serving containers' settings",
            ("NEURONSERVE_DEVICE",),
        )
    spec = plan.artifacts
    if spec.mode not in ("keyed", "explicit") or not spec.remote_uri:
        raise ConfigError(
            "neuronserve compile warms the remote compile cache and none is set: set NEURONSERVE_CACHE_URI "
            "to the s3:// prefix the serving containers read (a compile kept on this job's disk would be "
            "lost with it)",
            ("NEURONSERVE_CACHE_URI",),
        )
    if spec.read_only:
        raise ConfigError(
            f"NEURONSERVE_CACHE_READ_ONLY=true: neuronserve compile could not push to {spec.remote_uri}; "
            "unset it for the compile job",
            ("NEURONSERVE_CACHE_READ_ONLY",),
        )
    if spec.require_hit:
        log.info("NEURONSERVE_REQUIRE_CACHE_HIT is for serving replicas; compile fills the cache instead")
    return dataclasses.replace(plan, artifacts=dataclasses.replace(spec, require_hit=False))


def cached(plan: LaunchPlan, environ: Mapping[str, str]) -> str | None:
    """How the remote entry is already complete (a hit: nothing to compile), or None (a miss).

    Complete: its manifest names files that are all there with their sizes (one listing, no download);
    an explicit location without our manifest counts as `serve` counts it (stage/cache.py): files and
    no unfinished upload."""
    from neuronserve.stage.cache import read_remote_manifest  # noqa: PLC0415
    from neuronserve.stage.context import StageContext  # noqa: PLC0415
    from neuronserve.stage.paths import parse_s3_uri  # noqa: PLC0415
    from neuronserve.stage.transfer import list_prefix  # noqa: PLC0415

    spec = plan.artifacts
    remote = parse_s3_uri(str(spec.remote_uri)).as_prefix()
    client = StageContext.from_environ(environ).client()
    manifest = read_remote_manifest(client, remote)
    if manifest is None:
        if spec.mode != "explicit":
            return None
        listed = _listing(list_prefix, client, remote)
        if listed and not any(rel.startswith("uploads/") for rel in listed):
            return (
                f"{remote.uri} holds {len(listed)} files without a manifest, which `serve` copies as they are"
            )
        return None
    upload = remote.child(f"uploads/{manifest.upload_id}/")
    sizes = {o.key: o.size for o in _listing(list_prefix, client, upload).values()}
    missing = [f.path for f in manifest.files if sizes.get(f.key or upload.key + f.path) != f.size]
    if missing:
        log.warning(
            "the entry at %s misses %d of its files (e.g. %s): compiling it again",
            remote.uri,
            len(missing),
            missing[0],
        )
        return None
    return f"{remote.uri} holds upload {manifest.upload_id} ({len(manifest.files)} files, complete)"


def _listing(list_prefix: Any, client: Any, remote: Any) -> dict[str, Any]:
    """The objects under the entry by relative path; none is an empty listing, not an error."""
    from neuronserve.errors import StageError  # noqa: PLC0415

    try:
        return {o.rel: o for o in list_prefix(client, remote)}
    except StageError as err:
        if str(err).startswith("no objects under"):
            return {}
        raise


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    logsetup.setup(logsetup.parse_format(environ))
    environ = with_secrets(environ)  # HF_TOKEN_SECRET_ARN, as `serve` reads it
    plan = for_compile(resolve_plan(environ, device=args.device, extra_args=tuple(args.extra_args)))
    retries = int(VARS["NEURONSERVE_COMPILE_RETRIES"].read(environ))
    plan_text = json.dumps(redacted_plan(plan), sort_keys=True)  # as `serve` logs it
    log.info("plan: %s", redact_text(plan_text, secret_values(environ)))
    hit = cached(plan, environ)
    if hit is not None:
        log.info("compile cache hit for key %s: %s; nothing to compile", plan.cache_key, hit)
        return 0
    log.info("compile cache miss for key %s at %s: compiling", plan.cache_key, plan.artifacts.remote_uri)

    import asyncio  # noqa: PLC0415

    return asyncio.run(warm(plan, environ, retries))


class Stopped(Exception):
    """SIGTERM or SIGINT arrived: the run ends with STOPPED[name]."""


async def warm(plan: LaunchPlan, environ: Mapping[str, str], retries: int) -> int:
    """Stage, compile (with retries), stop the engine, push; the exit code."""
    import asyncio  # noqa: PLC0415
    import signal  # noqa: PLC0415

    from neuronserve import stage  # noqa: PLC0415

    stop = asyncio.Event()
    got: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        if not got:
            log.info("%s: stopping the compile", sig.name)
        got.append(sig.name)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        result = await _until_done(stage.stage_all, stop, "stage", plan, environ)
        if result.cache == "hit":  # another compile published it while this one staged
            log.info("compile cache hit after staging (%s): nothing to compile", plan.artifacts.remote_uri)
            return 0
        failure = await _compile(plan, environ, retries, stop, result.artifacts_dir)
        if failure is not None:
            logsetup.fatal(*failure, command="compile")
            return 1
        manifest = await _until_done(stage.publish_compiled, stop, "publish", plan, result, environ)
    except Stopped:
        log.warning("stopped: nothing was published (an entry exists only once its manifest is written)")
        return STOPPED[got[0]]
    except NeuronServeError as err:
        logsetup.fatal(str(err), command="compile")
        return err.exit_code
    if manifest is None:
        logsetup.fatal(
            f"the engine compiled nothing into {result.artifacts_dir}: nothing to push", command="compile"
        )
        return 1
    log.info(
        "compiled and pushed %s (upload %s): serving replicas with this plan hit the cache",
        plan.artifacts.remote_uri,
        manifest.upload_id,
    )
    return 0


async def _until_done(fn: Callable[..., T], stop: asyncio.Event, name: str, *args: Any) -> T:
    """`fn(*args)` on a daemon thread (a stop does not wait for a download or an upload); Stopped when
    a signal comes first."""
    import asyncio  # noqa: PLC0415

    from neuronserve.serve.threads import in_daemon_thread  # noqa: PLC0415

    done = in_daemon_thread(fn, *args, name=name)
    while not done.done():
        if stop.is_set():
            raise Stopped
        await asyncio.sleep(POLL_S)
    return done.result()


async def _compile(
    plan: LaunchPlan, environ: Mapping[str, str], retries: int, stop: asyncio.Event, artifacts: str | None
) -> tuple[str, list[str]] | None:
    """Start the engine until READY, up to 1 + `retries` times; None, or (why, its last lines)."""
    from neuronserve.stage.cache import fresh_dir  # noqa: PLC0415

    attempts = 1 + retries
    for attempt in range(1, attempts + 1):
        if attempt > 1 and artifacts:
            fresh_dir(artifacts)  # what the failed compile left must not be loaded
            log.info("compile attempt %d of %d (NEURONSERVE_COMPILE_RETRIES=%d)", attempt, attempts, retries)
        failed = await _engine_until_ready(plan, environ, stop)
        if failed is None:
            return None
        why, lines = failed
        if attempt < attempts:
            log.warning("%s; its last lines:\n%s", why, "\n".join(f"  | {line}" for line in lines[-15:]))
    return (
        f"the compile failed {attempts} time(s) (NEURONSERVE_COMPILE_RETRIES={retries}); the last: {why}; "
        "its last lines:",
        lines,
    )


async def _engine_until_ready(
    plan: LaunchPlan, environ: Mapping[str, str], stop: asyncio.Event
) -> tuple[str, list[str]] | None:
    """One engine start (replica 0: the one that compiles for every replica, engine/pool.py) watched
    until READY, then stopped; None, or why it failed and its last lines. Stopped on a signal."""
    import asyncio  # noqa: PLC0415
    import time  # noqa: PLC0415

    from neuronserve.engine import health  # noqa: PLC0415
    from neuronserve.engine.pool import ReplicaPool, RPhase  # noqa: PLC0415

    pool = ReplicaPool(plan, environ)
    timeout = plan.serve.startup_timeout_s
    watch: asyncio.Task[None] | None = None
    try:
        pool.start_initial(compile_first=True)
        watch = asyncio.create_task(health.watch(pool))
        started = time.monotonic()
        while not pool.replicas[0].ever_ready:
            if stop.is_set():
                raise Stopped
            fatal = pool.poll()
            first = pool.replicas[0]
            if fatal is not None:
                return fatal.message, fatal.lines
            if first.phase == RPhase.FAILED:  # not fatal to a pool that needs fewer replicas READY
                return f"the {first.detail}", first.proc.last_lines() if first.proc else []
            if timeout and time.monotonic() - started > timeout:
                lines = pool.replicas[0].proc.last_lines() if pool.replicas[0].proc else []
                return f"the engine was not ready after {timeout:.0f} s (SAGEMAKER_STARTUP_TIMEOUT)", lines
            await asyncio.sleep(POLL_S)
        log.info("the engine compiled and loaded (READY): stopping it, then pushing the artifacts")
        return None
    except EngineError as err:
        return str(err), []
    finally:
        if watch is not None:
            watch.cancel()
        codes = await asyncio.to_thread(pool.stop_all)
        log.info("engine stopped (exit %s)", ", ".join(str(c) for c in codes) or "-")
