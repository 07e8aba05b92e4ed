"""Every configuration, planned by neuronserve and run through its lane's stack (the real vLLM,
vllm-neuron and NxD Inference code: tests/contract/child.py), must agree: what the plan accepts builds,
with the numbers the plan states and the configuration its cache key predicts; what it refuses on a stack
rule, the stack refuses.

Where the two disagree today because a fix is under way elsewhere, the case is a strict xfail naming the
issue item (tests/contract/known.py).
"""

from __future__ import annotations

import pytest
from tests.contract import checks, known, sources
from tests.contract.cases import all_cases
from tests.contract.session import Outcome, Run

if (REASON := sources.missing()) is not None:
    pytest.skip(REASON, allow_module_level=True)


def _params() -> list[object]:
    out: list[object] = []
    for case in all_cases():
        why = known.reason(case.id)
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(case.id, id=case.id, marks=marks))
    return out


def _outcome(contract: Run, case_id: str) -> Outcome:
    return contract.outcomes[case_id]


def _stack_error(outcome: Outcome) -> str:
    stack = outcome.stack or {}
    err = stack.get("error") or {}
    return f"{err.get('type')} at {err.get('where')}: {err.get('message')}"


@pytest.mark.parametrize("case_id", _params())
def test_the_stack_agrees_with_the_plan(contract: Run, case_id: str) -> None:
    """Accepted: built up to the compile, with the plan's numbers and predicted configuration. Refused on
    a stack rule: refused by the stack too; on an estimate: the refusal names the override."""
    outcome = _outcome(contract, case_id)
    planned = outcome.planned
    if planned.refusal is not None:
        if known.silent(case_id):
            assert checks.CITATION.search(str(planned.refusal)), (
                f"the refusal cites no line: {planned.refusal}"
            )
            return
        kind = checks.refusal_kind(planned)
        if kind == "estimate":
            assert any(name in str(planned.refusal) for name in checks.ESTIMATE_OVERRIDES)
            return
        if kind == "own":
            pytest.skip(f"neuronserve's own rule, not the stack's: {planned.refusal}")
        if outcome.stack is None:
            pytest.skip(f"these settings cannot reach the stack without the plan: {planned.refusal}")
        assert outcome.stack["outcome"] == "raised", (
            f"the plan refuses ({planned.refusal}), but the stack builds "
            f"{(planned.request or {}).get('argv')} with {(planned.request or {}).get('unplanned')} as given"
        )
        return
    assert outcome.stack is not None
    argv = (planned.request or {}).get("argv")
    error = _stack_error(outcome)
    assert outcome.stack["outcome"] == "built", f"the plan accepts, the stack raises {error}\n{argv}"
    why = known.silent(case_id)
    assert why is None, (
        f"the stack builds this without an error but runs it wrong: {why}; the plan must refuse it"
    )
    lora = checks.lora_differences(outcome.stack)
    assert not lora, "the plan accepts, the stack cannot build it: " + "; ".join(lora)
    numbers = checks.number_differences(planned, outcome.stack)
    decided = f"\n(vLLM decided {outcome.stack['vllm']})"
    assert not numbers, "the plan's numbers are not the built ones:\n" + "\n".join(numbers) + decided
    predicted = checks.prediction_differences(planned, outcome.stack)
    assert not predicted, "the cache key's predicted configuration is not NxD Inference's:\n" + "\n".join(
        predicted
    )
