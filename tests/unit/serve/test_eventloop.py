"""serve/eventloop.py, in a fresh interpreter: the coroutine's result comes back, it ran on uvloop's loop
(installed here, as in the image), and the collector was settled first (front/gctune.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neuronserve.front.gctune import YOUNG_THRESHOLD

SRC = str(Path(__file__).resolve().parents[3] / "src")

CODE = """
import asyncio, gc, json
from neuronserve.serve import eventloop

async def main():
    return type(asyncio.get_running_loop()).__module__, gc.get_freeze_count() > 0, gc.get_threshold()[0]

print(json.dumps(eventloop.run(main())))
"""


def test_the_server_coroutine_runs_on_uvloop_after_the_collector_is_settled() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, check=True, env={"PYTHONPATH": SRC}
    )
    module, frozen, young = json.loads(out.stdout)
    assert module.startswith("uvloop")
    assert frozen and young == YOUNG_THRESHOLD
