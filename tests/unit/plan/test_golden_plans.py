"""The plan documents of tests/data/golden-plans.json are unchanged, byte for byte, entry by entry.

A failure names each entry that moved; after an intended change, regenerate with
`python -m tests.support.golden_plans --write` and review the diff of the JSON file.
"""

from __future__ import annotations

import json

from tests.support.golden_plans import GOLDEN, entries


def test_every_golden_plan_is_byte_identical() -> None:
    want = json.loads(GOLDEN.read_text())
    got = json.loads(json.dumps(entries(), sort_keys=True))
    moved = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    assert not moved, f"golden plans changed: {moved[:20]}"


def test_the_golden_matrix_plans_and_refuses() -> None:
    """The matrix is no set of refusals: most entries plan, and some are refused, so both are covered."""
    doc = json.loads(GOLDEN.read_text())
    refused = [k for k, v in doc.items() if "refused" in v]
    assert len(doc) >= 100 and 10 <= len(refused) <= len(doc) // 2
