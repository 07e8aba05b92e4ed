"""build_plan (plan/build.py) as later phases and the person who configured the container see it, word for
word: the sharded-checkpoint warning of a keyed cache, a hub model staged at its revision, what the CPU
plan passes and says, and the plan fields later phases read (engine host, work dir, integration). Added
where mutation testing (scripts/mutation, docs/TESTING.md) showed messages no test checked. The model
source and artifact location are test_model.py's; the command line test_command.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from tests.support.builders import HUB_MODEL, facts, plan

from neuronserve.config.settings import parse_settings
from neuronserve.plan.build import build_plan
from neuronserve.types import LaunchPlan


def test_the_work_dir_is_used_as_given_without_its_trailing_slash() -> None:
    p = plan({**HUB_MODEL, "SM_VLLM_MODEL": "s3://b/m/", "NEURONSERVE_WORK_DIR": "/srv/X/"})
    assert p.model.local_path == "/srv/X/model"
    assert p.artifacts.local_dir == f"/srv/X/artifacts/{p.cache_key}"


SHARDED_WARNING = (
    "cached artifacts without save_sharded_checkpoint re-shard from the model path on every load: set "
    "SM_NEURON_SAVE_SHARDED_CHECKPOINT=true to make them self-contained (larger upload, faster start)"
)


def test_keyed_artifacts_without_sharded_checkpoints_are_warned_about() -> None:
    keyed = {**HUB_MODEL, "NEURONSERVE_CACHE_URI": "s3://b/c/"}
    assert SHARDED_WARNING in plan(keyed).warnings
    assert SHARDED_WARNING not in plan({**keyed, "SM_NEURON_SAVE_SHARDED_CHECKPOINT": "true"}).warnings
    assert SHARDED_WARNING not in plan({**HUB_MODEL, "NEURON_COMPILED_ARTIFACTS": "s3://b/x/"}).warnings
    p = plan(HUB_MODEL)
    assert SHARDED_WARNING not in p.warnings
    assert p.env["NEURON_COMPILED_ARTIFACTS"] == p.artifacts.local_dir


def test_a_hub_model_on_neuron_is_staged_at_its_revision() -> None:
    """The plugin compiles whatever directory it reads (loader.py:391-393 would download the default
    branch of a hub id): the plan stages the revision and the engine gets the directory, no --revision."""
    p = plan({**HUB_MODEL, "SM_VLLM_REVISION": "abc123"})
    assert p.model.local_path == "/tmp/neuronserve/model" and p.model.revision == "abc123"
    assert p.argv[p.argv.index("--model") + 1] == "/tmp/neuronserve/model"
    assert "--revision" not in p.argv
    assert p.assets[0].as_json() == {
        "kind": "model",
        "source": HUB_MODEL["SM_VLLM_MODEL"],
        "local": "/tmp/neuronserve/model",
    }
    assert (p.assets[0].fetch, p.assets[0].revision) == ("hub", "abc123")


def test_the_cpu_plan_passes_additional_config_once_as_sorted_json() -> None:
    env = {"SM_VLLM_MODEL": "org/m", "SM_VLLM_ADDITIONAL_CONFIG": '{"b": 1, "a": {"d": 2, "c": 3}}'}
    p = plan(env, facts(cores=None), device="cpu")
    assert list(p.argv).count("--additional-config") == 1
    assert list(p.argv[-2:]) == ["--additional-config", '{"a": {"c": 3, "d": 2}, "b": 1}']


def cpu_plan(env: Mapping[str, str], extra: Sequence[str] = (), cpus: tuple[int, ...] = ()) -> LaunchPlan:
    """A CPU plan (no Neuron devices) from an environment and the arguments after `--`."""
    return build_plan(parse_settings(env, device="cpu", extra_args=extra), facts(cores=None, cpus=cpus))


@pytest.mark.parametrize(
    ("env", "extra"),
    [
        ({"HF_REVISION": "abc123"}, []),
        ({}, ["--revision", "abc123"]),
    ],
)
def test_a_hub_revision_from_any_source_is_staged_on_neuron(env: dict[str, str], extra: list[str]) -> None:
    """HF_REVISION and `-- --revision` reach the staged hub asset, and the argument after `--` is not
    passed on (the engine reads the staged directory)."""
    p = build_plan(parse_settings({**HUB_MODEL, **env}, extra_args=extra), facts())
    assert p.assets[0].revision == "abc123" and p.assets[0].fetch == "hub"
    assert "--revision" not in p.argv and "abc123" not in p.argv


def test_a_hub_model_with_a_revision_on_the_cpu_is_not_warned_about() -> None:
    """On the CPU a hub revision is passed to vLLM, so it is not "ignored": no warning at all."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_REVISION": "abc"})
    assert (p.model.revision, p.warnings) == ("abc", ())


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
        plan({**HUB_MODEL, "NEURONSERVE_WORK_DIR": "/srv/X"}),
        cpu_plan({"SM_VLLM_MODEL": "org/m", "NEURONSERVE_WORK_DIR": "/srv/X"}),
    ):
        assert (p.engine_host, p.work_dir) == ("127.0.0.1", "/srv/X")
