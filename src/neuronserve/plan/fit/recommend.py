"""`plan --recommend`: every configuration of a model that fits an instance, ranked by a roofline. Pure.

For each valid TP degree (instances.valid_tp_degrees), DP = cores // TP replicas, each max_model_len
candidate, and the largest max_num_seqs (a power of two up to 256) whose estimate fits the core's HBM.

Projection (an upper bound, stated so it can be checked): decode is HBM-bandwidth-bound, so one
decode step of a replica takes at least (bytes read per step per core) / (HBM bandwidth per core),
where a step reads the core's weight shard (for MoE only the experts that min(E, batch x top_k)
routed tokens can touch) and its whole KV cache (NxD's token-generation graph attends over the
compiled length). tokens/s per replica <= max_num_seqs / step time; the instance's is DP times that.

Ranking (`--rank`): by default the length first. Ranked by throughput alone, the best configuration for
Llama-3.1-8B was max_model_len 1024 on every instance (the shortest length holds the most sequences),
a length nobody asked for. So the length wanted comes first: the user's (`--max-model-len`,
SM_VLLM_MAX_MODEL_LEN and the names that feed it), else the model's own max_position_embeddings; then
the nearest longer lengths (they serve it too), then the longest shorter ones (when the wanted length
fits nowhere: the model's own, capped by memory); each length's configurations by throughput.
`--rank throughput` orders by projected throughput, then step time (per-token latency), as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronserve.plan.fit import instances, memory
from neuronserve.plan.fit.instances import GIB, InstanceFacts

SEQS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MIN_LEN = 1024
RANKS = ("length", "throughput")
MODEL_LENGTH = "config.json max_position_embeddings"
DEFAULT_LENGTH = 8192  # when config.json names no max_position_embeddings


@dataclass(frozen=True)
class Wanted:
    """The max_model_len ranked first and where it came from (a variable, a flag, or config.json)."""

    tokens: int
    source: str


@dataclass(frozen=True)
class Configuration:
    tp: int
    dp: int
    max_model_len: int
    max_num_seqs: int
    estimate: memory.MemoryEstimate
    step_s: float  # lower bound of one decode step (= time per output token of a sequence)
    dtype: str

    @property
    def tokens_per_s(self) -> float:
        return self.dp * self.max_num_seqs / self.step_s

    def env(self) -> dict[str, str]:
        return {
            "SM_VLLM_TENSOR_PARALLEL_SIZE": str(self.tp),
            "SM_VLLM_DATA_PARALLEL_SIZE": str(self.dp),
            "SM_VLLM_MAX_MODEL_LEN": str(self.max_model_len),
            "SM_VLLM_MAX_NUM_SEQS": str(self.max_num_seqs),
            "SM_VLLM_DTYPE": self.dtype,
            "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "tensor_parallel_size": self.tp,
            "data_parallel_size": self.dp,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "memory": self.estimate.as_json(),
            "projected_output_tokens_per_s": round(self.tokens_per_s, 1),
            "projected_ms_per_output_token": round(1000 * self.step_s, 3),
            "env": self.env(),
        }


def lengths(shape: memory.ModelShape, pinned: int | None, wanted: int | None = None) -> list[int]:
    """Powers of two from 1024 to max_position_embeddings (and that limit itself, and a wanted length)."""
    if pinned:
        return [pinned]
    top = shape.max_position_embeddings or DEFAULT_LENGTH
    out = [n for n in (2**k for k in range(10, 21)) if MIN_LEN <= n <= top]
    out += [top] if top not in out and top >= MIN_LEN else []
    return sorted({*out, wanted}) if wanted else out


def wanted_length(shape: memory.ModelShape, given: Wanted | None, pinned: int | None = None) -> Wanted:
    """The user's length when given (a pinned --max-model-len is one), else the model's own."""
    if given is None and pinned:
        given = Wanted(pinned, "--max-model-len")
    return given or Wanted(shape.max_position_embeddings or DEFAULT_LENGTH, MODEL_LENGTH)


def ranked(configs: list[Configuration], rank: str, wanted: int) -> list[Configuration]:
    """`configs` best first: by throughput, or by length (see the module docstring)."""

    def by_throughput(c: Configuration) -> tuple[float, float, int]:
        return (-c.tokens_per_s, c.step_s, c.tp)

    def by_length(c: Configuration) -> tuple[int, int, tuple[float, float, int]]:
        n = c.max_model_len
        group, order = (0, 0) if n == wanted else (1, n) if n > wanted else (2, -n)
        return (group, order, by_throughput(c))

    return sorted(configs, key=by_length if rank == "length" else by_throughput)


def decode_bytes_per_core(model: memory.Model, tp: int, seqs: int, kv_bytes: int) -> float:
    weights = float(memory.weights_bytes_per_core(model.shape, tp, model.precision, model.checkpoint_params))
    shape = model.shape
    if shape.experts and shape.experts_per_token:
        layout = memory.weight_layout(shape, tp)
        expert_bytes = float(layout.expert_linear * model.precision.linear_bytes)
        if model.checkpoint_params:
            expert_bytes = expert_bytes * model.checkpoint_params / memory.hf_parameter_count(shape)
        touched = min(shape.experts, seqs * shape.experts_per_token) / shape.experts
        weights -= expert_bytes * (1 - touched)
    return weights + kv_bytes


def configurations(
    model: memory.Model,
    instance: InstanceFacts,
    overhead: int,
    dtype: str,
    *,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    rank: str = "throughput",
    wanted: int | None = None,
) -> list[Configuration]:
    """Every fitting (TP, length) with its largest batch, best first (`ranked`)."""
    out: list[Configuration] = []
    seqs_choices = (max_num_seqs,) if max_num_seqs else SEQS
    for tp in instances.valid_tp_degrees(instance):
        for length in lengths(model.shape, max_model_len, wanted):
            best: Configuration | None = None
            for seqs in seqs_choices:
                est = memory.estimate([model], tp, seqs * length, instance.hbm_bytes_per_core, overhead)
                if not est.fits:
                    break
                step = decode_bytes_per_core(model, tp, seqs, est.kv_bytes_per_core)
                step_s = step / instance.hbm_bytes_per_s_per_core
                best = Configuration(tp, instance.cores // tp, length, seqs, est, step_s, dtype)
            if best is not None:
                out.append(best)
    return ranked(out, rank, wanted or 0)


def why_none(
    model: memory.Model,
    instance: InstanceFacts,
    overhead: int,
    max_model_len: int | None,
    max_num_seqs: int | None = None,
) -> str:
    """A reason naming the numbers, and the instance types where the model does fit (at the pinned
    --max-num-seqs when there is one: else an instance that fits one sequence would be named as a place
    where the pinned batch fits)."""
    tp = instance.cores
    length = max_model_len or MIN_LEN
    seqs = max_num_seqs or 1
    est = memory.estimate([model], tp, seqs * length, instance.hbm_bytes_per_core, overhead)
    fits_on = []
    for name in instances.INSTANCES:
        other = instances.instance_facts(name)
        if configurations(model, other, overhead, "", max_model_len=max_model_len, max_num_seqs=seqs):
            fits_on.append(name)
    where = ", ".join(fits_on) if fits_on else "no Neuron instance in the table"
    batch = (
        f"one sequence of {length} tokens needs" if seqs == 1 else f"{seqs} sequences of {length} tokens need"
    )
    return (
        f"nothing fits {instance.name}: even at TP {tp} (all {instance.cores} NeuronCores), {batch} "
        f"{est.describe()}. It fits on: {where}. "
        f"(Overhead assumed {overhead / GIB:g} GiB per core: NEURONSERVE_HBM_OVERHEAD_GIB, docs/FIT.md)"
    )


def document(
    name: str,
    model: memory.Model,
    instance: InstanceFacts,
    overhead: int,
    dtype: str,
    *,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    rank: str = "length",
    wanted: Wanted | None = None,
) -> dict[str, Any]:
    """The `plan --recommend --json` shape; "ranking" says by what and which length came first, and
    a "note" when that length fits in no configuration."""
    want = wanted_length(model.shape, wanted, max_model_len)
    configs = configurations(
        model,
        instance,
        overhead,
        dtype,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        rank=rank,
        wanted=want.tokens,
    )
    doc: dict[str, Any] = {
        "instance": instance.as_json(),
        "model": {
            "name": name,
            **model.shape.as_json(),
            "parameters": model.checkpoint_params or memory.hf_parameter_count(model.shape),
            "dtype": dtype,
        },
        "ranking": {"by": rank, "max_model_len": want.tokens, "max_model_len_from": want.source},
        "configurations": [c.as_json() for c in configs],
    }
    if not configs:
        doc["why_none"] = why_none(model, instance, overhead, max_model_len, max_num_seqs)
    elif rank == "length" and configs[0].max_model_len != want.tokens:
        doc["note"] = (
            f"max_model_len {want.tokens} ({want.source}) fits in no configuration on {instance.name}: "
            f"the longest that does, {configs[0].max_model_len}, comes first"
        )
    return doc
