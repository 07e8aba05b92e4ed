"""plan/fit/estimate.py: the speed estimate's physics, its JSON contract, its wiring into the plan on every
instance family and lane, and its constants against the calibration rows they were fitted on."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

from bench import fit_estimate
from tests.support.golden_plans import ESTIMATE_CASES, MODELS, estimate_entries

from neuronserve.plan.fit import eagle, estimate, instances, memory
from neuronserve.plan.fit.estimate import Compiled, Workload
from neuronserve.plan.lanes import registry

ROOT = Path(__file__).resolve().parents[4]
KEYS = {
    "ttft_ms",
    "tpot_ms",
    "output_tokens_per_s",
    "instance_output_tokens_per_s",
    "input_len",
    "output_len",
    "concurrency",
    "band",
    "band_ratio",
    "basis",
    "generation",
    "decode_step_ms",
    "prefill_ms",
    "speculation",
}
BF16 = memory.Precision(2, 2)


def model(name: str, precision: memory.Precision = BF16) -> memory.Model:
    config = json.loads((MODELS / name / "config.json").read_text())
    return memory.Model(memory.model_shape(config), precision)


LLAMA8 = model("Llama-3.1-8B")
INF2 = instances.instance_facts("inf2.48xlarge")
TRN2 = instances.instance_facts("trn2.48xlarge")
BASE = Compiled(tp=8, dp=1, max_model_len=4096, max_num_seqs=32)
LOAD = Workload(1500, 250, 32)


def run(
    models: list[memory.Model] | None = None,
    c: Compiled = BASE,
    w: Workload = LOAD,
    inst: instances.InstanceFacts = INF2,
) -> estimate.SpeedEstimate:
    return estimate.estimate(models or [LLAMA8], inst, c, w)


# --- the JSON contract ------------------------------------------------------------------------------------


def test_json_has_the_issue_keys_and_a_band_around_each_number() -> None:
    doc = run().as_json()
    assert set(doc) == KEYS
    assert (doc["input_len"], doc["output_len"], doc["concurrency"]) == (1500, 250, 32)
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s", "instance_output_tokens_per_s"):
        low, high = doc["band"][key]
        assert low < doc[key] < high
    assert "optimum-neuron" in doc["basis"] and "docs/FIT.md" in doc["basis"]


def test_workload_defaults_fit_the_compiled_length() -> None:
    assert Workload().resolved(8192, 16) == (1024, 256, 16)
    assert Workload().resolved(512, 4) == (384, 128, 4)  # input at most 3/4, output at most 1/4
    assert Workload(concurrency=100).resolved(4096, 8)[2] == 8  # the rest wait: max_num_seqs run


# --- the physics --------------------------------------------------------------------------------------------


def test_one_user_is_slower_in_total_but_faster_per_token_than_a_full_batch() -> None:
    one, full = run(w=replace(LOAD, concurrency=1)), run()
    assert one.tpot_ms < full.tpot_ms  # the others' prefills stall a full batch
    assert one.output_tokens_per_s < full.output_tokens_per_s
    assert one.decode_step_ms == full.decode_step_ms  # static shapes: the compiled batch runs either way


def test_a_larger_compiled_batch_reads_more_kv_cache_per_step() -> None:
    assert run(c=replace(BASE, max_num_seqs=64)).decode_step_ms > run().decode_step_ms


def test_a_longer_context_reads_a_longer_bucket() -> None:
    assert run(w=Workload(3000, 250, 32)).decode_step_ms > run().decode_step_ms
    assert estimate.bucket(1500, 4096) == 2048 and estimate.bucket(1500, 1024) == 1024
    assert estimate.bucket(1500, 4096, (512, 1024, 4096)) == 4096


def test_dp_multiplies_the_instance_rate_only() -> None:
    one, three = run(), run(c=replace(BASE, dp=3))
    assert three.output_tokens_per_s == one.output_tokens_per_s
    assert math.isclose(three.instance_output_tokens_per_s, 3 * one.instance_output_tokens_per_s)


def test_cpu_sampling_adds_the_logits_round_trip() -> None:
    cpu = run(c=replace(BASE, cpu_sampling=True))
    logits = 32 * LLAMA8.shape.vocab * 4 / estimate.HOST_LOGITS_BYTES_PER_S
    assert math.isclose(cpu.decode_step_ms - run().decode_step_ms, 1000 * (logits + estimate.HOST_SAMPLE_S))


def test_quantized_weights_read_fewer_bytes() -> None:
    assert run([model("Llama-3.1-8B", memory.Precision(2, 1))]).decode_step_ms < run().decode_step_ms


def test_speculation_yields_several_tokens_per_step() -> None:
    one_user = Compiled(tp=8, dp=1, max_model_len=4096, max_num_seqs=1)
    plain = run(c=one_user, w=Workload(1500, 250, 1))
    fused = run(
        [LLAMA8, model("Llama-3.2-1B")], replace(one_user, speculative_tokens=4), Workload(1500, 250, 1)
    )
    assert fused.tpot_ms < plain.tpot_ms
    assert fused.decode_step_ms < plain.decode_step_ms  # per token: the step / (1 + 0.6 x 4)
    slow_accept = run(
        [LLAMA8, model("Llama-3.2-1B")],
        replace(one_user, speculative_tokens=4),
        Workload(1500, 250, 1, acceptance_length=1.0),
    )
    assert slow_accept.tpot_ms > plain.tpot_ms  # nothing accepted: the draft is pure cost
    assert plain.speculation is None
    assert fused.speculation and fused.speculation["tokens_per_step"] == 1 + 4 * estimate.ACCEPTED_FRACTION
    assert fused.speculation["tokens_per_step_basis"].startswith("assumed")
    assert slow_accept.speculation
    assert slow_accept.speculation["tokens_per_step_basis"] == "--acceptance-length"


def test_nxdi_fused_speculation_verifies_one_draft_fewer_over_k_positions() -> None:
    """NxD Inference takes num_speculative_tokens as speculation_length: the target runs over k positions
    and a step yields at most k tokens (model_base.py:1888-1950); vLLM's proposer verifies all k drafts
    over k + 1 positions. Same draft and acceptance per draft: the NxD Inference step is cheaper and
    yields less."""
    one_user = Compiled(tp=8, dp=1, max_model_len=4096, max_num_seqs=1, speculative_tokens=4)
    pair, load = [LLAMA8, model("Llama-3.2-1B")], Workload(1500, 250, 1)
    vllm = run(pair, one_user, load)
    nxdi = run(pair, replace(one_user, nxdi_speculation=True), load)
    assert nxdi.speculation and nxdi.speculation["drafts_verified"] == 3
    assert nxdi.speculation["tokens_per_step"] == 1 + 3 * estimate.ACCEPTED_FRACTION
    assert vllm.speculation and vllm.speculation["drafts_verified"] == 4
    whole_step = [e.decode_step_ms * e.speculation["tokens_per_step"] for e in (vllm, nxdi) if e.speculation]
    assert whole_step[1] < whole_step[0]
    capped = run(pair, replace(one_user, nxdi_speculation=True), replace(load, acceptance_length=9.0))
    assert capped.speculation and capped.speculation["tokens_per_step"] == 4  # k tokens at most


def test_an_eagle_head_costs_its_reads_its_layer_and_its_share_of_the_prefill() -> None:
    two = Compiled(tp=8, dp=1, max_model_len=2048, max_num_seqs=2, speculative_tokens=3)
    load = Workload(512, 128, 2)
    alone = run([LLAMA8], two, load, TRN2)
    headed = run([LLAMA8, eagle.head(LLAMA8, "eagle3")], two, load, TRN2)
    plain = run([LLAMA8], replace(two, speculative_tokens=0), load, TRN2)
    assert headed.decode_step_ms > 1.1 * alone.decode_step_ms
    assert headed.prefill_ms > plain.prefill_ms  # measured: TTFT 63.7 ms with EAGLE3, 51.1 without


def test_the_tutorials_eagle3_rows_are_ordered_as_measured() -> None:
    """vllm-neuron's EAGLE3 tutorial (held out): with the head, Llama-3.1-8B's TTFT is above the
    baseline's, as measured; without it the two were equal."""
    rows = [r for r in fit_estimate.load("heldout.csv") if r.fields["model"] == "Llama-3.1-8B"]
    base = next(r for r in rows if r.fields["row"] == "baseline").predicted()
    spec = next(r for r in rows if r.fields["row"].startswith("eagle3")).predicted()
    assert spec["ttft_ms"] > base["ttft_ms"]
    assert spec["tpot_ms"] < base["tpot_ms"]


