"""How fast before the compile: TTFT, time per output token and throughput of one compiled configuration.

A physical model with three fitted constants per NeuronCore generation (CONSTANTS); everything else is a
published hardware figure (../shared/ESTIMATE.md, from aws-neuron-sdk about-neuron/arch/neuron-hardware at
commit 81ce03ae) or a shape the plan already computes (plan/fit/memory.py). Pure: no I/O.

Decode step (one token for every live sequence of a replica):
- the core's weight shard is read from HBM (for MoE only the experts that the compiled rows' tokens can
  route to, min(E, rows x top_k) of E, plus the dense part: padding rows route too), quantized
  projections at their width;
- the KV cache of every compiled row up to the token-generation bucket is read: the lane compiles a fixed
  batch (max_num_seqs) and power-of-two length buckets (NxD Inference autobucketing.py:8-19), so a
  request at context c reads the bucket holding c for all max_num_seqs rows, live or not; KV heads are
  the per-core count after replication or MHA conversion (memory.kv_heads_per_core);
- every layer costs `layer_s` (its kernels' launch and its two all-reduces across the TP group; how that
  grows with TP: collective_growth) plus `row_s` per compiled row and dense-layer equivalent of the row's
  matmuls (row_units: an MoE row passes through attention and top_k experts). A fixed cost per step, the
  first version's model, fitted worse: the calibration's dense rows are batch 32, and the per-row cost
  was then paid by every step, batch 1 included (docs/FIT.md);
- with CPU sampling (on_device_sampling_config null) the compiled batch's logits cross to the host:
  max_num_seqs x vocab x 4 bytes at HOST_LOGITS_BYTES_PER_S, plus HOST_SAMPLE_S;
- speculation: one step runs k draft passes (their reads and layers; an EAGLE head with no local
  config.json is the one layer, fc and lm_head its target implies: plan/fit/eagle.py) and one target
  pass that verifies the drafts, and yields `tokens_per_step` tokens: the workload's
  `acceptance_length` when the user knows it (vLLM's own name for the measured mean, which
  `vllm bench serve` prints), else the stated assumption 1 + ACCEPTED_FRACTION x drafts verified.
  How many drafts a step verifies depends on the lane: vLLM's proposer (the rewritten plugin, lanes
  2.32+) verifies all k in a target pass over k + 1 positions (aws-neuron-sdk vllm-neuron/docs/design/
  speculation/speculative_decoding_design.md, "End-to-End Execution Flow"); NxD Inference's fused
  speculation (lanes 2.27, 2.28) takes num_speculative_tokens as speculation_length (vllm-neuron
  0.2.2 neuronx_distributed_model_loader.py:789-793), runs the target over those k positions and
  so verifies k - 1 drafts plus the target's own token (NxD Inference 0.7.14366
  models/model_base.py:1888-1950 and, for EAGLE, :2597-2681).

Prefill (context encoding of one prompt, padded to its context-encoding bucket): 2 x active parameters x
bucket FLOPs plus the attention's 4 x layers x bucket^2 x padded heads x head_dim, at `prefill_mfu` of the
TP cores' BF16 peak; the weight shard read once; each layer's `layer_s` once per pass; the two
all-reduces per layer move bucket x hidden x 2 bytes over the chip-to-chip link when TP spans chips;
MoE prefill pays `row_s` for every token's pass through each routed expert (moe_prefill_s: expert
dispatch, not FLOPs, dominates MoE prefill).

Serving at concurrency C (per replica, every request input_len in and output_len out): requests of equal
length fall into waves: C prefills, each followed by decode steps of the sequences already admitted, then
output_len decode steps of C sequences. A request's tokens wait on average for half of the wave's other
prefills (the first admitted sees C - 1, the last none), so
  tpot = step + (C - 1) / 2 x prefill / output_len,
  output_tokens_per_s = C x output_len / (C x prefill + output_len x step),
  ttft = prefill (a request that finds its slot free; in a wave the k-th prompt also waits k - 1 prefills),
and the instance's rate is DP times the replica's.

The constants come from bench/fit_estimate.py (calibration rows: optimum-neuron benchmark/vllm at commit
213224e6, bench/data/estimate/calibration.csv); docs/FIT.md has the held-out error table and ERROR_BAND is
the 10th-90th percentile of measured / estimated per quantity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neuronserve.plan.fit import memory
from neuronserve.plan.fit.instances import InstanceFacts

MIN_BUCKET = 128
DEFAULT_INPUT_LEN = 1024  # `plan --input-len` default (optimum-neuron's benchmark used ~1500)
DEFAULT_OUTPUT_LEN = 256  # `plan --output-len` default  # autobucketing.py:8-19 starts at 128


@dataclass(frozen=True)
class Generation:
    """Per-chip hardware figures (ESTIMATE.md table) the model uses beside InstanceFacts' HBM ones."""

    name: str
    physical_cores: int
    bf16_flops_per_chip: float
    link_bytes_per_s: float  # chip-to-chip, per chip


