"""The held-out rows of the speed estimate (bench/data/estimate/heldout.csv, docs/FIT.md): each one cited at a
commit, none a copy of a calibration row, and our stack's family checked on both NeuronCore generations."""

from __future__ import annotations

import re

from bench import fit_estimate

from neuronserve.plan.fit import estimate

FAMILIES = {*fit_estimate.OUR_STACK, "transformers-neuronx", "tgi-neuron (optimum)"}


def _measured(row: fit_estimate.Row) -> tuple[object, ...]:
    """What was measured, to a tenth: a copy reads the same however its numbers were written."""
    numbers = (row.measured(q) for q in fit_estimate.QUANTITIES)
    return (row.fields["model"], row.fields["instance"], *(round(n, 1) if n else None for n in numbers))


def test_every_held_out_row_names_its_family_and_a_source_at_a_commit() -> None:
    for row in fit_estimate.load("heldout.csv"):
        assert row.fields["family"] in FAMILIES, row.label
        assert re.search(r"/blob/[0-9a-f]{7,40}/", row.fields["url"]), row.label


def test_no_held_out_row_is_a_copy_of_a_calibration_row() -> None:
    """optimum-neuron's branches carry copies of the calibration files (pull request #1097 has the dp3 and
    dp4 results again): a copy held out would check the fit on what it was fitted on."""
    fitted = {_measured(r) for r in fit_estimate.load("calibration.csv")}
    for row in fit_estimate.load("heldout.csv"):
        assert _measured(row) not in fitted, row.label


def test_our_stacks_held_out_rows_cover_both_generations_with_constants() -> None:
    ours = [r for r in fit_estimate.load("heldout.csv") if fit_estimate.ours(r)]
    generations = {estimate.generation(r.instance).name for r in ours}
    assert generations == {"NeuronCore-v2", "NeuronCore-v3"}
    assert {r.fields["family"] for r in ours} == set(fit_estimate.OUR_STACK)


def test_rows_are_compared_as_their_source_measured_them() -> None:
    """A transformers-neuronx batch row's TTFT is its whole batch's encoding; NxD Inference's fused rows
    verify k - 1 drafts; a published acceptance length is the row's, not the assumption."""
    rows = fit_estimate.load("heldout.csv")
    for row in rows:
        batch_ttft = row.fields["family"] == "transformers-neuronx" and (row.workload.concurrency or 1) > 1
        assert (row.fields["ttft_of_batch"] == "1") == batch_ttft, row.label
        if batch_ttft:
            one = estimate.estimate(row.models, row.instance, row.compiled, row.workload).ttft_ms
            assert row.predicted()["ttft_ms"] == one * (row.workload.concurrency or 1)
    fused = [r for r in rows if r.compiled.nxdi_speculation]
    assert fused and all(r.fields["source"] == "NxD Inference tutorials" for r in fused)
    published = {
        r.fields["model"]: r.workload.acceptance_length for r in rows if r.workload.acceptance_length
    }
    assert published == {"Llama-3.1-8B": 3.22, "gpt-oss-120b": 1.68}


def test_a_one_user_row_whose_throughput_contradicts_its_own_latencies_is_set_aside() -> None:
    """Llama-3.3-70B at TP 64: 36 tokens/s, where its own TTFT (0.8 s) and TPOT (19.6 ms) give 50."""
    rows = {r.label: r for r in fit_estimate.load("heldout.csv")}
    seventy = rows["Llama-3.3-70B trn2.48xlarge TP64x1 bs1 no speculation"]
    assert 0.7 < (seventy.inconsistent() or 0) < 0.75
    assert not any(q == "instance_tps" for _, q, _, _ in fit_estimate.errors([seventy]))
    assert rows["Llama-3.1-405B trn2.48xlarge TP64x1 bs1 bf16"].inconsistent() is None
