"""front/gctune.py, in a fresh interpreter (it changes process-wide collector settings): after `settle`
the objects alive at start-up are frozen out of the collector's way, the young generation is collected
less often, and garbage made afterwards (a reference cycle) is still collected."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc, weakref
from neuronserve.front import gctune
gctune.settle()
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()
assert gc.get_threshold()[0] == gctune.YOUNG_THRESHOLD
class Node: pass
a, b = Node(), Node()
a.other, b.other = b, a
gone = weakref.ref(a)
del a, b
gc.collect()
assert gone() is None
print("ok")
"""


def test_settle_freezes_start_up_and_still_collects_garbage() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
