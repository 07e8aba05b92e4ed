"""The lane ids, and nothing else: config/ imports this module for NEURONSERVE_STACK's row (the values it
accepts, its help in the README), so it imports nothing (config.settings must not reach the lanes'
renderers, which read it). `registry.LANES` is keyed by exactly these ids, in this order
(tests/unit/plan/lanes/test_registry.py): a lane added to the registry is added here too.
"""

from __future__ import annotations

LANE_IDS: tuple[str, ...] = ("2.27", "2.28", "2.32")
DEFAULT_ID = "2.27"  # the lane when neither NEURONSERVE_STACK nor an installed plugin says
