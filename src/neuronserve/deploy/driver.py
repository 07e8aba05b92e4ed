"""The Neuron driver note each deploy path prints, with its verdict: go ahead, or upgrade what first.

The driver is the host's (`aws-neuronx-dkms`, a kernel module), the runtime is the image's
(`aws-neuronx-runtime-lib`). The runtime checks the driver when it starts (`nrt_init`) and refuses one
it cannot work with in one log line ("This runtime requires Neuron Driver version ... Please upgrade":
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/faq.html), so a mismatch
never serves wrong answers: it fails the start. What the user can do depends on who owns the host:

- SageMaker owns it. `al2-ami-sagemaker-inference-neuron-2`, the only Neuron value of
  `ProductionVariant.InferenceAmiVersion`, documents driver 2.19 (botocore's sagemaker service model);
  the image's runtime (Neuron SDK 2.27.1) was released with driver 2.25.4.0. There is nothing to
  upgrade first and no newer Neuron AMI to pick: go ahead, and read the first start's log line.
- On ECS and EKS the user owns the node: the driver the runtime was released with, or a newer one,
  belongs on it before the first task or pod.
"""

from __future__ import annotations

from neuronserve.deploy.validate import Target

# The image's runtime (aws-neuronx-runtime-lib 2.29.40.0, Neuron SDK 2.27.1) was released with this driver
# (Neuron 2.27.1 release content: aws-neuronx-dkms 2.25.4.0): docs/DEPLOY.md, "Neuron driver".
IMAGE_RUNTIME_DRIVER = "2.25.4.0"
# ProductionVariant.InferenceAmiVersion's one Neuron value and the driver botocore's model documents for it.
NEURON_AMI = "al2-ami-sagemaker-inference-neuron-2"
NEURON_AMI_DRIVER = "2.19"
_REFUSED = "`nrt_init` ... `Neuron Driver`"


def note(target: Target) -> str:
    """One line: the driver facts for `target`, then the verdict."""
    if target == "sagemaker":
        return (
            f"Neuron driver: SageMaker's {NEURON_AMI} has driver {NEURON_AMI_DRIVER}, older than the "
            f"{IMAGE_RUNTIME_DRIVER} the image's runtime was released with. Verdict: go ahead, there is "
            "nothing to upgrade on your side (SageMaker owns the host and offers no newer Neuron AMI). If "
            f"the first start fails with {_REFUSED} in /aws/sagemaker/Endpoints/NAME, the runtime refused "
            "that driver: run the image on ECS or EKS with a current driver (docs/DEPLOY.md, 'Neuron driver')"
        )
    where = "container instance" if target == "ecs" else "node"
    return (
        f"Neuron driver: the image's runtime was released with aws-neuronx-dkms {IMAGE_RUNTIME_DRIVER}. "
        f"Verdict: fine on a {where} with driver {IMAGE_RUNTIME_DRIVER} or newer; upgrade aws-neuronx-dkms "
        f"first where `modinfo -F version neuron` prints an older one (docs/DEPLOY.md, 'Neuron driver')"
    )
