"""The replica plan's edge cases mutation testing found unchecked (plan/replicas.py, docs/TESTING.md): the
exact refusals (ports, min-ready, auto without cores, bad counts), the variable a refusal names when TP came
from somewhere else than SM_VLLM_TENSOR_PARALLEL_SIZE, the port range's last valid port, which warnings
appear and which do not, the one-replica plan's cores, and `-- --data-parallel-size N` (two tokens) never
reaching vLLM. Each goes through build_plan, the plan a user gets.
"""

from __future__ import annotations

import pytest
from tests.support.builders import replica_facts, replica_plan, replica_refusal
from tests.unit.plan.test_replicas import cores_of

TP2 = {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}


@pytest.mark.parametrize("value", ["two", "²", "true", "false"])
def test_a_dp_count_that_is_no_whole_number_is_refused_with_the_full_message(value: str) -> None:
    """ "²" passes str.isdigit() but int() refuses it: it used to crash the plan with a bare ValueError
    instead of this message. "true"/"false" (booleans after the SM_VLLM_ mapping) are refused too."""
    err = replica_refusal({**TP2, "SM_VLLM_DATA_PARALLEL_SIZE": value})
    shown = {"true": "True", "false": "False"}.get(value, repr(value))
    assert str(err) == (
        f"SM_VLLM_DATA_PARALLEL_SIZE={shown} must be a whole number >= 1 or auto (visible cores // TP)"
    )
    assert err.variables == ("SM_VLLM_DATA_PARALLEL_SIZE",)


def test_replica_ports_refusal_names_the_whole_range_and_the_front_port() -> None:
    """The message shows the first and the last replica port (not the second), the front port, and
    what to move."""
    err = replica_refusal(
        {
            **TP2,
            "NEURONSERVE_DATA_PARALLEL": "3",
            "NEURONSERVE_ENGINE_PORT": "8079",
            "SAGEMAKER_BIND_TO_PORT": "8080",
        }
    )
    assert str(err) == (
        "3 engine replicas use ports 8079-8081 (NEURONSERVE_ENGINE_PORT + index), which must stay below "
        "65536 and miss the front port SAGEMAKER_BIND_TO_PORT=8080: move NEURONSERVE_ENGINE_PORT"
    )


def test_the_last_replica_may_use_port_65535_but_not_65536() -> None:
    """65535 is a valid port: two replicas from 65534 are planned; from 65535 the second would be 65536."""
    ok = replica_plan({**TP2, "NEURONSERVE_DATA_PARALLEL": "2", "NEURONSERVE_ENGINE_PORT": "65534"})
    assert [r.port for r in ok.replicas] == [65534, 65535]
    err = replica_refusal({**TP2, "NEURONSERVE_DATA_PARALLEL": "2", "NEURONSERVE_ENGINE_PORT": "65535"})
    assert "use ports 65535-65536 " in str(err)
    assert err.variables == ("NEURONSERVE_ENGINE_PORT", "SAGEMAKER_BIND_TO_PORT")


def test_min_ready_refusal_message() -> None:
    """The refusal says how many replicas the plan has and the highest value allowed."""
    err = replica_refusal({**TP2, "NEURONSERVE_DATA_PARALLEL": "2", "NEURONSERVE_MIN_READY_REPLICAS": "3"})
    assert str(err) == (
        "NEURONSERVE_MIN_READY_REPLICAS=3 is more than the 2 replica(s) planned: set it to at most 2"
    )


def test_auto_without_known_cores_refusal_message() -> None:
    """auto with no cores to count says what was looked for and both ways out."""
    err = replica_refusal({**TP2, "NEURONSERVE_DATA_PARALLEL": "auto"}, replica_facts(None))
    assert str(err) == (
        "NEURONSERVE_DATA_PARALLEL=auto needs the visible NeuronCores, and none were found (no /dev/neuron*, "
        "no NEURON_RT_VISIBLE_CORES): set a number or NEURON_RT_VISIBLE_CORES"
    )
    assert err.variables == ("NEURONSERVE_DATA_PARALLEL", "NEURON_RT_VISIBLE_CORES")


def test_too_many_cores_names_tp_where_the_user_set_it() -> None:
    """TP given as `-- --tensor-parallel-size 4`: the refusal tells the user to lower that, not an
    SM_VLLM_TENSOR_PARALLEL_SIZE they never set."""
    err = replica_refusal(
        {"NEURON_RT_VISIBLE_CORES": "0-7", "NEURONSERVE_DATA_PARALLEL": "3"},
        extra=("--tensor-parallel-size", "4"),
    )
    assert str(err) == (
        "NEURONSERVE_DATA_PARALLEL=3 replicas x -- --tensor-parallel-size=4 = 12 NeuronCores, but only 8 are "
        "visible (neuron-ls): lower NEURONSERVE_DATA_PARALLEL or -- --tensor-parallel-size"
    )
    assert err.variables == ("NEURONSERVE_DATA_PARALLEL", "-- --tensor-parallel-size")


