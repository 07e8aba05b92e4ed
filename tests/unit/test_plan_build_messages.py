"""build_plan's refusals and warnings, word for word: they are what the person who configured the
container reads, and each names the variables to change (ConfigError.variables). Added where
mutation testing (scripts/mutation, docs/TESTING.md) showed messages and names no test checked."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.types import LaunchPlan

VERSIONS = {
    "vllm": "0.11.0",
    "vllm-neuron": "0.2.2+lts",
    "neuronx-distributed-inference": "0.7.14366",
    "neuronx-cc": "2.22.12471.0",
}
MODEL = {
    "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "128",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}


def facts(cores: int | None = 32, **kw: object) -> HostFacts:
    base: dict[str, object] = {
        "python": "/usr/bin/python3",
        "neuron_devices": 1 if cores else 0,
        "visible_cores": cores,
        "cores_source": "test",
        "versions": dict(VERSIONS),
    }
    base.update(kw)
    return HostFacts(**base)  # type: ignore[arg-type]


def plan(env: Mapping[str, str], f: HostFacts | None = None, device: str | None = None) -> LaunchPlan:
    return build_plan(parse_settings(env, device=device), f or facts())


def refusal(env: Mapping[str, str], f: HostFacts | None = None, device: str | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        plan(env, f, device)
    return err.value


def test_no_model_names_every_way_to_give_one() -> None:
    err = refusal({}, facts(sagemaker_model_dir="/opt/ml/model"))
    assert str(err) == (
        "no model configured: set SM_VLLM_MODEL (hub id, local dir, s3:// prefix or .tar.gz), put the model "
        "in /opt/ml/model (SM_MODEL_DIR), or set HF_MODEL_ID"
    )
    assert err.variables == ("SM_VLLM_MODEL", "SM_MODEL_DIR", "HF_MODEL_ID", "OPTION_MODEL_ID")


@pytest.mark.parametrize("uri", ["/data/model.tar.gz", "/data/model.tgz"])
def test_a_missing_local_archive_is_refused(uri: str) -> None:
    err = refusal({**MODEL, "SM_VLLM_MODEL": uri})
    assert str(err) == f"SM_VLLM_MODEL={uri}: no such archive on this host"
    assert err.variables == ("SM_VLLM_MODEL",)


@pytest.mark.parametrize("uri", ["s3://b/m.tar.gz", "s3://b/m.tgz"])
def test_s3_archives_of_both_suffixes_are_staged(uri: str) -> None:
    p = plan({**MODEL, "SM_VLLM_MODEL": uri, "NEURONSERVE_WORK_DIR": "/srv/X/"})
    assert (p.model.source, p.model.local_path) == ("archive", "/srv/X/model")


def test_a_missing_local_directory_is_refused() -> None:
    err = refusal({**MODEL, "SM_VLLM_MODEL": "/data/nothing-here"})
    assert str(err) == "SM_VLLM_MODEL=/data/nothing-here: no such model directory on this host"
    assert err.variables == ("SM_VLLM_MODEL",)


def test_other_configured_models_are_named_as_ignored() -> None:
    env = {**MODEL, "HF_MODEL_ID": "org/a", "OPTION_MODEL_ID": "org/b"}
    p = plan(env)
    assert p.model.uri == MODEL["SM_VLLM_MODEL"]
    assert (
        "model from SM_VLLM_MODEL; also configured and ignored: HF_MODEL_ID=org/a, OPTION_MODEL_ID=org/b"
        in p.warnings
    )


def test_the_work_dir_is_used_as_given_without_its_trailing_slash() -> None:
    p = plan({**MODEL, "SM_VLLM_MODEL": "s3://b/m/", "NEURONSERVE_WORK_DIR": "/srv/X/"})
    assert p.model.local_path == "/srv/X/model"
    assert p.artifacts.local_dir == f"/srv/X/artifacts/{p.cache_key}"


def test_an_explicit_artifacts_location_and_a_cache_uri_are_refused_together() -> None:
    env = {**MODEL, "NEURON_COMPILED_ARTIFACTS": "/art", "NEURONSERVE_CACHE_URI": "s3://b/cache/"}
    err = refusal(env)
    assert str(err) == (
        "NEURON_COMPILED_ARTIFACTS=/art and NEURONSERVE_CACHE_URI=s3://b/cache/ both choose where compiled "
        "artifacts live: keep NEURONSERVE_CACHE_URI (keyed, safe) or the explicit location, not both"
    )
    assert err.variables == ("NEURON_COMPILED_ARTIFACTS", "NEURONSERVE_CACHE_URI")


def test_a_cache_uri_must_be_s3() -> None:
    err = refusal({**MODEL, "NEURONSERVE_CACHE_URI": "/mnt/cache"})
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
    env = {**MODEL, **extra, "NEURONSERVE_CACHE_READ_ONLY": "true" if read_only else "false"}
    p = plan(env)
    assert p.artifacts.mode == mode
    assert p.artifacts.read_only is read_only
    if mode == "keyed":
        assert p.artifacts.remote_uri == f"s3://b/BOX/{p.cache_key}/"


def test_host_and_port_settings_are_ignored_with_a_warning() -> None:
    p = plan({**MODEL, "SM_VLLM_HOST": "0.0.0.0", "SM_VLLM_PORT": "9000", "SM_VLLM_SEED": "7"})
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
    p = plan({**MODEL, "SM_VLLM_MODEL": "/models/m"}, f)
    assert (p.model.source, p.model.local_path) == ("local", "/models/m")


@pytest.mark.parametrize(
    ("extra", "mode"),
    [
        ({"NEURONSERVE_CACHE_URI": "s3://b/c/"}, "keyed"),
        ({"NEURON_COMPILED_ARTIFACTS": "s3://b/x/"}, "explicit"),
    ],
)
def test_require_cache_hit_marks_a_remote_cache(extra: dict[str, str], mode: str) -> None:
    p = plan({**MODEL, **extra, "NEURONSERVE_REQUIRE_CACHE_HIT": "true"})
    assert (p.artifacts.mode, p.artifacts.require_hit) == (mode, True)
    assert plan({**MODEL, **extra}).artifacts.require_hit is False


@pytest.mark.parametrize("extra", [{}, {"NEURON_COMPILED_ARTIFACTS": "/art"}])
def test_require_cache_hit_without_a_remote_cache_is_refused(extra: dict[str, str]) -> None:
    err = refusal({**MODEL, **extra, "NEURONSERVE_REQUIRE_CACHE_HIT": "true"})
    assert str(err) == (
        "NEURONSERVE_REQUIRE_CACHE_HIT=true needs a remote cache to hit: set NEURONSERVE_CACHE_URI "
        "(s3:// prefix of the keyed cache) or unset NEURONSERVE_REQUIRE_CACHE_HIT"
    )
    assert err.variables == ("NEURONSERVE_REQUIRE_CACHE_HIT", "NEURONSERVE_CACHE_URI")


@pytest.mark.parametrize("uri", ["./models/m", "~/m"])
def test_relative_and_home_paths_are_local_directories(uri: str) -> None:
    err = refusal({**MODEL, "SM_VLLM_MODEL": uri})
    assert str(err) == f"SM_VLLM_MODEL={uri}: no such model directory on this host"


def test_a_local_file_is_not_a_model_directory() -> None:
    f = facts(paths={"models/m.bin": ModelFacts(kind="file")})
    err = refusal({**MODEL, "SM_VLLM_MODEL": "models/m.bin"}, f)
    assert str(err) == "SM_VLLM_MODEL=models/m.bin: no such model directory on this host"


def test_a_revision_is_ignored_for_anything_but_a_hub_model() -> None:
    p = plan({**MODEL, "SM_VLLM_MODEL": "s3://b/m/", "SM_VLLM_REVISION": "abc"})
    assert "SM_VLLM_REVISION ignored: s3://b/m/ is not a hub model" in p.warnings
    assert not [w for w in plan(MODEL).warnings if "is not a hub model" in w]


SHARDED_WARNING = (
    "cached artifacts without save_sharded_checkpoint re-shard from the model path on every load: set "
    "SM_NEURON_SAVE_SHARDED_CHECKPOINT=true to make them self-contained (larger upload, faster start)"
)


def test_keyed_artifacts_without_sharded_checkpoints_are_warned_about() -> None:
    keyed = {**MODEL, "NEURONSERVE_CACHE_URI": "s3://b/c/"}
    assert SHARDED_WARNING in plan(keyed).warnings
    assert SHARDED_WARNING not in plan({**keyed, "SM_NEURON_SAVE_SHARDED_CHECKPOINT": "true"}).warnings
    assert SHARDED_WARNING not in plan({**MODEL, "NEURON_COMPILED_ARTIFACTS": "s3://b/x/"}).warnings
    p = plan(MODEL)
    assert SHARDED_WARNING not in p.warnings
    assert p.env["NEURON_COMPILED_ARTIFACTS"] == p.artifacts.local_dir


def test_a_hub_revision_on_neuron_is_refused_naming_its_variable() -> None:
    err = refusal({**MODEL, "SM_VLLM_REVISION": "abc123"})
    assert err.variables == ("SM_VLLM_REVISION", "SM_VLLM_MODEL")


def test_the_cpu_plan_passes_additional_config_once_as_sorted_json() -> None:
    env = {"SM_VLLM_MODEL": "org/m", "SM_VLLM_ADDITIONAL_CONFIG": '{"b": 1, "a": {"d": 2, "c": 3}}'}
    p = plan(env, facts(cores=None), device="cpu")
    assert list(p.argv).count("--additional-config") == 1
    assert list(p.argv[-2:]) == ["--additional-config", '{"a": {"c": 3, "d": 2}, "b": 1}']


def test_a_cpu_hub_model_with_a_revision_passes_it_after_the_model() -> None:
    p = plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_REVISION": "abc"}, facts(cores=None), device="cpu")
    assert list(p.argv[3:7]) == ["--model", "org/m", "--revision", "abc"]