def test_a_layers_latency_does_not_shrink_with_tp_so_a_small_model_gains_little_from_it() -> None:
    wide = run(c=replace(BASE, tp=24), inst=INF2)
    assert wide.decode_step_ms > 0.5 * run().decode_step_ms  # 3x the cores, far from 3x faster


def test_a_step_pays_each_layer_and_each_compiled_row_beyond_its_bytes() -> None:
    """The per-layer model (docs/FIT.md): a batch-1 step is its bytes plus layers x (layer_s + row_s); each
    further compiled row adds its KV bytes and layers x row_s."""
    k = estimate.CONSTANTS["NeuronCore-v3"]
    one = Compiled(tp=8, dp=1, max_model_len=4096, max_num_seqs=1)
    w1 = Workload(1500, 250, 1)
    step1 = run(c=one, w=w1, inst=TRN2).decode_step_ms / 1000
    step32 = run(c=replace(one, max_num_seqs=32), w=w1, inst=TRN2).decode_step_ms / 1000
    kv_per_row = estimate._kv_bytes(LLAMA8, 8, 1, 2048) / TRN2.hbm_bytes_per_s_per_core
    assert math.isclose(step32 - step1, 31 * (kv_per_row + LLAMA8.shape.layers * k.row_s), rel_tol=1e-6)
    weights = estimate._weight_bytes(LLAMA8, 8, 1)
    bytes_s = weights / TRN2.hbm_bytes_per_s_per_core + kv_per_row
    assert math.isclose(step1 - bytes_s, LLAMA8.shape.layers * (k.layer_s + k.row_s), rel_tol=1e-6)


