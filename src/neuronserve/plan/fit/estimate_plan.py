"""The speed estimate of a Neuron plan: its compiled graph and the `plan` workload, read into
plan/fit/estimate.py's inputs. Pure.

A plan gets an estimate when its HBM fit was estimated (a known instance and a local config.json); the
workload comes from `plan --input-len/--output-len/--concurrency` (estimate.Workload's defaults otherwise).
A workload longer than max_model_len is refused, naming the flag: the server would refuse those requests.
The models are the HBM check's (plan/fit/check.py): the target, and its draft when it has a local
config.json or is an EAGLE head (then the head its target implies, plan/fit/eagle.py).
"""

from __future__ import annotations

from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.fit import estimate, memory
from neuronserve.plan.fit.instances import InstanceFacts
from neuronserve.plan.lanes.nxdi.support import cpu_sampling
from neuronserve.plan.resolution import Resolution
from neuronserve.types import Integration


def compiled_of(graph: dict[str, Any], dp: int, res: Resolution) -> estimate.Compiled:
    """The estimate's view of a plan's graph (plan/lanes/*/engine.py `_graph`)."""
    override = graph.get("override") or {}
    text = override.get("text_neuron_config")
    source = text if isinstance(text, dict) else override
    given = source.get("context_encoding_buckets")
    buckets: tuple[int, ...] | None = (
        tuple(int(b) for b in given) if isinstance(given, list) and given else None
    )
    if graph.get("chunked_prefill") and graph.get("max_num_batched_tokens"):
        buckets = (int(graph["max_num_batched_tokens"]),)
    spec = (res.speculation.config or {}).get("num_speculative_tokens")
    return estimate.Compiled(
        tp=int(graph["tp"]),
        dp=dp,
        max_model_len=int(graph["max_model_len"]),
        max_num_seqs=int(graph["max_num_seqs"]),
        cpu_sampling=cpu_sampling(override),
        context_buckets=buckets,
        speculative_tokens=int(spec) if isinstance(spec, int) and spec > 0 else 0,
        nxdi_speculation=graph.get("integration") == Integration.PLUGIN,
    )


def check_workload(workload: estimate.Workload, max_model_len: int, c: estimate.Compiled) -> None:
    """A workload the server would refuse, or an acceptance length the plan cannot yield, is refused."""
    accept = workload.acceptance_length
    if accept is not None and not c.speculative_tokens:
        raise ConfigError(
            f"--acceptance-length {accept:g}: the plan has no speculative decoding "
            "(SM_VLLM_SPECULATIVE_CONFIG); drop the flag or configure a draft",
            ("--acceptance-length",),
        )
    if accept is not None and accept > 1 + c.drafts_verified:
        lane = "NxD Inference's fused speculation verifies" if c.nxdi_speculation else "a step verifies"
        raise ConfigError(
            f"--acceptance-length {accept:g} exceeds what a step can yield: {lane} "
            f"{c.drafts_verified} draft token(s) of num_speculative_tokens {c.speculative_tokens}, "
            f"so at most {1 + c.drafts_verified} tokens a step",
            ("--acceptance-length",),
        )
    given_in, given_out = workload.input_len or 0, workload.output_len or 0
    if given_in + given_out > max_model_len:
        raise ConfigError(
            f"--input-len {given_in} + --output-len {given_out} exceeds max_model_len {max_model_len}: "
            "the server would refuse such requests; shorten them or raise SM_VLLM_MAX_MODEL_LEN",
            ("--input-len", "--output-len"),
        )


def plan_estimate(
    models: list[memory.Model],
    instance: InstanceFacts,
    graph: dict[str, Any],
    *,
    dp: int,
    res: Resolution,
    workload: estimate.Workload | None,
) -> estimate.SpeedEstimate | None:
    """The estimate of the plan's configuration (DP replicas of the graph) at the workload; None for a
    chip the model has no constants for (no measurement to fit them on)."""
    if not estimate.covers(instance):
        return None
    load = workload or estimate.Workload()
    compiled = compiled_of(graph, dp, res)
    check_workload(load, int(graph["max_model_len"]), compiled)
    return estimate.estimate(models, instance, compiled, load)
