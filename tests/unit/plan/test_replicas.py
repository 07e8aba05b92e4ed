"""The data-parallel replica plan (plan/replicas.py): core slicing for every visible-core form, refusals both
ways, ports, CPU binding, and the `replicas` list of `neuronserve plan --json` (checked through the real
command). The edge cases mutation testing found: test_replicas_edges.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.builders import REPLICA_ENV, REPLICA_LLAMA, replica_facts, replica_plan, replica_refusal

from neuronserve.commands.plan import plan_document
from neuronserve.plan.replicas import format_cores
from neuronserve.types import LaunchPlan

ROOT = Path(__file__).resolve().parents[3]


def cores_of(p: LaunchPlan) -> list[str]:
    return [r.cores for r in p.replicas]


@pytest.mark.parametrize(
    ("visible", "tp", "dp", "want"),
    [
        ("4-11", 4, 2, ["4-7", "8-11"]),  # the example
        ("0,1,2,3", 2, 2, ["0-1", "2-3"]),  # a comma list
        ("8-11,0-3", 4, 2, ["8-11", "0-3"]),  # the user's order is kept, not sorted
        ("0,2,4,6", 2, 2, ["0,2", "4,6"]),  # non-contiguous ids stay as given
        ("3-4,9", 1, 3, ["3", "4", "9"]),  # mixed ranges and singles, TP 1
        ("0-23", 8, 3, ["0-7", "8-15", "16-23"]),
    ],
)
def test_core_slices_follow_the_visible_cores(visible: str, tp: int, dp: int, want: list[str]) -> None:
    p = replica_plan(
        {
            "NEURON_RT_VISIBLE_CORES": visible,
            "SM_VLLM_TENSOR_PARALLEL_SIZE": str(tp),
            "SM_VLLM_DATA_PARALLEL_SIZE": str(dp),
        }
    )
    assert cores_of(p) == want
    assert [r.env["NEURON_RT_VISIBLE_CORES"] for r in p.replicas] == want
    # Top-level argv/env describe replica 0 (existing readers keep working).
    assert p.env == p.replicas[0].env and p.argv == p.replicas[0].argv


def test_cores_from_host_facts_when_the_user_named_none() -> None:
    """neuron-ls or NEURON_RT_NUM_CORES give a count: the slices are 0..count-1."""
    for source in ("neuron-ls", "NEURON_RT_NUM_CORES"):
        p = replica_plan(
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_DATA_PARALLEL": "auto"},
            replica_facts(32, source=source),
        )
        assert cores_of(p) == ["0-7", "8-15", "16-23", "24-31"]


def test_auto_is_visible_cores_floor_tp_and_warns_about_leftovers() -> None:
    p = replica_plan(
        {
            "NEURON_RT_VISIBLE_CORES": "0-9",
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "4",
            "NEURONSERVE_DATA_PARALLEL": "auto",
        }
    )
    assert cores_of(p) == ["0-3", "4-7"]
    assert any("2 visible NeuronCore(s) unused" in w for w in p.warnings)


def test_default_is_one_replica_unchanged() -> None:
    p = replica_plan({"NEURON_RT_VISIBLE_CORES": "4-5", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"})
    assert len(p.replicas) == 1
    r = p.replicas[0]
    assert (r.index, r.cores, r.port, r.argv, r.env) == (0, "4-5", 8081, p.argv, p.env)


@pytest.mark.parametrize(
    ("env", "extra", "origin"),
    [
        ({"SM_VLLM_DATA_PARALLEL_SIZE": "3"}, (), "SM_VLLM_DATA_PARALLEL_SIZE"),
        ({"NEURONSERVE_DATA_PARALLEL": "3"}, (), "NEURONSERVE_DATA_PARALLEL"),
        ({}, ("--data-parallel-size", "3"), "-- --data-parallel-size"),
    ],
)
def test_dp_times_tp_above_the_visible_cores_is_refused_naming_both(
    env: dict[str, str], extra: tuple[str, ...], origin: str
) -> None:
    env = {"NEURON_RT_VISIBLE_CORES": "0-7", "SM_VLLM_TENSOR_PARALLEL_SIZE": "4", **env}
    err = replica_refusal(env, extra=extra)
    assert set(err.variables) >= {origin, "SM_VLLM_TENSOR_PARALLEL_SIZE"}
    assert "12 NeuronCores" in str(err) and "only 8" in str(err)
    # and the other way: exactly the visible cores is accepted
    ok = replica_plan(
        {**env, **{k: "2" for k in env if "DATA_PARALLEL" in k}}, extra=[t.replace("3", "2") for t in extra]
    )
    assert cores_of(ok) == ["0-3", "4-7"]


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "true"])
def test_bad_dp_values_are_refused(value: str) -> None:
    err = replica_refusal({"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_DATA_PARALLEL": value})
    assert err.variables == ("NEURONSERVE_DATA_PARALLEL",)


def test_two_sources_that_disagree_are_refused() -> None:
    err = replica_refusal(
        {
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
            "SM_VLLM_DATA_PARALLEL_SIZE": "2",
            "NEURONSERVE_DATA_PARALLEL": "3",
        }
    )
    assert set(err.variables) == {"SM_VLLM_DATA_PARALLEL_SIZE", "NEURONSERVE_DATA_PARALLEL"}


def test_auto_without_known_cores_is_refused() -> None:
    err = replica_refusal(
        {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_DATA_PARALLEL": "auto"}, replica_facts(None)
    )
    assert "NEURON_RT_VISIBLE_CORES" in err.variables


@pytest.mark.parametrize("device", ["neuron", "cpu"])
def test_data_parallel_never_reaches_vllm(device: str) -> None:
    p = replica_plan(
        {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "SM_VLLM_DATA_PARALLEL_SIZE": "2"},
        extra=("--data-parallel-size=2", "--seed", "1"),
        device=device,
    )
    for r in p.replicas:
        assert not [t for t in r.argv if t.startswith("--data-parallel")], r.argv
        assert r.argv[-2:] == ("--seed", "1")
    assert len(p.replicas) == 2


def test_each_replica_has_its_own_port() -> None:
    p = replica_plan(
        {
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
            "NEURONSERVE_DATA_PARALLEL": "3",
            "NEURONSERVE_ENGINE_PORT": "9000",
        }
    )
    assert [r.port for r in p.replicas] == [9000, 9001, 9002]
    for r in p.replicas:
        assert r.argv[r.argv.index("--port") + 1] == str(r.port)
    assert p.engine_port == 9000


@pytest.mark.parametrize(
    ("engine_port", "front_port"), [("8079", "8080"), ("8080", "8082"), ("65535", "8080")]
)
def test_replica_ports_must_miss_the_front_port_and_stay_valid(engine_port: str, front_port: str) -> None:
    err = replica_refusal(
        {
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
            "NEURONSERVE_DATA_PARALLEL": "3",
            "NEURONSERVE_ENGINE_PORT": engine_port,
            "SAGEMAKER_BIND_TO_PORT": front_port,
        }
    )
    assert err.variables == ("NEURONSERVE_ENGINE_PORT", "SAGEMAKER_BIND_TO_PORT")


def test_min_ready_above_the_replicas_is_refused() -> None:
    env = {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_DATA_PARALLEL": "2"}
    assert replica_refusal({**env, "NEURONSERVE_MIN_READY_REPLICAS": "3"}).variables == (
        "NEURONSERVE_MIN_READY_REPLICAS",
    )
    assert replica_plan({**env, "NEURONSERVE_MIN_READY_REPLICAS": "2"}).serve.min_ready_replicas == 2
    assert replica_refusal({**env, "NEURONSERVE_MIN_READY_REPLICAS": "0"}).variables == (
        "NEURONSERVE_MIN_READY_REPLICAS",
    )


def test_cpu_replicas_are_bound_to_their_own_cpus() -> None:
    p = replica_plan({"NEURONSERVE_DATA_PARALLEL": "2"}, replica_facts(None, cpus=(0, 1)), device="cpu")
    assert [r.env.get("VLLM_CPU_OMP_THREADS_BIND") for r in p.replicas] == ["0", "1"]
    assert cores_of(p) == ["0", "1"]
    wide = replica_plan(
        {"NEURONSERVE_DATA_PARALLEL": "2"}, replica_facts(None, cpus=tuple(range(8))), device="cpu"
    )
    assert cores_of(wide) == ["0-3", "4-7"]
    one = replica_plan({}, replica_facts(None, cpus=(0, 1)), device="cpu")
    assert "VLLM_CPU_OMP_THREADS_BIND" not in one.replicas[0].env  # one engine keeps vLLM's own binding


def test_cpu_replicas_above_the_cpus_are_refused() -> None:
    err = replica_refusal({"SM_VLLM_DATA_PARALLEL_SIZE": "3"}, replica_facts(None, cpus=(0, 1)), device="cpu")
    assert err.variables == ("SM_VLLM_DATA_PARALLEL_SIZE",) and "at most 2" in str(err)


def test_format_cores() -> None:
    assert format_cores([4, 5, 6, 7]) == "4-7"
    assert format_cores([0, 2, 3, 9]) == "0,2-3,9"
    assert format_cores([8, 9, 0, 1]) == "8-9,0-1"


def test_plan_json_has_one_replica_object_per_replica() -> None:
    p = replica_plan(
        {
            "NEURON_RT_VISIBLE_CORES": "4-11",
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "4",
            "SM_VLLM_DATA_PARALLEL_SIZE": "2",
        }
    )
    doc = plan_document(p)
    assert [set(r) for r in doc["replicas"]] == [{"index", "argv", "env", "cores", "port"}] * 2
    assert [(r["index"], r["cores"], r["port"]) for r in doc["replicas"]] == [
        (0, "4-7", 8081),
        (1, "8-11", 8082),
    ]
    assert doc["argv"] == doc["replicas"][0]["argv"] and doc["env"] == doc["replicas"][0]["env"]
    # Both replicas load the same compiled artifacts (one cache key).
    assert len({r["env"]["NEURON_COMPILED_ARTIFACTS"] for r in doc["replicas"]}) == 1


def test_plan_command_prints_replicas(tmp_path: Path) -> None:
    """The real `neuronserve plan --json` (what users and the image's smoke test read)."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(REPLICA_LLAMA))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SM_", "NEURON", "SAGEMAKER_"))},
        "PYTHONPATH": str(ROOT / "src"),
        **REPLICA_ENV,
        "SM_VLLM_MODEL": str(model),
        "NEURON_RT_VISIBLE_CORES": "4-11",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "4",
        "SM_VLLM_DATA_PARALLEL_SIZE": "2",
        "SM_MODEL_DIR": str(tmp_path / "none"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", "--json", "--device", "neuron"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert [r["cores"] for r in doc["replicas"]] == ["4-7", "8-11"]
    assert "--data-parallel-size" not in json.dumps(doc)
    bad = subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", "--json", "--device", "neuron"],
        env={**env, "SM_VLLM_DATA_PARALLEL_SIZE": "3"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert "SM_VLLM_DATA_PARALLEL_SIZE" in bad.stderr and "SM_VLLM_TENSOR_PARALLEL_SIZE" in bad.stderr


def test_one_core_short_is_refused() -> None:
    err = replica_refusal(
        {
            "NEURON_RT_VISIBLE_CORES": "0-6",
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "4",
            "NEURONSERVE_DATA_PARALLEL": "2",
        }
    )
    assert "8 NeuronCores" in str(err) and "only 7" in str(err)