def test_an_moe_row_passes_through_attention_and_its_routed_experts() -> None:
    mixtral = model("Mixtral-8x7B-v0.1")
    assert estimate.row_units(LLAMA8.shape) == 1.0
    assert estimate.row_units(mixtral.shape) == (2 + 2 * 2) / 4  # top 2 of 8 experts
    c = Compiled(tp=16, dp=1, max_model_len=4096, max_num_seqs=1)
    one, four = (
        run([mixtral], c, Workload(1024, 256, 1)),
        run([mixtral], replace(c, max_num_seqs=4), Workload(1024, 256, 1)),
    )
    k = estimate.CONSTANTS["NeuronCore-v2"]
    assert four.decode_step_ms - one.decode_step_ms > 1000 * 3 * mixtral.shape.layers * 1.5 * k.row_s


def test_moe_at_one_row_reads_only_the_routed_experts() -> None:
    mixtral = model("Mixtral-8x7B-v0.1")
    c = Compiled(tp=16, dp=1, max_model_len=4096, max_num_seqs=1)
    dense = replace(mixtral, shape=replace(mixtral.shape, experts_per_token=mixtral.shape.experts))
    assert (
        run([mixtral], c, Workload(1024, 256, 1)).decode_step_ms
        < run([dense], c, Workload(1024, 256, 1)).decode_step_ms
    )


def test_an_moe_prefill_pays_each_tokens_pass_through_its_routed_experts() -> None:
    """Expert dispatch (docs/FIT.md): every prompt token, padded to its bucket, passes through its top_k
    experts at row_s per dense-layer unit (two passes per expert of a dense layer's four)."""
    mixtral = model("Mixtral-8x7B-v0.1")
    c = Compiled(tp=16, dp=1, max_model_len=4096, max_num_seqs=1)
    k = estimate.CONSTANTS["NeuronCore-v2"]
    shape = mixtral.shape
    expected = 2048 * shape.layers * k.row_s * 2 * 2 / 4  # 1500 tokens in the 2048 bucket, top 2
    assert math.isclose(estimate.moe_prefill_s(mixtral, INF2, c, 2048), expected)
    assert estimate.moe_prefill_s(LLAMA8, INF2, c, 2048) == 0.0
    top4 = replace(mixtral, shape=replace(shape, experts_per_token=4))
    two, four = (run([m], c, Workload(1500, 250, 1)).prefill_ms for m in (mixtral, top4))
    assert four - two > 1000 * expected  # the passes double, and the FLOPs of two more experts add


