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
