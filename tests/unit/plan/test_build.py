"""build_plan's refusals and warnings, word for word: they are what the person who configured the
container reads, and each names the variables to change (ConfigError.variables). Added where
mutation testing (scripts/mutation, docs/TESTING.md) showed messages and names no test checked.

The second half (from mutation testing of plan/build.py, docs/TESTING.md) pins the rest: which model wins
and what the warning names, where a hub revision goes, what the CPU plan drops and keeps,
and the plan fields later phases read (engine host, work dir, integration). Each test states what a user or
a later phase would notice if it changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from tests.support.builders import HUB_MODEL, facts, plan, refusal

from neuronserve.config.settings import parse_settings
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import ModelFacts
from neuronserve.types import LaunchPlan


def test_no_model_names_every_way_to_give_one() -> None:
    err = refusal({}, facts(sagemaker_model_dir="/opt/ml/model"))
    assert str(err) == (
        "no model configured: set SM_VLLM_MODEL (hub id, local dir, s3:// prefix or .tar.gz), put the model "
        "in /opt/ml/model (SM_MODEL_DIR), or set HF_MODEL_ID"
    )
    assert err.variables == ("SM_VLLM_MODEL", "SM_MODEL_DIR", "HF_MODEL_ID", "OPTION_MODEL_ID")


@pytest.mark.parametrize("uri", ["/data/model.tar.gz", "/data/model.tgz"])
def test_a_missing_local_archive_is_refused(uri: str) -> None:
    err = refusal({**HUB_MODEL, "SM_VLLM_MODEL": uri})
    assert str(err) == f"SM_VLLM_MODEL={uri}: no such archive on this host"
    assert err.variables == ("SM_VLLM_MODEL",)


@pytest.mark.parametrize("uri", ["s3://b/m.tar.gz", "s3://b/m.tgz"])
def test_s3_archives_of_both_suffixes_are_staged(uri: str) -> None:
    p = plan({**HUB_MODEL, "SM_VLLM_MODEL": uri, "NEURONSERVE_WORK_DIR": "/srv/X/"})
    assert (p.model.source, p.model.local_path) == ("archive", "/srv/X/model")


def test_a_missing_local_directory_is_refused() -> None:
    err = refusal({**HUB_MODEL, "SM_VLLM_MODEL": "/data/nothing-here"})
    assert str(err) == "SM_VLLM_MODEL=/data/nothing-here: no such model directory on this host"
    assert err.variables == ("SM_VLLM_MODEL",)


def test_other_configured_models_are_named_as_ignored() -> None:
    env = {**HUB_MODEL, "HF_MODEL_ID": "org/a", "OPTION_MODEL_ID": "org/b"}
    p = plan(env)
    assert p.model.uri == HUB_MODEL["SM_VLLM_MODEL"]
    assert (
        "model from SM_VLLM_MODEL; also configured and ignored: HF_MODEL_ID=org/a, OPTION_MODEL_ID=org/b"
        in p.warnings
    )


def test_the_work_dir_is_used_as_given_without_its_trailing_slash() -> None:
    p = plan({**HUB_MODEL, "SM_VLLM_MODEL": "s3://b/m/", "NEURONSERVE_WORK_DIR": "/srv/X/"})
    assert p.model.local_path == "/srv/X/model"
    assert p.artifacts.local_dir == f"/srv/X/artifacts/{p.cache_key}"


def test_an_explicit_artifacts_location_and_a_cache_uri_are_refused_together() -> None:
    env = {**HUB_MODEL, "NEURON_COMPILED_ARTIFACTS": "/art", "NEURONSERVE_CACHE_URI": "s3://b/cache/"}
    err = refusal(env)
    assert str(err) == (
        "NEURON_COMPILED_ARTIFACTS=/art and NEURONSERVE_CACHE_URI=s3://b/cache/ both choose where compiled "
        "artifacts live: keep NEURONSERVE_CACHE_URI (keyed, safe) or the explicit location, not both"
    )
    assert err.variables == ("NEURON_COMPILED_ARTIFACTS", "NEURONSERVE_CACHE_URI")


def test_a_cache_uri_must_be_s3() -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_CACHE_URI": "/mnt/cache"})
    assert str(err) == "NEURONSERVE_CACHE_URI=/mnt/cache must be an s3:// prefix"
    assert err.variables == ("NEURONSERVE_CACHE_URI",)


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize(
    ("extra", "mode"),
    [
        ({"NEURONSERVE_CACHE_URI": "s3://b/BOX/"}, "keyed"),
        ({"NEURON_COMPILED_ARTIFACTS": "s3://b/compiled/"}, "explicit"),
        ({"NEURON_COMPILED_ARTIFACTS": "/art"}, "local"),
        ({}, "local"),
    ],
)
def test_every_artifact_mode_carries_the_read_only_setting(
    extra: dict[str, str], mode: str, read_only: bool
) -> None:
    env = {**HUB_MODEL, **extra, "NEURONSERVE_CACHE_READ_ONLY": "true" if read_only else "false"}
    p = plan(env)
    assert p.artifacts.mode == mode
    assert p.artifacts.read_only is read_only
    if mode == "keyed":
        assert p.artifacts.remote_uri == f"s3://b/BOX/{p.cache_key}/"


def test_host_and_port_settings_are_ignored_with_a_warning() -> None:
    p = plan({**HUB_MODEL, "SM_VLLM_HOST": "0.0.0.0", "SM_VLLM_PORT": "9000", "SM_VLLM_SEED": "7"})
    for var in ("SM_VLLM_HOST", "SM_VLLM_PORT"):
        assert (
            f"{var} ignored: the engine listens on 127.0.0.1:NEURONSERVE_ENGINE_PORT behind the front "
            "server, whose port is SAGEMAKER_BIND_TO_PORT" in p.warnings
        )
    assert p.argv[p.argv.index("--host") + 1] == "127.0.0.1"
    assert p.argv[p.argv.index("--seed") + 1] == "7"  # the flags after them are still passed


NEURON_ONLY = {
    "NEURONSERVE_CACHE_URI": "s3://b/cache/",
    "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference",
    "NEURONSERVE_INTEGRATION": "plugin",
    "NEURON_RT_VISIBLE_CORES": "0-1",
    "NEURON_LOGICAL_NC_CONFIG": "2",
    "NEURON_COMPILED_ARTIFACTS": "/art",
}


@pytest.mark.parametrize("var", sorted(NEURON_ONLY))
def test_the_cpu_plan_names_each_neuron_setting_it_drops(var: str) -> None:
    env = {"SM_VLLM_MODEL": "org/m", var: NEURON_ONLY[var]}
    p = plan(env, facts(cores=None), device="cpu")
    dropped = [w for w in p.warnings if w.endswith("is a Neuron setting: dropped for the CPU engine")]
    assert dropped == [f"{var} is a Neuron setting: dropped for the CPU engine"]


def test_the_cpu_plan_warns_about_nothing_it_was_not_given() -> None:
    p = plan({"SM_VLLM_MODEL": "org/m"}, facts(cores=None), device="cpu")
    assert p.warnings == ()


def test_a_local_model_dir_is_used_in_place() -> None:
    f = facts(paths={"/models/m": ModelFacts(kind="dir")})
    p = plan({**HUB_MODEL, "SM_VLLM_MODEL": "/models/m"}, f)
    assert (p.model.source, p.model.local_path) == ("local", "/models/m")


@pytest.mark.parametrize(
    ("extra", "mode"),
    [
        ({"NEURONSERVE_CACHE_URI": "s3://b/c/"}, "keyed"),
        ({"NEURON_COMPILED_ARTIFACTS": "s3://b/x/"}, "explicit"),
    ],
)
def test_require_cache_hit_marks_a_remote_cache(extra: dict[str, str], mode: str) -> None:
    p = plan({**HUB_MODEL, **extra, "NEURONSERVE_REQUIRE_CACHE_HIT": "true"})
    assert (p.artifacts.mode, p.artifacts.require_hit) == (mode, True)
    assert plan({**HUB_MODEL, **extra}).artifacts.require_hit is False


@pytest.mark.parametrize("extra", [{}, {"NEURON_COMPILED_ARTIFACTS": "/art"}])
def test_require_cache_hit_without_a_remote_cache_is_refused(extra: dict[str, str]) -> None:
    err = refusal({**HUB_MODEL, **extra, "NEURONSERVE_REQUIRE_CACHE_HIT": "true"})
    assert str(err) == (
        "NEURONSERVE_REQUIRE_CACHE_HIT=true needs a remote cache to hit: set NEURONSERVE_CACHE_URI "
        "(s3:// prefix of the keyed cache) or unset NEURONSERVE_REQUIRE_CACHE_HIT"
    )
    assert err.variables == ("NEURONSERVE_REQUIRE_CACHE_HIT", "NEURONSERVE_CACHE_URI")


@pytest.mark.parametrize("uri", ["./models/m", "~/m"])
def test_relative_and_home_paths_are_local_directories(uri: str) -> None:
    err = refusal({**HUB_MODEL, "SM_VLLM_MODEL": uri})
    assert str(err) == f"SM_VLLM_MODEL={uri}: no such model directory on this host"


def test_a_local_file_is_not_a_model_directory() -> None:
    f = facts(paths={"models/m.bin": ModelFacts(kind="file")})
    err = refusal({**HUB_MODEL, "SM_VLLM_MODEL": "models/m.bin"}, f)
    assert str(err) == "SM_VLLM_MODEL=models/m.bin: no such model directory on this host"


def test_a_revision_is_ignored_for_anything_but_a_hub_model() -> None:
    p = plan({**HUB_MODEL, "SM_VLLM_MODEL": "s3://b/m/", "SM_VLLM_REVISION": "abc"})
    assert "SM_VLLM_REVISION ignored: s3://b/m/ is not a hub model" in p.warnings
    assert not [w for w in plan(HUB_MODEL).warnings if "is not a hub model" in w]


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


def test_a_cpu_hub_model_with_a_revision_passes_it_after_the_model() -> None:
    p = plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_REVISION": "abc"}, facts(cores=None), device="cpu")
    assert list(p.argv[3:7]) == ["--model", "org/m", "--revision", "abc"]


# --- edge cases found by mutation testing ---------------------------------------------------------


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
        plan({**HUB_MODEL, "NEURONSERVE_WORK_DIR": "/srv/X"}),
        cpu_plan({"SM_VLLM_MODEL": "org/m", "NEURONSERVE_WORK_DIR": "/srv/X"}),
    ):
        assert (p.engine_host, p.work_dir) == ("127.0.0.1", "/srv/X")


def test_a_flag_the_neuron_plan_renders_is_not_passed_again_from_after_the_separator() -> None:
    """`-- --no-enable-prefix-caching` on Neuron: the plan reads it and renders the KV layout's own
    `--no-enable-prefix-caching`, so vLLM gets it once (the plan's copy), while the flag after it that
    the plan does not render (`--seed 3`) is passed through as given."""
    p = build_plan(
        parse_settings(HUB_MODEL, extra_args=("--no-enable-prefix-caching", "--seed", "3")), facts()
    )
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
