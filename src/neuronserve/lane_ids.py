"""The stack lanes' ids, and nothing else: NEURONSERVE_STACK accepts exactly these (config/hosttable.py,
and the README's reference generated from it), and plan/lanes/registry.py holds one Lane for each, in
this order (tests/unit/plan/lanes/test_registry.py). It imports nothing, so the settings read it
without depending on the plan (settings -> plan, never back): a lane added to the registry is added here.
"""

from __future__ import annotations

LANE_IDS: tuple[str, ...] = ("2.27", "2.28", "2.32", "2.33")