NC_V2_INF2 = Generation("NeuronCore-v2", 2, 190e12, 192e9)
NC_V2_TRN1 = Generation("NeuronCore-v2", 2, 190e12, 384e9)
NC_V3 = Generation("NeuronCore-v3", 8, 667e12, 1280e9)
GENERATIONS = {
    "Inferentia2": NC_V2_INF2,
    "Trainium": NC_V2_TRN1,
    "Inferentia2/Trainium": NC_V2_INF2,  # detected devices: the slower link is the safe side
    "Trainium2": NC_V3,
}


@dataclass(frozen=True)
class Constants:
    """The three fitted constants of one NeuronCore generation."""

    layer_s: float  # one layer's fixed latency in a step or prefill pass (kernels, two all-reduces)
    row_s: float  # one layer's time per compiled row (per dense-layer equivalent of a row's matmuls)
    prefill_mfu: float  # fraction of the BF16 peak a prefill reaches


# Fitted by `bench/fit_estimate.py fit` on 2026-12-07 (calibration: bench/data/estimate/calibration.csv).
CONSTANTS = {
    "NeuronCore-v2": Constants(layer_s=2.197e-04, row_s=8.896e-06, prefill_mfu=0.1394),
    "NeuronCore-v3": Constants(layer_s=1.741e-04, row_s=6.887e-06, prefill_mfu=0.2777),
}
# CPU sampling: logits device -> host, fitted with the above (shared by the generations: it is the host's).
HOST_LOGITS_BYTES_PER_S = 4.587e08
HOST_SAMPLE_S = 0.002  # CPU sampling: vLLM's sampler on the host per step
ACCEPTED_FRACTION = 0.6  # speculation: accepted drafts per step / drafts verified (assumed)
# The 80 % band: the 10th and 90th percentiles of measured / estimated over the calibration rows and the
# held-out rows of our stack's family (NxD Inference / vLLM Neuron and vLLM on optimum-neuron: 26 rows on
# inf2 and trn2; `bench/fit_estimate.py fit` prints it; docs/FIT.md).
ERROR_BAND = {"tpot_ms": (0.74, 1.41), "ttft_ms": (0.55, 1.96), "output_tokens_per_s": (0.49, 1.32)}
BASIS = (
    "physical model (HBM reads, per-layer and per-row latency, prefill FLOPs) fitted on optimum-neuron "
    "benchmark/vllm @213224e6; held-out error in docs/FIT.md"
)


