"""The pod template (deploy/k8s/pod.py): placement, volumes shared by the stage initContainer and the
server, resources with limits equal to requests for the Neuron units and memory."""

from __future__ import annotations

from k8s_support import options

from neuronserve.deploy.k8s import pod
from neuronserve.deploy.k8s.options import SecretRef
from neuronserve.deploy.k8s.resources import size_pod


def test_container_and_pod() -> None:
    size = size_pod("inf2.48xlarge", 4, 1, "neuroncore")
    opts = options("inf2.48xlarge", secret_refs={"HF_TOKEN": SecretRef("hf", "token")})
    where = {"config_map": "cm", "size": size, "work_dir": "/work"}
    stage = pod.container("stage", opts, "stage", **where, require_hit=True, shm=False)  # type: ignore[arg-type]
    serve = pod.container("neuronserve", opts, "serve", **where, require_hit=True)  # type: ignore[arg-type]
    assert stage["args"] == ["stage"] and serve["envFrom"] == [{"configMapRef": {"name": "cm"}}]
    assert stage["env"] == [
        {"name": "NEURONSERVE_REQUIRE_CACHE_HIT", "value": "true"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
    ]
    assert [m["mountPath"] for m in stage["volumeMounts"]] == ["/work"]
    assert [m["mountPath"] for m in serve["volumeMounts"]] == ["/work", "/dev/shm"]
    limits, requests = serve["resources"]["limits"], serve["resources"]["requests"]
    assert limits["aws.amazon.com/neuroncore"] == requests["aws.amazon.com/neuroncore"] == 4
    assert limits["memory"] == requests["memory"] and "cpu" not in limits  # no CPU throttling
    spec = pod.pod_spec(opts, "inf2.48xlarge", size, [serve], init=[stage], grace_s=60)
    assert spec["schedulerName"] == "my-scheduler" and spec["automountServiceAccountToken"] is False
    assert spec["volumes"][1] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4096Mi"}}
    single = pod.pod_spec(opts, "inf2.48xlarge", size_pod("inf2.48xlarge", 1, 1, "neuroncore"), [serve])
    assert "schedulerName" not in single and "initContainers" not in single