def test_prefill_grows_with_the_prompt_and_chunks_when_longer_than_the_buckets() -> None:
    assert run(w=Workload(3000, 250, 1)).ttft_ms > run(w=Workload(1500, 250, 1)).ttft_ms
    chunked = run(c=replace(BASE, context_buckets=(1024,)), w=Workload(3000, 250, 1))
    assert (
        chunked.prefill_ms
        > run(c=replace(BASE, context_buckets=(1024,)), w=Workload(1000, 250, 1)).prefill_ms
    )


def test_trainium2_is_faster_than_inferentia2_at_the_same_tp() -> None:
    assert run(inst=TRN2).tpot_ms < run(inst=INF2).tpot_ms


# --- the constants against what they were fitted on --------------------------------------------------------


def test_the_constants_reproduce_the_calibration_rows_within_their_band() -> None:
    """bench/fit_estimate.py's calibration rows (optimum-neuron @213224e6): at least 70 % of the measured
    TPOT, TTFT and throughput fall inside the band the plan prints (ERROR_BAND, its 80 % band)."""
    rows = [r for r in fit_estimate.load("calibration.csv") if r.fields["fit"] == "1"]
    keys = {"tpot_ms": "tpot_ms", "ttft_ms": "ttft_ms", "instance_tps": "output_tokens_per_s"}
    inside = [
        estimate.ERROR_BAND[keys[q]][0] <= m / p <= estimate.ERROR_BAND[keys[q]][1]
        for _, q, p, m in fit_estimate.errors(rows)
    ]
    assert len(inside) > 60 and sum(inside) / len(inside) >= 0.7
    # and the fit's median errors (docs/FIT.md: 1.11x, 1.35x, 1.18x) hold: a constant moved breaks them
    for q, most in (("tpot_ms", 1.15), ("ttft_ms", 1.4), ("instance_tps", 1.22)):
        factors = [fit_estimate.ratio(p, m) for _, qq, p, m in fit_estimate.errors(rows) if qq == q]
        assert statistics.median(factors) <= most, q


def test_the_constants_are_what_the_fit_finds_on_the_calibration_rows() -> None:
    """`bench/fit_estimate.py fit` from its fixed start, on the calibration rows alone, gives the code's
    constants (to the 4 digits printed): a constant edited by hand, or a fit changed without the code,
    fails."""
    saved, host = dict(estimate.CONSTANTS), estimate.HOST_LOGITS_BYTES_PER_S
    try:
        fitted, fitted_host = fit_estimate.fit(fit_estimate.load("calibration.csv"))
    finally:
        estimate.CONSTANTS.update(saved)
        estimate.HOST_LOGITS_BYTES_PER_S = host
    assert set(fitted) == set(saved)
    for gen, k in fitted.items():
        for name in ("layer_s", "row_s", "prefill_mfu"):
            assert math.isclose(getattr(k, name), getattr(saved[gen], name), rel_tol=1e-3), (gen, name)
    assert math.isclose(fitted_host, host, rel_tol=1e-3)


# --- the plan ---------------------------------------------------------------------------------------------


def test_every_instance_family_and_lane_gets_an_estimate() -> None:
    entries = estimate_entries()
    families = {instances.normalize(i).split(".")[0] for _, i, *_ in ESTIMATE_CASES}
    assert families == {"inf2", "trn1", "trn1n", "trn2", "trn2u"}
    assert {lane for lane, *_ in ESTIMATE_CASES} == set(registry.LANES)
    for name, entry in entries.items():
        est = entry["estimate"]
        assert est is not None and set(est) == KEYS, name
        spec = json.loads(entry["env"].get("SM_VLLM_SPECULATIVE_CONFIG", "null"))
        if spec:  # NxD Inference's lanes verify k - 1 drafts, vLLM's proposer k
            k = spec["num_speculative_tokens"]
            nxdi = registry.LANES[entry["env"]["NEURONSERVE_STACK"]].native is None
            assert est["speculation"]["drafts_verified"] == (k - 1 if nxdi else k), name
        else:
            assert est["speculation"] is None, name
        assert est["concurrency"] == int(entry["env"]["SM_VLLM_MAX_NUM_SEQS"])  # the default: max_num_seqs
