"""The lane a built image plans with, and what `neuronserve plan` shows of it, seen from outside: real
`neuronserve plan` processes on a host whose installed vllm-neuron is the one a lane file builds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.unit.plan.test_build_vllm_cli import ROOT, run_cli

import neuronserve.plan.lanes.registry as lanes
from neuronserve.plan.fit import instances

LANE_FILES = ROOT / "docker" / "lanes"
NEURON = {
    "SM_VLLM_MODEL": "a/b",
    "SM_VLLM_MAX_MODEL_LEN": "512",
    "SM_VLLM_MAX_NUM_SEQS": "4",
    "NEURON_RT_VISIBLE_CORES": "0-1",
    "NEURONSERVE_INSTANCE_TYPE": "trn2.3xlarge",
}


def lane_pins(lane: str) -> dict[str, str]:
    text = (LANE_FILES / f"{lane}.env").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def with_plugin(tmp_path: Path, version: str, nxdi: bool = True) -> dict[str, str]:
    """PYTHONPATH for a host whose vllm-neuron is `version` (its dist-info, as pip installs it) and, with
    `nxdi`, an NxD Inference whose utils/constants.py holds a MODEL_TYPES (read, never imported)."""
    site = tmp_path / "site"
    (site / f"vllm_neuron-{version}.dist-info").mkdir(parents=True)
    if nxdi:
        (site / "neuronx_distributed_inference-0.0.1.dist-info").mkdir()
        utils = site / "neuronx_distributed_inference" / "utils"
        utils.mkdir(parents=True)
        (utils.parent / "__init__.py").write_text("raise ImportError('the plan must not import it')\n")
        (utils / "constants.py").write_text(
            'MODEL_TYPES = {"llama": {"causal-lm": NeuronLlamaForCausalLM}}\n'
        )
    return {"PYTHONPATH": f"{ROOT / 'src'}:{site}"}


@pytest.mark.parametrize("lane", sorted(p.stem for p in LANE_FILES.glob("*.env")))
def test_the_plugin_a_lane_file_installs_makes_the_plan_that_lane(tmp_path: Path, lane: str) -> None:
    """An image built from docker/lanes/<lane>.env has its VLLM_NEURON_VERSION installed; with no
    NEURONSERVE_STACK, its plan (and so /info, /version, build_info) must report that lane."""
    pins = lane_pins(lane)
    r = run_cli(
        ["--json", "--device", "neuron"], {**NEURON, **with_plugin(tmp_path, pins["VLLM_NEURON_VERSION"])}
    )
    assert r.returncode == 0, r.stderr
    stack = json.loads(r.stdout)["stack"]
    assert {k: v for k, v in stack.items() if k != "nxd_inference"} == lanes.LANES[lane].stack_json()
    if lanes.LANES[lane].generation == "nxdi":  # the installed registry is read (plan/lanes/nxdi/models.py)
        assert stack["nxd_inference"] == {"version": "0.0.1", "source": "installed", "model_types": ["llama"]}
    assert (stack["sdk"], stack["vllm_neuron"], stack["vllm"]) == (
        pins["NEURON_SDK_VERSION"],
        pins["VLLM_NEURON_VERSION"],
        pins["VLLM_VERSION"],
    )


@pytest.mark.parametrize(
    ("lane", "name", "absent"),
    [
        ("2.27", "override_neuron_config:", "\nneuron_config:"),
        ("2.32", "neuron_config:", "override_neuron_config"),
    ],
)
def test_the_plan_text_names_the_object_the_lanes_engine_gets(lane: str, name: str, absent: str) -> None:
    r = run_cli(["--device", "neuron"], {**NEURON, "NEURONSERVE_STACK": lane})
    assert r.returncode == 0, r.stderr
    shown = [line for line in r.stdout.splitlines() if line.startswith(name)]
    assert shown and absent not in r.stdout
    argv_doc = json.loads(r.stdout.split("--additional-config '", 1)[1].split("'", 1)[0])
    assert json.loads(shown[0].split(": ", 1)[1]) == next(iter(argv_doc.values()))


def smoke_stack_check() -> str:
    """docker/smoke.sh's check of the plan's stack against /opt/neuronserve/lane.env (its Python)."""
    lines = (ROOT / "docker" / "smoke.sh").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "the plan's stack lane is not the built lane" in line)
    end = lines.index("PY", start)
    return "\n".join(lines[start + 1 : end])


@pytest.mark.parametrize(("built", "ok"), [("2.28", True), ("2.27", False)])
def test_the_image_smoke_check_holds_the_plan_to_the_built_lane(tmp_path: Path, built: str, ok: bool) -> None:
    """What docker/smoke.sh runs inside a lane 2.28 image (plugin 0.4.1 installed): the plan's stack
    passes against a lane.env of lane 2.28 and fails against one that says another lane was built."""
    r = run_cli(["--json", "--device", "neuron"], {**NEURON, **with_plugin(tmp_path, "0.4.1")})
    assert r.returncode == 0, r.stderr
    lane_env = tmp_path / "lane.env"
    lane_env.write_text(f"# resolved\nLANE={built}\n" + (LANE_FILES / f"{built}.env").read_text())
    check = subprocess.run(
        [sys.executable, "-c", smoke_stack_check(), r.stdout, str(lane_env)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (check.returncode == 0) is ok, check.stdout + check.stderr
    assert ("is the built lane 2.28" in check.stdout) is ok


def test_the_image_smoke_check_fails_when_the_registry_was_not_read(tmp_path: Path) -> None:
    """In a Neuron image NxD Inference is installed: a plan that assumed its registry is a broken image."""
    r = run_cli(["--json", "--device", "neuron"], {**NEURON, **with_plugin(tmp_path, "0.4.1", nxdi=False)})
    assert r.returncode == 0, r.stderr
    lane_env = tmp_path / "lane.env"
    lane_env.write_text("LANE=2.28\n" + (LANE_FILES / "2.28.env").read_text())
    check = subprocess.run(
        [sys.executable, "-c", smoke_stack_check(), r.stdout, str(lane_env)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode != 0 and "did not read the installed NxD Inference" in check.stderr


def test_every_family_a_lane_runs_is_in_the_instance_table_or_named_as_missing() -> None:
    tabulated = {name.split(".")[0] for name in instances.INSTANCES}
    for lane in lanes.LANES.values():
        assert set(lane.families) <= tabulated | set(instances.UNTABULATED), lane.lane


def test_the_pointer_to_lane_2_33_for_trn3_leads_to_a_plan() -> None:
    """2.27 refuses trn3 pointing to 2.33 (the newest lane that runs it); 2.33 must then say how to plan
    it, not call trn3 unknown."""
    trn3 = {**NEURON, "NEURONSERVE_INSTANCE_TYPE": "trn3.48xlarge"}
    old = run_cli(["--device", "neuron"], {**trn3, "NEURONSERVE_STACK": "2.27"})
    assert old.returncode == 2 and "use lane 2.33" in old.stderr
    new = run_cli(["--device", "neuron"], {**trn3, "NEURONSERVE_STACK": "2.33"})
    assert new.returncode == 2 and "Traceback" not in new.stderr
    assert "not a Neuron instance type" not in new.stderr and "NEURONSERVE_FIT_CHECK=off" in new.stderr
    fixed = run_cli(
        ["--json", "--device", "neuron"],
        {**trn3, "NEURONSERVE_STACK": "2.33", "NEURONSERVE_FIT_CHECK": "off"},
    )
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["stack"]["lane"] == "2.33"