@dataclass(frozen=True)
class Workload:
    """What the estimate assumes is served: prompt and output tokens per request, live requests per
    replica (None: the compiled batch, max_num_seqs)."""

    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    acceptance_length: float | None = None  # speculation: mean tokens per step (None: the assumption)

    def resolved(self, max_model_len: int, max_num_seqs: int) -> tuple[int, int, int]:
        """(input_len, output_len, concurrency) with the defaults filled in: DEFAULT_INPUT_LEN in and
        DEFAULT_OUTPUT_LEN out, shortened to fit max_model_len (input at most three quarters of it), and
        max_num_seqs live sequences; a concurrency above max_num_seqs counts max_num_seqs (the rest wait)."""
        out = self.output_len or min(DEFAULT_OUTPUT_LEN, max(1, max_model_len // 4))
        inp = self.input_len or max(1, min(DEFAULT_INPUT_LEN, max_model_len * 3 // 4, max_model_len - out))
        live = max(1, min(self.concurrency or max_num_seqs, max_num_seqs))
        return inp, out, live


@dataclass(frozen=True)
class Compiled:
    """What one replica compiles and how it samples: the plan's graph numbers."""

    tp: int
    dp: int
    max_model_len: int
    max_num_seqs: int
    cpu_sampling: bool = False
    context_buckets: tuple[int, ...] | None = None  # None: autobucketing's powers of two
    speculative_tokens: int = 0  # num_speculative_tokens (0: none)
    nxdi_speculation: bool = False  # NxD Inference fused speculation: k target positions, k - 1 drafts

    @property
    def drafts_verified(self) -> int:
        """Draft tokens one speculative step can accept (see the module docstring)."""
        k = self.speculative_tokens
        return max(0, k - 1) if self.nxdi_speculation else k

    @property
    def target_positions(self) -> int:
        """Positions per row of the target's decode pass."""
        k = self.speculative_tokens
        return k if self.nxdi_speculation and k else 1 + k


@dataclass(frozen=True)
class SpeedEstimate:
    """The estimate of one configuration at one workload. `as_json` is the plan's "estimate" object."""

    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s: float  # one replica
    instance_output_tokens_per_s: float  # all DP replicas
    input_len: int
    output_len: int
    concurrency: int  # per replica
    generation: str
    decode_step_ms: float
    prefill_ms: float
    speculation: dict[str, Any] | None = None  # what a speculative step was taken to yield

    def band(self) -> dict[str, list[float]]:
        """Low and high of each quantity: the estimate times the measured 10th and 90th percentile of
        measured / estimated (ERROR_BAND)."""
        out: dict[str, list[float]] = {}
        for key, value in (
            ("ttft_ms", self.ttft_ms),
            ("tpot_ms", self.tpot_ms),
            ("output_tokens_per_s", self.output_tokens_per_s),
            ("instance_output_tokens_per_s", self.instance_output_tokens_per_s),
        ):
            low, high = ERROR_BAND["output_tokens_per_s" if "tokens_per_s" in key else key]
            out[key] = [_r(value * low), _r(value * high)]
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "ttft_ms": _r(self.ttft_ms),
            "tpot_ms": _r(self.tpot_ms),
            "output_tokens_per_s": _r(self.output_tokens_per_s),
            "instance_output_tokens_per_s": _r(self.instance_output_tokens_per_s),
            "input_len": self.input_len,
            "output_len": self.output_len,
            "concurrency": self.concurrency,
            "band": self.band(),
            "band_ratio": {k: list(v) for k, v in ERROR_BAND.items()},
            "basis": BASIS,
            "generation": self.generation,
            "decode_step_ms": _r(self.decode_step_ms),
            "prefill_ms": _r(self.prefill_ms),
            "speculation": self.speculation,
        }


def _r(x: float) -> float:
    return round(x, 2 if x < 100 else 1)


def generation(instance: InstanceFacts) -> Generation:
    """The chip's NeuronCore generation; a chip without one (and so without fitted constants) has no
    estimate: plan_estimate checks `covers` first, never borrowing another generation's figures."""
    return GENERATIONS[instance.chip]


def covers(instance: InstanceFacts) -> bool:
    """Whether this model has hardware figures and constants for the instance's chip."""
    gen = GENERATIONS.get(instance.chip)
    return gen is not None and gen.name in CONSTANTS


def bucket(tokens: int, max_model_len: int, given: Sequence[int] | None = None) -> int:
    """The compiled length that holds `tokens`: the smallest given bucket that does, else the power of two
    from MIN_BUCKET (autobucketing.py:8-19), capped at max_model_len."""
    if given:
        fitting = [b for b in sorted(given) if b >= tokens]
        return fitting[0] if fitting else max(given)
    size = MIN_BUCKET
    while size < tokens:
        size *= 2
    return min(size, max_model_len)


def _weight_bytes(model: memory.Model, tp: int, live_tokens: int) -> float:
    """The bytes of the core's weight shard that `live_tokens` tokens read (MoE: the experts routed to)."""
    shape, p = model.shape, model.precision
    layout = memory.weight_layout(shape, tp)
    scale = model.checkpoint_params / memory.hf_parameter_count(shape) if model.checkpoint_params else 1.0
    total = (layout.linear * p.linear_bytes + layout.other * p.dtype_bytes) * scale
    if not (shape.experts and shape.experts_per_token):
        return total
    experts = layout.expert_linear * p.linear_bytes * scale
    touched = min(shape.experts, live_tokens * shape.experts_per_token) / shape.experts
    return total - experts * (1 - touched)


def _kv_bytes(model: memory.Model, tp: int, rows: int, length: int) -> float:
    return memory.kv_bytes_per_core(model.shape, tp, rows * length, model.precision.dtype_bytes)


def _active_params(shape: memory.ModelShape, tp: int) -> float:
    """Parameters one token passes through on the whole TP group (padded heads included)."""
    layout = memory.weight_layout(shape, tp)
    linear = float(layout.linear - layout.expert_linear)
    if shape.experts and shape.experts_per_token:
        linear += layout.expert_linear * shape.experts_per_token / shape.experts
    return float(tp * (linear + math.ceil(shape.vocab / tp) * shape.hidden))


def collective_growth(instance: InstanceFacts, tp: int) -> float:
    """How a layer's fixed latency (`layer_s`, its kernels and its two all-reduces) grows with the TP group:
    not at all. Refitted with log2(2 TP) or 1 + log2(chips) instead, the calibration rows are fitted worse
    (loss 4.26 against 4.98 and 5.67), and so is every held-out source: a trn2 layer costs about the same
    at TP 4, 16 and 64 (docs/FIT.md, "Decode: what a step costs beyond its bytes";
    `bench/fit_estimate.py compare` reruns the comparison by replacing this function)."""
    del instance, tp
    return 1.0


def row_units(shape: memory.ModelShape) -> float:
    """A compiled row's matmul passes in one layer, in dense-layer units: a dense layer runs four per row
    (attention's QKV and output, the MLP's gate/up and down); an MoE layer runs attention's two and two
    per routed expert, (2 + 2 x top_k) / 4. The calibration rows are fitted better with this than with 1
    or top_k per row (`bench/fit_estimate.py compare`)."""
    if not (shape.experts and shape.experts_per_token):
        return 1.0
    return (2 + 2 * shape.experts_per_token) / 4


def moe_prefill_s(model: memory.Model, instance: InstanceFacts, c: Compiled, tokens: int) -> float:
    """Expert dispatch in a prefill: every prompt token passes through its top_k experts one by one, as a
    decode row does, at `row_s` per dense-layer unit (two matmul passes per expert of a dense layer's
    four: row_units). Measured MoE prefills are nowhere near their FLOPs or bytes (optimum-neuron's
    Qwen3 MoE: 32-50 ms per layer for 2048 tokens at TP 4 to 64, 0.3-1.5 % of the BF16 peak), but near
    this count: 2-3 us per token, expert and layer (docs/FIT.md, "MoE prefill")."""
    del c
    shape = model.shape
    if not (shape.experts and shape.experts_per_token):
        return 0.0
    row_s = CONSTANTS[generation(instance).name].row_s
    return tokens * shape.layers * row_s * 2 * shape.experts_per_token / 4


def decode_step_s(
    models: Sequence[memory.Model], instance: InstanceFacts, c: Compiled, context: int
) -> float:
    """One decode step of a replica, every compiled row at `context` tokens (see the docstring): static
    shapes, so the live count does not enter; the compiled rows' tokens are what the MoE router spreads."""
    k = CONSTANTS[generation(instance).name]
    bw = instance.hbm_bytes_per_s_per_core
    length = bucket(context, c.max_model_len)
    spec = c.speculative_tokens
    positions = c.target_positions
    growth = collective_growth(instance, c.tp)
    read = layers = 0.0
    for i, m in enumerate(models):
        runs = 1 if i == 0 else spec  # a draft runs once per speculated token, inside the same graph
        rows = c.max_num_seqs * (positions if i == 0 else 1)
        weights = _weight_bytes(m, c.tp, rows)
        read += runs * (weights + _kv_bytes(m, c.tp, c.max_num_seqs, length))
        per_layer = k.layer_s * growth + k.row_s * rows * row_units(m.shape)
        layers += runs * m.shape.layers * per_layer
    step = read / bw + layers
    if c.cpu_sampling:
        logits = c.max_num_seqs * positions * models[0].shape.vocab * 4
        step += logits / HOST_LOGITS_BYTES_PER_S + HOST_SAMPLE_S
    return step


def prefill_s(models: Sequence[memory.Model], instance: InstanceFacts, c: Compiled, input_len: int) -> float:
    """Context encoding of one prompt of `input_len` tokens (see the docstring)."""
    gen = generation(instance)
    k = CONSTANTS[gen.name]
    bw = instance.hbm_bytes_per_s_per_core
    peak = gen.bf16_flops_per_chip / gen.physical_cores * instance.logical_nc_config * c.tp
    chips = max(1, c.tp * instance.logical_nc_config // gen.physical_cores)
    growth = collective_growth(instance, c.tp)
    n = bucket(input_len, c.max_model_len, c.context_buckets)
    passes = math.ceil(input_len / n)  # a prompt longer than the largest bucket: chunks (chunked prefill)
    total = 0.0
    for m in models:
        s = m.shape
        heads = math.ceil(s.heads / c.tp) * c.tp
        context = passes * n
        flops = 2 * _active_params(s, c.tp) * context + 4 * s.layers * n * context * heads * s.head_dim
        weights = _weight_bytes(m, c.tp, n)
        wire = 0.0
        if c.tp > 1 and chips > 1:
            message = n * s.hidden * m.precision.dtype_bytes
            wire = 2 * s.layers * 2 * (c.tp - 1) / c.tp * message / gen.link_bytes_per_s
        total += (
            flops / (peak * k.prefill_mfu)
            + passes * weights / bw
            + moe_prefill_s(m, instance, c, context)
            + passes * (wire + s.layers * k.layer_s * growth)
        )
    return total


def estimate(
    models: Sequence[memory.Model], instance: InstanceFacts, compiled: Compiled, workload: Workload
) -> SpeedEstimate:
    """The estimate of one compiled configuration (models[0] the target, a second its speculative draft)
    serving `workload` on `instance`. The public entry point: `plan` and `plan --recommend` call it."""
    c = compiled
    inp, out, live = workload.resolved(c.max_model_len, c.max_num_seqs)
    context = min(inp + out // 2, c.max_model_len)
    step = decode_step_s(models, instance, c, context)
    speculation = None
    if c.speculative_tokens:
        yielded, assumed = tokens_per_step(c, workload)
        step /= yielded
        speculation = {
            "num_speculative_tokens": c.speculative_tokens,
            "drafts_verified": c.drafts_verified,
            "tokens_per_step": _r(yielded),
            "tokens_per_step_basis": (
                f"assumed: 1 + {ACCEPTED_FRACTION} x drafts verified (--acceptance-length to set it)"
                if assumed
                else "--acceptance-length"
            ),
        }
    prefill = prefill_s(models, instance, c, inp)
    cycle = live * prefill + out * step
    per_replica = live * out / cycle
    return SpeedEstimate(
        ttft_ms=1000 * prefill,
        tpot_ms=1000 * (step + (live - 1) / 2 * prefill / out),
        output_tokens_per_s=per_replica,
        instance_output_tokens_per_s=per_replica * c.dp,
        input_len=inp,
        output_len=out,
        concurrency=live,
        generation=generation(instance).name,
        decode_step_ms=1000 * step,
        prefill_ms=1000 * prefill,
        speculation=speculation,
    )


def tokens_per_step(c: Compiled, workload: Workload) -> tuple[float, bool]:
    """Tokens a speculative step yields, and whether that is the assumption: the workload's
    acceptance_length (at most drafts verified + 1), else 1 + ACCEPTED_FRACTION x drafts verified."""
    if workload.acceptance_length is not None:
        return min(max(1.0, workload.acceptance_length), 1.0 + c.drafts_verified), False
    return 1.0 + ACCEPTED_FRACTION * c.drafts_verified, True


def speculation_text(spec: dict[str, Any]) -> str:
    """What a speculative step was taken to yield, the figure TPOT and throughput rest on most, with how
    to replace it (the `speculation` object of as_json; `plan` and `plan --recommend` print it)."""
    return (
        f"speculation: {spec['tokens_per_step']:g} tokens a step from {spec['drafts_verified']} draft "
        f"token(s) verified (num_speculative_tokens {spec['num_speculative_tokens']}); "
        f"{spec['tokens_per_step_basis']}"
    )
