"""The first decisions of a plan (plan/model.py), called directly: the device, the model and where it
comes from (the order of its sources, the refusals naming each variable), where compiled artifacts live,
and the Neuron settings a CPU plan drops, each said."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import facts, raised

from neuronserve.config.settings import Settings, parse_settings
from neuronserve.plan import model
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.resolution import Resolution
from neuronserve.types import ArtifactSpec, ModelSpec

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


@pytest.mark.parametrize(
    ("uri", "paths", "message"),
    [
        ("/d/m.tar.gz", {}, "SM_VLLM_MODEL=/d/m.tar.gz: no such archive on this host"),
        ("/d/m", {}, "SM_VLLM_MODEL=/d/m: no such model directory on this host"),
        ("./m", {}, "SM_VLLM_MODEL=./m: no such model directory on this host"),
        ("m", {"m": ModelFacts("file")}, "SM_VLLM_MODEL=m: no such model directory on this host"),
    ],
)
def test_a_local_model_that_is_not_there_is_refused(uri: str, paths: dict[str, Any], message: str) -> None:
    settings = parse_settings({"SM_VLLM_MODEL": uri})
    err = raised(model.choose_model, settings, facts(paths=paths), WORK, Resolution.of(settings))
    assert str(err) == message and err.variables == ("SM_VLLM_MODEL",)


def test_no_model_is_refused_naming_every_source() -> None:
    settings = parse_settings({})
    err = raised(model.choose_model, settings, facts(), WORK, Resolution.of(settings))
    assert err.variables == ("SM_VLLM_MODEL", "SM_MODEL_DIR", "HF_MODEL_ID", "OPTION_MODEL_ID")
    assert "put the model in /opt/ml/model (SM_MODEL_DIR)" in str(err)


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


def test_a_cpu_plan_says_each_neuron_setting_it_drops() -> None:
    settings = settings_of(
        {
            "SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true",
            "NEURONSERVE_CACHE_URI": "s3://b/c",
            "NEURON_RT_VISIBLE_CORES": "0-1",
            "NEURON_LOGICAL_NC_CONFIG": "2",
        }
    )
    res = Resolution.of(settings)
    model.cpu_warnings(settings, res)
    assert res.warnings == [
        "SM_NEURON_SEQUENCE_PARALLEL_ENABLED (sequence_parallel_enabled) is a Neuron setting: dropped for "
        "the CPU engine",
        "NEURONSERVE_CACHE_URI is a Neuron setting: dropped for the CPU engine",
        "NEURON_RT_VISIBLE_CORES is a Neuron setting: dropped for the CPU engine",
        "NEURON_LOGICAL_NC_CONFIG is a Neuron setting: dropped for the CPU engine",
    ]
