"""build_plan behaviour that mutation testing of plan/build.py (scripts/mutation, docs/TESTING.md, issue #16)
showed no test pinned: which model wins and what the warning names, the variable a hub-revision refusal
names, what the CPU plan drops and keeps, and the plan fields later phases read (engine host, work dir,
integration). Each test states what a user or a later phase would notice if it changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from tests.unit.test_plan_build_messages import MODEL, facts, plan

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.types import LaunchPlan

DROPPED = "is a Neuron setting: dropped for the CPU engine"


def cpu_plan(env: Mapping[str, str], extra: Sequence[str] = (), cpus: tuple[int, ...] = ()) -> LaunchPlan:
    """A CPU plan (no Neuron devices) from an environment and the arguments after `--`."""
    return build_plan(parse_settings(env, device="cpu", extra_args=extra), facts(cores=None, cpus=cpus))


def test_two_models_after_the_separator_name_the_second_as_ignored_once() -> None:
    """`-- --model a --model b`: the first wins and the warning lists the other exactly once (the
    candidates after the SageMaker directory must not repeat the `-- --model` ones)."""
    p = cpu_plan({}, extra=["--model", "org/a", "--model", "org/b"])
    assert (p.model.uri, p.model.origin) == ("org/a", "-- --model")
    assert p.warnings == ("model from -- --model; also configured and ignored: -- --model=org/b",)


def test_a_model_after_the_separator_names_sm_vllm_model_as_ignored_once() -> None:
    """`-- --model a` with SM_VLLM_MODEL=b: the argument wins and SM_VLLM_MODEL is named once, in the
    place of the source order (before the SageMaker directory and HF_MODEL_ID)."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/b", "HF_MODEL_ID": "org/c"}, extra=["--model", "org/a"])
    assert p.model.uri == "org/a"
    assert p.warnings == (
        "model from -- --model; also configured and ignored: SM_VLLM_MODEL=org/b, HF_MODEL_ID=org/c",
    )


@pytest.mark.parametrize(
    ("env", "extra", "var"),
    [
        ({"HF_REVISION": "abc123"}, [], "HF_REVISION"),
        ({}, ["--revision", "abc123"], "-- --revision"),
    ],
)
def test_a_hub_revision_on_neuron_is_refused_naming_the_variable_that_set_it(
    env: dict[str, str], extra: list[str], var: str
) -> None:
    """The refusal names the revision's own source (HF_REVISION, `-- --revision`), not the default
    SM_VLLM_REVISION, so the user unsets the one they actually set."""
    with pytest.raises(ConfigError) as err:
        build_plan(parse_settings({**MODEL, **env}, extra_args=extra), facts())
    assert str(err.value).startswith(f"{var}=abc123: vllm-neuron 0.2.x compiles and loads hub models without")
    assert err.value.variables == (var, "SM_VLLM_MODEL")


def test_a_model_that_is_not_from_the_hub_without_a_revision_gets_no_revision_warning() -> None:
    """The "revision ignored" warning needs both a revision and a non-hub model: an s3:// model with no
    revision plans without any warning."""
    assert cpu_plan({"SM_VLLM_MODEL": "s3://b/m/"}).warnings == ()


def test_a_hub_model_with_a_revision_on_the_cpu_is_not_warned_about() -> None:
    """On the CPU a hub revision is passed to vLLM, so it is not "ignored": no warning at all."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_REVISION": "abc"})
    assert (p.model.revision, p.warnings) == ("abc", ())


def test_the_cpu_plan_drops_require_cache_hit_with_a_warning() -> None:
    """NEURONSERVE_REQUIRE_CACHE_HIT has no meaning without compiled artifacts: the CPU plan names it."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "NEURONSERVE_REQUIRE_CACHE_HIT": "true"})
    assert p.warnings == (f"NEURONSERVE_REQUIRE_CACHE_HIT {DROPPED}",)


