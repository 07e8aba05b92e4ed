"""The EKS renderer (deploy/k8s/render.py) against the plan: the pod asks for the cores the container's
plan uses on inf2, trn1 and trn2 (TP, DP, LNC), autoscaled pods only start on cache hits while the Job
compiles, secrets stay references, and what the plan refuses renders nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from k8s_support import CACHE, MODEL, by_kind, cli, options, rendered, server

from neuronserve.deploy.k8s import yamlout
from neuronserve.deploy.k8s.options import SecretRef
from neuronserve.deploy.k8s.render import render
from neuronserve.deploy.validate import cores_used, tensor_parallel
from neuronserve.errors import ConfigError
from neuronserve.launchplan import resolve_plan

TP, DP, LNC = "SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURONSERVE_DATA_PARALLEL", "NEURON_LOGICAL_NC_CONFIG"


def container_plan(result: Any, visible: int) -> Any:
    """The plan the serving container makes from its ConfigMap and env, given the cores its pod holds
    (as the device plugin hands them: NEURON_RT_VISIBLE_CORES), independently of the renderer."""
    docs = by_kind(result)
    env = dict(docs["ConfigMap"]["data"])
    env.update({e["name"]: e["value"] for e in server(result)["env"] if "value" in e})
    env.update({"NEURON_RT_VISIBLE_CORES": f"0-{visible - 1}", "SM_MODEL_DIR": "/nonexistent"})
    return resolve_plan(env, device="neuron")


@pytest.mark.parametrize(
    ("instance", "env", "kind", "units", "cores"),
    [
        ("inf2.xlarge", {}, "neuroncore", 2, 2),  # TP defaults to the node's cores
        ("inf2.48xlarge", {TP: "8"}, "neuroncore", 8, 8),
        ("inf2.48xlarge", {TP: "4", DP: "3"}, "neuroncore", 12, 12),
        ("inf2.48xlarge", {TP: "4", DP: "3"}, "device", 6, 12),
        ("trn1.32xlarge", {TP: "8"}, "neuroncore", 8, 8),
        ("trn1.32xlarge", {TP: "32"}, "device", 16, 32),
        ("trn2.48xlarge", {TP: "16"}, "neuroncore", 16, 16),  # LNC 2 (default): logical cores
        ("trn2.48xlarge", {TP: "16"}, "device", 4, 16),  # 4 logical cores per Trainium2 at LNC 2
        ("trn2.48xlarge", {TP: "16", LNC: "1"}, "device", 2, 16),  # 8 at LNC 1
        ("trn2.3xlarge", {TP: "2", DP: "2"}, "neuroncore", 4, 4),
    ],
)
def test_the_pod_asks_for_the_plans_cores(
    instance: str, env: dict[str, str], kind: str, units: int, cores: int
) -> None:
    result = rendered(env, instance, neuron_resource=kind)
    resource = f"aws.amazon.com/{'neuroncore' if kind == 'neuroncore' else 'neuron'}"
    requests = server(result)["resources"]["requests"]
    assert requests[resource] == units == server(result)["resources"]["limits"][resource]
    assert result.checked is not None and result.size is not None
    assert cores_used(result.checked.plan) == cores
    inside = container_plan(result, result.size.visible_cores)
    assert tensor_parallel(inside) * len(inside.replicas) == cores  # the container computes on what it asked
    spec = by_kind(result)["Deployment"]["spec"]["template"]["spec"]
    assert ("schedulerName" in spec) is (units > 1)
    assert spec["nodeSelector"] == {"node.kubernetes.io/instance-type": instance}
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]


def test_both_instance_spellings_render_the_same() -> None:
    assert rendered(instance="ml.inf2.xlarge").documents() == rendered(instance="inf2.xlarge").documents()


def test_autoscaled_pods_only_start_on_cache_hits_and_the_job_compiles() -> None:
    result = rendered({**CACHE}, "inf2.xlarge", autoscaler="keda")
    docs = by_kind(result)
    deployment = docs["Deployment"]
    assert "replicas" not in deployment["spec"]  # the autoscaler owns it
    pod = deployment["spec"]["template"]["spec"]
    for c in (*pod["initContainers"], *pod["containers"]):
        assert {"name": "NEURONSERVE_REQUIRE_CACHE_HIT", "value": "true"} in c["env"], c["name"]
    job = docs["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert (
        job["args"] == ["compile"]
        and {"name": "NEURONSERVE_REQUIRE_CACHE_HIT", "value": "false"} in job["env"]
    )
    assert job["resources"] == pod["containers"][0]["resources"]  # compiled for the same cores
    assert [c["args"] for c in pod["initContainers"]] == [["stage"]]
    startup = pod["containers"][0]["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] < 3600  # a load, not a compile
    assert "NEURONSERVE_REQUIRE_CACHE_HIT" not in docs["ConfigMap"]["data"]


@pytest.mark.parametrize("autoscaler", ["keda", "hpa"])
def test_autoscaling_with_the_cache_hit_rule_set_false_is_refused_not_overridden(autoscaler: str) -> None:
    """The user's explicit false and the autoscaler's never-compile rule contradict: exit 2 naming both,
    where the renderer used to write true over the user's value without a word."""
    result = cli(
        "--instance-type", "inf2.xlarge", "--autoscaler", autoscaler,
        *(f"--env={k}={v}" for k, v in {**MODEL, **CACHE, "NEURONSERVE_REQUIRE_CACHE_HIT": "False"}.items()),
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert f"--autoscaler {autoscaler} with NEURONSERVE_REQUIRE_CACHE_HIT='False'" in result.stderr
    for value in ("true", ""):  # the rule as the autoscaler sets it, or blank: nothing to resolve
        env = {**CACHE, "NEURONSERVE_REQUIRE_CACHE_HIT": value}
        assert by_kind(rendered(env, autoscaler=autoscaler))["Deployment"]


def test_autoscaling_without_a_cache_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--autoscaler hpa: .*set NEURONSERVE_CACHE_URI"):
        rendered({}, autoscaler="hpa")


def test_no_cache_no_job_and_a_compile_budget() -> None:
    result = rendered()
    assert result.compile == [] and any("no NEURONSERVE_CACHE_URI" in n for n in result.notes)
    startup = server(result)["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600
    assert rendered(CACHE, compile_job=False).compile == []


def test_the_grace_period_exceeds_the_drain_in_the_manifest() -> None:
    result = rendered({"NEURONSERVE_DRAIN_GRACE_S": "300"}, prestop_s=20)
    pod = by_kind(result)["Deployment"]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > 300 + 20
    assert pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"] == 20


def test_secrets_are_references_never_values() -> None:
    arn = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf-AbCdEf"
    refs = {"SM_VLLM_API_KEY": SecretRef("vllm", "api-key")}
    result = rendered({}, secret_refs=refs, token_arn=arn)
    assert by_kind(result)["ConfigMap"]["data"]["HF_TOKEN_SECRET_ARN"] == arn
    entry = {"name": "SM_VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "vllm", "key": "api-key"}}}
    assert entry in server(result)["env"]
    text = yamlout.dump_all(result.documents())
    assert "api-key" in text and "SM_VLLM_API_KEY" not in by_kind(result)["ConfigMap"]["data"]


@pytest.mark.parametrize(
    ("env", "kw", "needle"),
    [
        ({"HF_TOKEN": "hf_abcdefghijklmnop0123"}, {}, "plain text in the ConfigMap"),
        ({"SM_VLLM_ENABLE_PREFIX_CACHING": "yes"}, {}, "is a switch"),
        ({TP: "4"}, {}, "has 2 NeuronCores"),
        ({TP: "4"}, {"instance_type": "trn1.32xlarge"}, "only 1, 4, 8, 16 devices per pod"),
        ({"NEURON_RT_VISIBLE_CORES": "0-1"}, {}, "set by EKS for each pod"),
        ({"NEURONSERVE_CACHE_URI": "s3://my-bucket/cache/"}, {}, "placeholder"),
        (
            {},
            {
                "secret_refs": {"HF_TOKEN": SecretRef("t", "k")},
                "token_arn": "arn:aws:secretsmanager:us-west-2:123456789012:secret:x",
            },
            "keep one",
        ),
    ],
)
def test_refusals(env: dict[str, str], kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)) as err:
        render(options(**{"instance": kw.pop("instance_type", "inf2.xlarge"), **kw}), {**MODEL, **env})
    assert "hf_abcdefghijklmnop0123" not in str(err.value)


def test_objects_are_named_and_namespaced() -> None:
    result = rendered({**CACHE}, name="llama", namespace="serving", autoscaler="hpa")
    for doc in result.documents():
        assert doc["metadata"]["namespace"] == "serving"
        assert doc["metadata"]["name"].startswith("llama")
    assert {d["kind"] for d in result.documents()} == {
        "ServiceAccount", "ConfigMap", "Job", "Deployment", "Service", "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
    }  # fmt: skip
