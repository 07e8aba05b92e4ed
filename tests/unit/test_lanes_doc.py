"""docs/LANES.md "How the same settings map in each lane" stays true to the code: every 2.32 row of
plan/translate.py is in the override-key table with the field it lands under (or this lane's name for it),
and every lane's pins are the ones plan/lanes/registry.py reports."""

from __future__ import annotations

from pathlib import Path

import neuronserve.plan.lanes.registry as lanes
from neuronserve.plan.lanes.native import translate

DOC = Path(__file__).resolve().parents[2] / "docs" / "LANES.md"


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## How the same settings map in each lane")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _rows() -> dict[str, list[str]]:
    """First cell -> the cells, for every table row of the section."""
    rows: dict[str, list[str]] = {}
    for line in _section().splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells
    return rows


def test_every_2_32_override_row_is_in_the_table_as_the_code_maps_it() -> None:
    rows = _rows()
    for row in translate.ROWS:
        cells = rows.get(f"`SM_NEURON_{row.key.upper()}`")
        assert cells is not None, f"docs/LANES.md lacks SM_NEURON_{row.key.upper()}"
        landed = f"`{row.field}`" if row.field else row.lane_name
        assert cells[3] == landed and cells[4] == row.cite, cells


def test_the_lanes_and_their_pins_are_named_as_the_plan_reports_them() -> None:
    text = _section()
    for lane in lanes.LANES.values():
        assert f"{lane.lane} (vllm-neuron {lane.vllm_neuron})" in text or lane.generation == "native"
    assert "`NEURONSERVE_STACK`" in text and "`2.27` | `2.28` | `2.32` | `2.33`" in text