def test_a_dropped_neuron_flag_does_not_drop_the_flags_sorted_after_it() -> None:
    """On the CPU a Neuron-only engine flag is dropped with a warning, and every other flag after it in
    name order (num-gpu-blocks-override < seed) still reaches the engine."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "100", "SM_VLLM_SEED": "7"})
    assert p.warnings == (f"SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE {DROPPED}",)
    assert list(p.argv[-2:]) == ["--seed", "7"]


def test_the_cpu_plan_keeps_the_whole_command_before_additional_config() -> None:
    """SM_VLLM_ADDITIONAL_CONFIG is appended to the CPU command, never in place of it."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_SEED": "7", "SM_VLLM_ADDITIONAL_CONFIG": '{"a": 1}'})
    assert list(p.argv) == [
        "/usr/bin/python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "org/m",
        "--host",
        "127.0.0.1",
        "--port",
        "8081",
        "--seed",
        "7",
        "--additional-config",
        '{"a": 1}',
    ]


def test_the_cpu_plan_says_its_integration_is_cpu() -> None:
    """`neuronserve plan` prints "device: cpu (cpu)" and serve chooses the engine setup from it."""
    assert cpu_plan({"SM_VLLM_MODEL": "org/m"}).integration == "cpu"


def test_data_parallel_auto_on_the_cpu_is_one_replica_with_a_warning() -> None:
    """NEURONSERVE_DATA_PARALLEL=auto has no core count to divide on the CPU: one replica on every CPU
    this process may use, and a warning saying how to run more."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "NEURONSERVE_DATA_PARALLEL": "auto"}, cpus=(0, 1, 2, 3))
    assert p.warnings == (
        "NEURONSERVE_DATA_PARALLEL=auto means 1 replica on the CPU (set a number to run more)",
    )
    assert [(r.cores, r.port) for r in p.replicas] == [("0-3", 8081)]


def test_the_plan_carries_the_engine_host_and_the_configured_work_dir() -> None:
    """The front server connects to plan.engine_host and serve stages into plan.work_dir: both must be
    the loopback address and NEURONSERVE_WORK_DIR as configured, on Neuron and on the CPU."""
    for p in (
        plan({**MODEL, "NEURONSERVE_WORK_DIR": "/srv/X"}),
        cpu_plan({"SM_VLLM_MODEL": "org/m", "NEURONSERVE_WORK_DIR": "/srv/X"}),
    ):
        assert (p.engine_host, p.work_dir) == ("127.0.0.1", "/srv/X")


def test_a_flag_the_neuron_plan_renders_is_not_passed_again_from_after_the_separator() -> None:
    """`-- --no-enable-prefix-caching` on Neuron: the plan reads it and renders the KV layout's own
    `--no-enable-prefix-caching`, so vLLM gets it once (the plan's copy), while the flag after it that
    the plan does not render (`--seed 3`) is passed through as given."""
    p = build_plan(parse_settings(MODEL, extra_args=("--no-enable-prefix-caching", "--seed", "3")), facts())
    assert p.argv.count("--no-enable-prefix-caching") == 1
    assert p.argv.index("--no-enable-prefix-caching") < p.argv.index("--additional-config")
    assert list(p.argv[-2:]) == ["--seed", "3"]


def test_the_cpu_plan_passes_boolean_flags_and_values_after_the_separator_verbatim() -> None:
    """The CPU plan renders no engine flag of its own, so `-- --trust-remote-code` (a flag the plan reads)
    reaches vLLM; and a value is only a value: `mymodel` after `--served-model-name` is not taken for a
    `--model` flag, nor the token after it dropped."""
    extra = ["--trust-remote-code", "--served-model-name", "mymodel", "--seed", "3"]
    p = cpu_plan({"SM_VLLM_MODEL": "org/m"}, extra=extra)
    assert list(p.argv[-5:]) == extra
    assert p.warnings == ()