def test_too_many_cores_with_tp_unset_names_sm_vllm_tensor_parallel_size() -> None:
    """TP left to the plan (all visible cores): the refusal names SM_VLLM_TENSOR_PARALLEL_SIZE, the
    variable a SageMaker user sets to lower it."""
    err = replica_refusal(
        {"NEURON_RT_VISIBLE_CORES": "0-1", "NEURONSERVE_DATA_PARALLEL": "3"},
        replica_facts(2, source="NEURON_RT_VISIBLE_CORES"),  # what gather() says for that variable
    )
    assert str(err) == (
        "NEURONSERVE_DATA_PARALLEL=3 replicas x SM_VLLM_TENSOR_PARALLEL_SIZE=2 = 6 NeuronCores, but only 2 "
        "are visible (NEURON_RT_VISIBLE_CORES): "
        "lower NEURONSERVE_DATA_PARALLEL or SM_VLLM_TENSOR_PARALLEL_SIZE"
    )
    assert err.variables == ("NEURONSERVE_DATA_PARALLEL", "SM_VLLM_TENSOR_PARALLEL_SIZE")


def test_auto_with_fewer_cores_than_two_replicas_plans_one() -> None:
    """auto on 6 cores at TP 4 is one replica (6 // 4), with the auto warning; not a refusal."""
    p = replica_plan(
        {
            "NEURON_RT_VISIBLE_CORES": "0-5",
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "4",
            "NEURONSERVE_DATA_PARALLEL": "auto",
        }
    )
    assert len(p.replicas) == 1
    assert "NEURONSERVE_DATA_PARALLEL=auto: 1 replica(s) of TP 4 on 6 visible NeuronCores" in p.warnings


def test_unchecked_replicas_warn_only_above_one() -> None:
    """With no visible cores known, two replicas (or more) warn that the count was not checked; an
    explicit single replica does not."""
    two = replica_plan({**TP2, "NEURONSERVE_DATA_PARALLEL": "2"}, replica_facts(None))
    assert (
        "NEURONSERVE_DATA_PARALLEL=2 not checked against the visible NeuronCores (none found)" in two.warnings
    )
    one = replica_plan({**TP2, "NEURONSERVE_DATA_PARALLEL": "1"}, replica_facts(None))
    assert not [w for w in one.warnings if w.startswith("NEURONSERVE_DATA_PARALLEL")]


@pytest.mark.parametrize(
    ("visible", "dp"),
    [("0-3", "1"), ("0-7", "2")],  # one replica with spare cores; replicas that fill the cores exactly
)
def test_no_unused_cores_warning_for_one_replica_or_an_exact_fit(visible: str, dp: str) -> None:
    """The "unused" warning is about data parallel leaving cores idle: a single replica never gets it,
    and neither do replicas that use every visible core."""
    p = replica_plan(
        {
            "NEURON_RT_VISIBLE_CORES": visible,
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "2" if dp == "1" else "4",
            "NEURONSERVE_DATA_PARALLEL": dp,
        }
    )
    assert not [w for w in p.warnings if "unused" in w]


def test_one_neuron_replica_keeps_the_users_core_list_as_written() -> None:
    """One replica reports the NEURON_RT_VISIBLE_CORES the engine gets ("0,1"), not a re-formatted
    "0-1"."""
    p = replica_plan({**TP2, "NEURON_RT_VISIBLE_CORES": "0,1"})
    assert cores_of(p) == ["0,1"] and p.env["NEURON_RT_VISIBLE_CORES"] == "0,1"


def test_cpu_replica_without_affinity_runs_on_cpu_0() -> None:
    """No CPU affinity known (no sched_getaffinity): the one CPU replica is on CPU 0."""
    p = replica_plan({}, replica_facts(None, cpus=()), device="cpu")
    assert cores_of(p) == ["0"]


@pytest.mark.parametrize("device", ["neuron", "cpu"])
def test_data_parallel_flag_and_its_value_never_reach_vllm(device: str) -> None:
    """`-- --data-parallel-size 2` (two tokens): both the flag and its value are dropped, and only them;
    the following arguments reach vLLM."""
    p = replica_plan({**TP2}, extra=("--data-parallel-size", "2", "--seed", "1"), device=device)
    same = replica_plan({**TP2, "SM_VLLM_DATA_PARALLEL_SIZE": "2"}, device=device)
    assert len(p.replicas) == 2
    for r, want in zip(p.replicas, same.replicas, strict=True):
        assert r.argv == (*want.argv, "--seed", "1")
