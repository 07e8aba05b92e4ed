"""The objects (deploy/k8s/objects.py): content-named ConfigMap and Job, the IRSA annotation, the rollout
and disruption rules a Neuron server needs, the Prometheus annotations."""

from __future__ import annotations

from k8s_support import options

from neuronserve.deploy.k8s import objects

POD = {"containers": [{"name": "c", "image": "i"}]}


def test_the_config_map_is_named_by_its_content() -> None:
    a = objects.config_map(options(), {"B": "2", "A": "1"})
    assert a == objects.config_map(options(), {"A": "1", "B": "2"})
    assert list(a["data"]) == ["A", "B"]
    changed = objects.config_map(options(), {"A": "1", "B": "3"})
    assert changed["metadata"]["name"] != a["metadata"]["name"]
    assert a["metadata"]["name"].startswith("neuronserve-env-")


def test_the_job_is_named_by_its_pod() -> None:
    first = objects.job(options(), POD, 3600)
    assert first == objects.job(options(), POD, 3600)
    other = objects.job(options(), {"containers": [{"name": "c", "image": "j"}]}, 3600)
    assert first["metadata"]["name"] != other["metadata"]["name"]
    assert len(first["metadata"]["name"]) <= 63
    assert first["spec"]["activeDeadlineSeconds"] == 3600 and first["spec"]["backoffLimit"] == 1


def test_irsa_annotation_only_with_a_role() -> None:
    arn = "arn:aws:iam::123456789012:role/ns"
    assert objects.service_account(options(role_arn=arn))["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": arn
    }
    assert "annotations" not in objects.service_account(options())["metadata"]


def test_deployment_rollout_and_scrape() -> None:
    fixed = objects.deployment(options(replicas=3), POD, 3600, 8080, autoscaled=False)
    assert fixed["spec"]["replicas"] == 3
    assert fixed["spec"]["progressDeadlineSeconds"] > 3600
    assert fixed["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    annotations = fixed["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    assert "replicas" not in objects.deployment(options(), POD, 900, 8080, autoscaled=True)["spec"]
    selector = fixed["spec"]["selector"]["matchLabels"]
    assert selector.items() <= fixed["spec"]["template"]["metadata"]["labels"].items()
    assert objects.service(options(), 8080)["spec"]["selector"] == selector


def test_a_drain_takes_one_pod_at_a_time() -> None:
    assert objects.disruption_budget(options())["spec"]["maxUnavailable"] == 1
