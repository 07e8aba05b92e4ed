"""The pod template both workloads share, and their containers: `serve`, the `stage` initContainer and
`compile` (the image's entrypoint runs `neuronserve <command>`: entrypoint/serve).

Placement (the Neuron device plugin and scheduler pages, deploy/k8s/resources.py): Neuron nodes carry
the taint `aws.amazon.com/neuron:NoSchedule`, tolerated with `operator: Exists` whatever value the node
group gave it; `node.kubernetes.io/instance-type` (a well-known label the kubelet sets:
https://kubernetes.io/docs/reference/labels-annotations-taints/#nodekubernetesioinstance-type) pins the
instance the plan was checked for; `schedulerName` names the Neuron scheduler extension when the pod
asks for more than one unit.

Volumes: `work` (an emptyDir on the node's disk) at the plan's work directory, shared by the `stage`
initContainer and the server, so the weights and compiled graphs it stages are complete copies the
server finds (manifests present) and starts from without a download; `dshm`, a memory-backed emptyDir
on /dev/shm, which vLLM's workers need larger than the container runtime's 64 MiB default.

The initContainer asks for the same Neuron units as the server: its plan (and so the compile cache key
it stages by) must see the devices the server will see. A pod's effective request is the larger of its
initContainers' and the sum of its containers', not their total, so the pod still asks for the server's
units (https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers).
The Kubernetes API token is not mounted: neuronserve never calls the API, and IRSA mounts its own token.
"""

from __future__ import annotations

from typing import Any

from neuronserve.deploy.k8s.options import K8sOptions, SecretRef
from neuronserve.deploy.k8s.resources import PodSize

NEURON_TAINT = "aws.amazon.com/neuron"
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
REQUIRE_HIT = "NEURONSERVE_REQUIRE_CACHE_HIT"


def env(require_hit: bool, refs: dict[str, SecretRef]) -> list[dict[str, Any]]:
    """The container's own variables over the ConfigMap: the cache-hit rule of this workload, then each
    secret by reference (`secretKeyRef`)."""
    entries: list[dict[str, Any]] = [{"name": REQUIRE_HIT, "value": "true" if require_hit else "false"}]
    for name, ref in sorted(refs.items()):
        entries.append({"name": name, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}})
    return entries


def resources(size: PodSize, neuron: bool = True) -> dict[str, Any]:
    """Requests and limits: Neuron units (an extended resource: limit = request), CPU asked, memory
    asked and capped alike."""
    memory = f"{size.memory_mib}Mi"
    requests: dict[str, Any] = {"cpu": f"{size.cpu_millis}m", "memory": memory}
    limits: dict[str, Any] = {"memory": memory}
    if neuron:
        requests.update(size.neuron())
        limits.update(size.neuron())
    return {"requests": requests, "limits": limits}


def mounts(work_dir: str, shm: bool) -> list[dict[str, Any]]:
    out = [{"name": "work", "mountPath": work_dir}]
    if shm:
        out.append({"name": "dshm", "mountPath": "/dev/shm"})
    return out


def container(
    name: str,
    opts: K8sOptions,
    command: str,
    *,
    config_map: str,
    size: PodSize,
    work_dir: str,
    require_hit: bool,
    shm: bool = True,
) -> dict[str, Any]:
    """One container of the image running `neuronserve <command>` with the settings of the ConfigMap."""
    return {
        "name": name,
        "image": opts.image,
        "args": [command],
        "envFrom": [{"configMapRef": {"name": config_map}}],
        "env": env(require_hit, opts.secret_refs),
        "resources": resources(size),
        "volumeMounts": mounts(work_dir, shm),
    }


def pod_spec(
    opts: K8sOptions,
    instance: str,
    size: PodSize,
    containers: list[dict[str, Any]],
    *,
    init: list[dict[str, Any]] | None = None,
    restart: str = "Always",
    grace_s: int | None = None,
) -> dict[str, Any]:
    """The pod spec: placement on the instance, the volumes, the containers."""
    spec: dict[str, Any] = {
        "serviceAccountName": opts.name,
        "automountServiceAccountToken": False,
        "restartPolicy": restart,
    }
    if size.needs_scheduler:
        spec["schedulerName"] = opts.scheduler_name
    spec["nodeSelector"] = {INSTANCE_LABEL: instance}
    spec["tolerations"] = [{"key": NEURON_TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    if grace_s is not None:
        spec["terminationGracePeriodSeconds"] = grace_s
    if init:
        spec["initContainers"] = init
    spec["containers"] = containers
    spec["volumes"] = [
        {"name": "work", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{size.shm_mib}Mi"}},
    ]
    return spec
