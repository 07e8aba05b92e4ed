"""vLLM's older in-tree Neuron support (0.9/0.10, V0) and how the plan chooses between it and the plugin.

AWS's Neuron documentation describes both generations (vLLM 0.9/0.10's own Neuron device, and the
out-of-tree vllm-neuron plugin that replaced it); an image may ship either. The in-tree dialect is
`--device neuron --override-neuron-config` plus VLLM_NEURON_FRAMEWORK, and transformers-neuronx in it
keeps one KV block per sequence and reads its buckets from the environment.
"""

from __future__ import annotations

from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.resolution import Resolution
from neuronserve.types import Integration

IMAGE_VLLM = "0.11.0"  # the vLLM an unknown version is taken to be (the image's)


def choose_integration(
    settings: Settings, facts: HostFacts, res: Resolution
) -> tuple[Integration, str | None]:
    """vllm-neuron plugin or vLLM in-tree Neuron: an explicit setting, else what is installed.

    In-tree needs a vLLM that still has a Neuron device: 0.9/0.10. vLLM 0.11.0 has no `--device` flag
    at all (src/neuronserve/data/vllm-0.11.0-cli.json) and no in-tree Neuron platform (Neuron is an
    out-of-tree plugin from then on, vllm-neuron 0.2.2+lts platform.py:26-27 `PlatformEnum.OOT`), so an
    in-tree plan there (chosen by NEURONSERVE_INTEGRATION=in-tree, or by a transformers-neuronx /
    optimum-neuron VLLM_NEURON_FRAMEWORK) would start vLLM with a flag it rejects: refused, naming
    the setting that chose it. An unknown vLLM version is the image's 0.11.0.
    """
    framework = settings.framework.value if settings.framework else None
    if settings.integration is not None:
        integration = Integration(str(settings.integration.value))
    elif facts.versions.get("vllm-neuron"):
        integration = Integration.PLUGIN
    elif _older_vllm(facts.versions.get("vllm")) or framework in ("transformers-neuronx", "optimum-neuron"):
        integration = Integration.IN_TREE
    else:
        integration = Integration.PLUGIN
    if integration == Integration.PLUGIN and framework:
        res.warn(
            f"VLLM_NEURON_FRAMEWORK={framework} is read only by vLLM's in-tree Neuron support "
            f"(0.9/0.10); the vllm-neuron plugin ignores it (set NEURONSERVE_INTEGRATION=in-tree)"
        )
        framework = None
    if integration == Integration.IN_TREE:
        _check_in_tree(settings, facts.versions.get("vllm"))
        framework = framework or "neuronx-distributed-inference"
    return integration, framework


def _check_in_tree(settings: Settings, version: str | None) -> None:
    if _older_vllm(version or IMAGE_VLLM):
        return
    chose = (
        "NEURONSERVE_INTEGRATION=in-tree"
        if settings.integration is not None
        else f"VLLM_NEURON_FRAMEWORK={settings.framework.value if settings.framework else ''}"
    )
    installed = version or f"{IMAGE_VLLM} (not detected: the image's)"
    raise ConfigError(
        f"{chose} needs vLLM's in-tree Neuron device (vLLM 0.9/0.10), but the installed vLLM is "
        f"{installed}, which has no "
        "`--device neuron`: unset it and serve with the vllm-neuron plugin (the image's 0.2.2+lts), or "
        "use an image with vLLM 0.10",
        (chose.split("=", maxsplit=1)[0],),
    )


def _older_vllm(version: str | None) -> bool:
    try:
        major, minor = (int(x) for x in (version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < (0, 11)


def tnx_kv(
    settings: Settings, block: int | None, length: int, res: Resolution
) -> tuple[list[str], dict[str, Any]]:
    """transformers-neuronx keeps one block per sequence: block_size must equal max_model_len."""
    origins = res.origins
    if block is not None and block != length:
        var = origins["block-size"]
        raise ConfigError(
            f"{var}={block}: transformers-neuronx needs block_size == max_model_len: set {var}={length} "
            f"or unset it",
            (var, origins["max-model-len"]),
        )
    if settings.get("enable-prefix-caching") is True:
        var = origins["enable-prefix-caching"]
        raise ConfigError(f"{var}: transformers-neuronx has no prefix caching: unset {var}", (var,))
    return ["--no-enable-prefix-caching", "--block-size", str(length)], {
        "mode": "contiguous",
        "block_size": length,
    }


def tnx_env(settings: Settings, override: dict[str, Any]) -> dict[str, str]:
    """transformers-neuronx reads its buckets from the environment, not from the override."""
    env = {}
    for var, key in (
        ("NEURON_CONTEXT_LENGTH_BUCKETS", "context_encoding_buckets"),
        ("NEURON_TOKEN_GEN_BUCKETS", "token_generation_buckets"),
    ):
        if isinstance(override.get(key), list):
            env[var] = ",".join(str(b) for b in override[key])
        elif var in settings.passthrough_env:
            env[var] = settings.passthrough_env[var]
    return env
