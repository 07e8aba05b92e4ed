"""The first decisions of a plan (plan/model.py): the device, the model and where it comes from (the order
of its sources, the refusals naming each variable), where compiled artifacts live, and the Neuron settings
a CPU plan drops, each said; called directly, then through build_plan word for word (the latter added where
mutation testing, scripts/mutation and docs/TESTING.md, showed messages and names no test checked).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from tests.support.builders import HUB_MODEL, facts, plan, raised, refusal

from neuronserve.config.settings import Settings, parse_settings
from neuronserve.plan import model
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.resolution import Resolution
from neuronserve.types import ArtifactSpec, LaunchPlan, ModelSpec

WORK = "/w"
KEY = "k" * 32


def choose(
    env: dict[str, str], host: HostFacts | None = None, extra: tuple[str, ...] = ()
) -> tuple[ModelSpec, list[str]]:
    settings = parse_settings(env, extra_args=extra)
    res = Resolution.of(settings)
    return model.choose_model(settings, host or facts(), WORK, res), res.warnings


@pytest.mark.parametrize(
    ("setting", "devices", "device"),
    [("auto", 1, "neuron"), ("auto", 0, "cpu"), ("neuron", 0, "neuron"), ("cpu", 4, "cpu")],
)
def test_the_device_is_the_setting_or_what_the_host_has(setting: str, devices: int, device: str) -> None:
    settings = parse_settings({"SM_VLLM_MODEL": "m", "NEURONSERVE_DEVICE": setting})
    assert model.choose_device(settings, facts(neuron_devices=devices)) == device


@pytest.mark.parametrize(
    ("uri", "paths", "spec"),
    [
        ("org/m", {}, ModelSpec("hub", "org/m", None, None, "SM_VLLM_MODEL")),
        ("s3://b/m/", {}, ModelSpec("s3", "s3://b/m/", "/w/model", None, "SM_VLLM_MODEL")),
        ("s3://b/m.tar.gz", {}, ModelSpec("archive", "s3://b/m.tar.gz", "/w/model", None, "SM_VLLM_MODEL")),
        (
            "/d/m.tgz",
            {"/d/m.tgz": ModelFacts("file")},
            ModelSpec("archive", "/d/m.tgz", "/w/model", None, "SM_VLLM_MODEL"),
        ),
        ("/d/m", {"/d/m": ModelFacts("dir")}, ModelSpec("local", "/d/m", "/d/m", None, "SM_VLLM_MODEL")),
    ],
)
def test_each_model_source(uri: str, paths: dict[str, ModelFacts], spec: ModelSpec) -> None:
    assert choose({"SM_VLLM_MODEL": uri}, facts(paths=paths))[0] == spec


def test_sm_vllm_model_wins_over_the_sagemaker_dir_and_hf_model_id_and_says_so() -> None:
    host = facts(sagemaker_model_dir_nonempty=True)
    spec, warnings = choose({"SM_VLLM_MODEL": "org/a", "HF_MODEL_ID": "org/b"}, host)
    assert (spec.uri, spec.origin) == ("org/a", "SM_VLLM_MODEL")
    assert (
        warnings[-1] == "model from SM_VLLM_MODEL; also configured and ignored: SM_MODEL_DIR=/opt/ml/model, "
        "HF_MODEL_ID=org/b"
    )


def test_the_sagemaker_dir_wins_over_hf_model_id() -> None:
    spec, _ = choose({"HF_MODEL_ID": "org/b"}, facts(sagemaker_model_dir_nonempty=True))
    assert spec == ModelSpec("sagemaker", "/opt/ml/model", "/opt/ml/model", None, "SM_MODEL_DIR")


def test_a_revision_is_kept_for_a_hub_model_and_said_ignored_otherwise() -> None:
    hub, _ = choose({"SM_VLLM_MODEL": "org/a", "SM_VLLM_REVISION": "v2"})
    assert hub.revision == "v2"
    s3, warnings = choose({"SM_VLLM_MODEL": "s3://b/m/", "SM_VLLM_REVISION": "v2"})
    assert s3.revision is None and "SM_VLLM_REVISION ignored: s3://b/m/ is not a hub model" in warnings


def settings_of(env: dict[str, str]) -> Settings:
    return parse_settings({"SM_VLLM_MODEL": "m", **env})


@pytest.mark.parametrize(
    ("env", "spec"),
    [
        ({}, ArtifactSpec("local", f"/w/artifacts/{KEY}", None, False, owned=True)),
        (
            {"NEURONSERVE_CACHE_URI": "s3://b/c/"},
            ArtifactSpec("keyed", f"/w/artifacts/{KEY}", f"s3://b/c/{KEY}/", False),
        ),
        (
            {"NEURON_COMPILED_ARTIFACTS": "s3://b/x/"},
            ArtifactSpec("explicit", f"/w/artifacts/{KEY}", "s3://b/x/", False),
        ),
        (
            {"NEURON_COMPILED_ARTIFACTS": "/mine", "NEURONSERVE_CACHE_READ_ONLY": "true"},
            ArtifactSpec("local", "/mine", None, True),
        ),
        (
            {"NEURONSERVE_CACHE_URI": "s3://b/c", "NEURONSERVE_REQUIRE_CACHE_HIT": "true"},
            ArtifactSpec("keyed", f"/w/artifacts/{KEY}", f"s3://b/c/{KEY}/", False, require_hit=True),
        ),
    ],
)
def test_where_compiled_artifacts_live(env: dict[str, str], spec: ArtifactSpec) -> None:
    assert model.artifacts(settings_of(env), "/w/", KEY) == spec


@pytest.mark.parametrize(
    ("env", "variables"),
    [
        ({"NEURONSERVE_CACHE_URI": "/local/c"}, ("NEURONSERVE_CACHE_URI",)),
        (
            {"NEURONSERVE_CACHE_URI": "s3://b/c", "NEURON_COMPILED_ARTIFACTS": "s3://b/x"},
            ("NEURON_COMPILED_ARTIFACTS", "NEURONSERVE_CACHE_URI"),
        ),
        (
            {"NEURONSERVE_REQUIRE_CACHE_HIT": "true"},
            ("NEURONSERVE_REQUIRE_CACHE_HIT", "NEURONSERVE_CACHE_URI"),
        ),
        (
            {"NEURONSERVE_REQUIRE_CACHE_HIT": "true", "NEURON_COMPILED_ARTIFACTS": "/mine"},
            ("NEURONSERVE_REQUIRE_CACHE_HIT", "NEURONSERVE_CACHE_URI"),
        ),
    ],
)
def test_artifact_settings_that_cannot_work_are_refused(
    env: dict[str, str], variables: tuple[str, ...]
) -> None:
    assert raised(model.artifacts, settings_of(env), WORK, KEY).variables == variables


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


def test_a_model_that_is_not_from_the_hub_without_a_revision_gets_no_revision_warning() -> None:
    """The "revision ignored" warning needs both a revision and a non-hub model: an s3:// model with no
    revision plans without any warning."""
    assert cpu_plan({"SM_VLLM_MODEL": "s3://b/m/"}).warnings == ()


def test_the_cpu_plan_drops_require_cache_hit_with_a_warning() -> None:
    """NEURONSERVE_REQUIRE_CACHE_HIT has no meaning without compiled artifacts: the CPU plan names it."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "NEURONSERVE_REQUIRE_CACHE_HIT": "true"})
    assert p.warnings == (f"NEURONSERVE_REQUIRE_CACHE_HIT {DROPPED}",)
