"""The EKS renderer (deploy/k8s/render.py) against the plan: the pod asks for the cores the container's
plan uses on inf2, trn1 and trn2 (TP, DP, LNC), autoscaled pods only start on cache hits while the Job
compiles, secrets stay references, and what the plan refuses renders nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest
from k8s_support import CACHE, MODEL, ROOT, by_kind, cli, options, rendered, server

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


def _docs(stdout: str) -> list[dict[str, Any]]:
    yaml = pytest.importorskip("yaml", reason="needs PyYAML to read the stream")
    return [d for d in yaml.safe_load_all(stdout) if d]


def _env_flags(env: dict[str, str]) -> list[str]:
    return [f"--env={k}={v}" for k, v in env.items()]


def test_every_container_mounts_the_work_volume_where_the_image_works(tmp_path: Any) -> None:
    """The image works in /var/lib/neuronserve (docker/Dockerfile's ENV NEURONSERVE_WORK_DIR and WORKDIR);
    the volume was mounted at the table default /tmp/neuronserve, so the stage initContainer downloaded
    into a filesystem the server never read. An environment that sets the variable keeps its own path."""
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "NEURONSERVE_WORK_DIR=/var/lib/neuronserve" in dockerfile
    assert "WORKDIR /var/lib/neuronserve" in dockerfile
    for env, where in (
        ({}, "/var/lib/neuronserve"),
        ({"NEURONSERVE_WORK_DIR": "/scratch/ns"}, "/scratch/ns"),
    ):
        out = tmp_path / where.strip("/").replace("/", "-")
        result = cli(
            "--instance-type", "inf2.xlarge", *_env_flags({**MODEL, **CACHE, **env}), "--output", str(out)
        )
        assert result.returncode == 0, result.stderr
        yaml = pytest.importorskip("yaml", reason="needs PyYAML")
        job = yaml.safe_load((out / "compile" / "job.yaml").read_text())
        deployment = yaml.safe_load((out / "deployment.yaml").read_text())
        pods = [job["spec"]["template"]["spec"], deployment["spec"]["template"]["spec"]]
        containers = [c for p in pods for c in (*p.get("initContainers", []), *p["containers"])]
        assert sorted(c["name"] for c in containers) == ["compile", "neuronserve", "stage"]
        for c in containers:
            assert {m["mountPath"] for m in c["volumeMounts"] if m["name"] == "work"} == {where}, c["name"]


@pytest.mark.parametrize("name", ["SM_VLLM_DATA_PARALLEL_SIZE", "NEURONSERVE_DATA_PARALLEL"])
def test_data_parallel_auto_is_resolved_from_the_declared_instance(name: str) -> None:
    """`auto` was refused at render ("needs the visible NeuronCores"): the instance type says how many."""
    env = {**MODEL, TP: "8", name: "auto"}
    result = cli("--instance-type", "inf2.48xlarge", *_env_flags(env))
    assert result.returncode == 0, result.stderr
    assert "3 engine(s) of TP 8" in result.stderr
    [deployment] = [d for d in _docs(result.stdout) if d["kind"] == "Deployment"]
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["aws.amazon.com/neuroncore"] == 24


def test_stdout_is_safe_to_pipe_to_kubectl_apply() -> None:
    """Without --output the compile Job and the Deployment came in one stream, so `| kubectl apply -f -`
    started both at once. With a Job, stdout holds the Job (and what it needs) only and stderr says how
    to apply the server after it; without one, everything. Each stream is read by kubectl, client only
    (`kubectl label --local`: `apply --dry-run=client` still asks a server for the API's resources)."""
    with_job = cli("--instance-type", "inf2.xlarge", *_env_flags({**MODEL, **CACHE}))
    assert with_job.returncode == 0, with_job.stderr
    kinds = [d["kind"] for d in _docs(with_job.stdout)]
    assert kinds == ["ServiceAccount", "ConfigMap", "Job"]
    assert "stdout holds the compile Job only" in with_job.stderr and "--no-compile-job" in with_job.stderr
    server_only = cli("--instance-type", "inf2.xlarge", *_env_flags({**MODEL, **CACHE}), "--no-compile-job")
    assert server_only.returncode == 0, server_only.stderr
    assert "Deployment" in [d["kind"] for d in _docs(server_only.stdout)]
    assert "Job" not in [d["kind"] for d in _docs(server_only.stdout)]
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed here")
    for stream in (with_job.stdout, server_only.stdout):
        read = subprocess.run(
            [kubectl, "label", "--local", "-f", "-", "checked=yes", "-o", "name"],
            input=stream, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert read.returncode == 0, read.stderr
    assert read.stdout.split()[-1].startswith("poddisruptionbudget")


def test_model_config_checks_the_hbm_fit_at_render() -> None:
    """A 70B on S3 at its full 131,072 tokens: without --model-config nothing can be checked here (the
    endpoint would be up and 140 GB downloaded before the refusal); with it, refused at render."""
    config = ROOT / "tests" / "data" / "models" / "Llama-3.3-70B-Instruct" / "config.json"
    env = {"SM_VLLM_MODEL": "s3://acme-ml-models/llama-3.3-70b/", "SM_VLLM_MAX_MODEL_LEN": "131072"}
    blind = cli("--instance-type", "inf2.48xlarge", *_env_flags(env))
    assert blind.returncode == 0 and "HBM fit not checked" in blind.stderr, blind.stderr
    checked = cli("--instance-type", "inf2.48xlarge", *_env_flags(env), "--model-config", str(config))
    assert checked.returncode == 2 and checked.stdout == ""
    assert "HBM estimate on inf2.48xlarge" in checked.stderr and "does not fit" in checked.stderr
    fits = cli(
        "--instance-type", "inf2.48xlarge", *_env_flags({**env, "SM_VLLM_MAX_MODEL_LEN": "4096"}),
        "--model-config", str(config),
    )  # fmt: skip
    assert fits.returncode == 0, fits.stderr
    assert "HBM fit not checked" not in fits.stderr
