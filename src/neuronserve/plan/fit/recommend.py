"""`plan --recommend`: the configurations of a model that `plan` accepts on an instance, each with the
plan's own speed estimate, filtered and ranked by a goal. Pure.

Candidates: every valid TP degree (instances.valid_tp_degrees), DP = cores // TP replicas, each
max_model_len candidate (`lengths`), batches (max_num_seqs) in powers of two up to 256. Each candidate's
`SM_VLLM_*` settings are planned by `plan` itself (the `Planner` the command passes in: the user's
settings with the candidate's on top, the same build_plan `neuronserve plan` runs), so every check the
plan makes (the model against the lane's NxD Inference registry, the instance against the lane, TP
degrees, core counts, the HBM fit, the workload against max_model_len) is made once, in one place. A
(TP, length) keeps the largest batch the plan accepts with the headroom it asks for: no refusal and
no HBM warning (plan/fit/check.py warns above memory.WARN_UTILIZATION). The memory and the `estimate`
each configuration carries are the plan's (plan --json's `memory` and `estimate`, plan/fit/estimate.py).

What the plan refuses for every candidate, `--recommend` refuses too, with the plan's own error (exit
2): `refusal` picks it. Configurations dropped (refused, over the headroom, or missing a
--max-tpot-ms / --max-ttft-ms target) are counted by reason in the document.

Ranking (`--rank`): by default the length first. Ranked by throughput alone, the best configuration for
Llama-3.1-8B was max_model_len 1024 on every instance (the shortest length holds the most sequences),
a length nobody asked for. So the length wanted comes first: the user's (`--max-model-len`,
SM_VLLM_MAX_MODEL_LEN and the names that feed it), else the model's own max_position_embeddings; then
the nearest longer lengths (they serve it too), then the longest shorter ones (when the wanted length
fits nowhere: the model's own, capped by memory); each length's configurations by the goal.
`--rank goal` (or its old name `throughput`) orders by the goal alone. Goals (`--goal`): throughput =
the estimate's instance_output_tokens_per_s, highest first; latency = its tpot_ms, lowest first; cost =
dollars per million output tokens at the instance's hourly price (plan/fit/prices.py, or
--price-per-hour), lowest first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.fit import instances, memory
from neuronserve.plan.fit.instances import GIB, InstanceFacts
from neuronserve.types import LaunchPlan

SEQS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MIN_LEN = 1024
RANKS = ("length", "goal", "throughput")  # throughput: the old name of `goal`
GOALS = ("throughput", "latency", "cost")
MODEL_LENGTH = "config.json max_position_embeddings"
DEFAULT_LENGTH = 8192  # when config.json names no max_position_embeddings
HBM_VARIABLE = "NEURONSERVE_FIT_CHECK"  # named by every HBM refusal of plan/fit/check.py
HEADROOM = (
    f"HBM above {memory.WARN_UTILIZATION:.0%} at every batch (plan warns there: the load may run out of "
    "device memory)"
)

Planner = Callable[[Mapping[str, str]], LaunchPlan]  # the plan of the user's settings + these; ConfigError


@dataclass(frozen=True)
class Wanted:
    """The max_model_len ranked first and where it came from (a variable, a flag, or config.json)."""

    tokens: int
    source: str


@dataclass(frozen=True)
class Goal:
    """What ranks the configurations, and the filters; `usd_per_hour` prices the instance (None: unknown)."""

    name: str = "throughput"
    max_tpot_ms: float | None = None
    max_ttft_ms: float | None = None
    usd_per_hour: float | None = None


@dataclass(frozen=True)
class Configuration:
    tp: int
    dp: int
    max_model_len: int
    max_num_seqs: int
    env: dict[str, str]
    memory: dict[str, Any]  # the plan's `memory`
    estimate: dict[str, Any]  # the plan's `estimate`
    usd_per_hour: float | None = None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        per_s = float(self.estimate["instance_output_tokens_per_s"])
        if self.usd_per_hour is None or per_s <= 0:
            return None
        return self.usd_per_hour / (per_s * 3600) * 1e6

    def as_json(self) -> dict[str, Any]:
        cost = self.usd_per_million_output_tokens
        return {
            "tensor_parallel_size": self.tp,
            "data_parallel_size": self.dp,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "memory": self.memory,
            "estimate": self.estimate,
            "usd_per_million_output_tokens": None if cost is None else round(cost, 4),
            "env": self.env,
        }


@dataclass
class Dropped:
    """Candidates left out, counted by reason (the plan's refusal message, the headroom, a filter)."""

    reasons: Counter[str] = field(default_factory=Counter)
    refusals: dict[str, ConfigError] = field(default_factory=dict)  # the plan's errors, by message

    def add(self, reason: str, error: ConfigError | None = None) -> None:
        self.reasons[reason] += 1
        if error is not None:
            self.refusals.setdefault(reason, error)

    def as_json(self) -> list[dict[str, Any]]:
        return [{"count": n, "reason": r} for r, n in self.reasons.most_common()]


def candidate_env(tp: int, dp: int, length: int, seqs: int, *, dtype: str, lnc: str | None) -> dict[str, str]:
    """The settings of one candidate, as pasted: NEURON_LOGICAL_NC_CONFIG when the user set it (the
    cores TP counts depend on it: without it, TP 16 x DP 8 of LNC 1 is 128 cores on a 64-core trn2)."""
    env = {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": str(tp),
        "SM_VLLM_DATA_PARALLEL_SIZE": str(dp),
        "SM_VLLM_MAX_MODEL_LEN": str(length),
        "SM_VLLM_MAX_NUM_SEQS": str(seqs),
        "SM_VLLM_DTYPE": dtype,
        "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
    }
    return {**env, "NEURON_LOGICAL_NC_CONFIG": lnc} if lnc else env


def lengths(shape: memory.ModelShape, pinned: int | None, wanted: int | None = None) -> list[int]:
    """Powers of two from 1024 to max_position_embeddings (and that limit itself, and a wanted length)."""
    if pinned:
        return [pinned]
    top = shape.max_position_embeddings or DEFAULT_LENGTH
    out = [n for n in (2**k for k in range(10, 21)) if MIN_LEN <= n <= top]
    out += [top] if top not in out and top >= MIN_LEN else []
    return sorted({*out, wanted}) if wanted else out


def wanted_length(shape: memory.ModelShape, given: Wanted | None, pinned: int | None = None) -> Wanted:
    """The user's length when given (a pinned --max-model-len is one), else the model's own."""
    if given is None and pinned:
        given = Wanted(pinned, "--max-model-len")
    return given or Wanted(shape.max_position_embeddings or DEFAULT_LENGTH, MODEL_LENGTH)


def goal_key(goal: str) -> Callable[[Configuration], tuple[float, float, int]]:
    """The sort key of a goal, best first, read from each configuration's own estimate (ties: the other
    speed figure, then the smaller TP)."""

    def key(c: Configuration) -> tuple[float, float, int]:
        est = c.estimate
        tokens, tpot = float(est["instance_output_tokens_per_s"]), float(est["tpot_ms"])
        if goal == "latency":
            return (tpot, -tokens, c.tp)
        if goal == "cost":
            cost = c.usd_per_million_output_tokens
            return (float("inf") if cost is None else cost, tpot, c.tp)
        return (-tokens, tpot, c.tp)

    return key


def ranked(configs: list[Configuration], rank: str, wanted: int, goal: str) -> list[Configuration]:
    """`configs` best first: by the goal, or by length then the goal (see the module docstring)."""
    by_goal = goal_key(goal)

    def by_length(c: Configuration) -> tuple[int, int, tuple[float, float, int]]:
        n = c.max_model_len
        group, order = (0, 0) if n == wanted else (1, n) if n > wanted else (2, -n)
        return (group, order, by_goal(c))

    return sorted(configs, key=by_length if rank == "length" else by_goal)


def _outcome(plan_of: Planner, env: dict[str, str]) -> tuple[LaunchPlan | None, ConfigError | None, bool]:
    """(the plan, its refusal, whether the HBM is the reason: a refusal of the fit check or a load above
    the utilization it warns at)."""
    try:
        plan = plan_of(env)
    except ConfigError as err:
        return None, err, HBM_VARIABLE in err.variables
    used = (plan.memory or {}).get("utilization", 0.0)
    return plan, None, float(used) > memory.WARN_UTILIZATION


def planned(
    plan_of: Planner,
    instance: InstanceFacts,
    *,
    length_choices: list[int],
    seqs_choices: tuple[int, ...],
    dtype: str,
    lnc: str | None,
    dropped: Dropped,
) -> list[Configuration]:
    """Each (TP, length) with the largest batch the plan accepts without an HBM warning. Batches go up
    until the plan says no (the HBM only grows with the batch)."""
    out: list[Configuration] = []
    for tp in instances.valid_tp_degrees(instance):
        dp = instance.cores // tp
        for length in length_choices:
            best: Configuration | None = None
            for seqs in seqs_choices:
                env = candidate_env(tp, dp, length, seqs, dtype=dtype, lnc=lnc)
                plan, refused, hbm = _outcome(plan_of, env)
                if plan is None or hbm or not plan.estimate or not plan.memory:
                    if best is None:
                        reason = HEADROOM if hbm else str(refused) if refused else "the plan has no estimate"
                        dropped.add(reason, None if hbm else refused)
                    break
                best = Configuration(tp, dp, length, seqs, env, plan.memory, plan.estimate)
            if best is not None:
                out.append(best)
    return out


def filtered(configs: list[Configuration], goal: Goal, dropped: Dropped) -> list[Configuration]:
    """Those that meet --max-tpot-ms and --max-ttft-ms (by their estimate), the rest counted."""
    kept = []
    for c in configs:
        tpot, ttft = float(c.estimate["tpot_ms"]), float(c.estimate["ttft_ms"])
        if goal.max_tpot_ms is not None and tpot > goal.max_tpot_ms:
            dropped.add(f"estimated tpot_ms above --max-tpot-ms {goal.max_tpot_ms:g}")
        elif goal.max_ttft_ms is not None and ttft > goal.max_ttft_ms:
            dropped.add(f"estimated ttft_ms above --max-ttft-ms {goal.max_ttft_ms:g}")
        else:
            kept.append(c)
    return kept


def refusal(dropped: Dropped) -> ConfigError | None:
    """The plan's own error when it refused candidates for something other than the HBM: the most
    frequent one (a model, instance or lane refusal is the same for every candidate)."""
    errors = [r for r, _ in dropped.reasons.most_common() if r in dropped.refusals]
    return dropped.refusals[errors[0]] if errors else None


def fits_somewhere(
    model: memory.Model, instance: InstanceFacts, overhead: int, length: int, seqs: int
) -> bool:
    """Whether some valid TP holds `seqs` sequences of `length` tokens (the HBM estimate alone)."""
    return any(
        memory.estimate([model], tp, seqs * length, instance.hbm_bytes_per_core, overhead).fits
        for tp in instances.valid_tp_degrees(instance)
    )


def why_none(
    model: memory.Model,
    instance: InstanceFacts,
    overhead: int,
    max_model_len: int | None,
    max_num_seqs: int | None = None,
) -> str:
    """A reason naming the numbers, and the instance types where the model does fit (at the pinned
    --max-num-seqs when there is one: else an instance that fits one sequence would be named as a place
    where the pinned batch fits)."""
    tp = instance.cores
    length = max_model_len or MIN_LEN
    seqs = max_num_seqs or 1
    est = memory.estimate([model], tp, seqs * length, instance.hbm_bytes_per_core, overhead)
    fits_on = [
        name
        for name in instances.INSTANCES
        if fits_somewhere(model, instances.instance_facts(name), overhead, length, seqs)
    ]
    where = ", ".join(fits_on) if fits_on else "no Neuron instance in the table"
    batch = (
        f"one sequence of {length} tokens needs" if seqs == 1 else f"{seqs} sequences of {length} tokens need"
    )
    return (
        f"nothing fits {instance.name}: even at TP {tp} (all {instance.cores} NeuronCores), {batch} "
        f"{est.describe()}. It fits on: {where}. "
        f"(Overhead assumed {overhead / GIB:g} GiB per core: NEURONSERVE_HBM_OVERHEAD_GIB, docs/FIT.md)"
    )


@dataclass(frozen=True)
class Request:
    """What `--recommend` was asked: the model, the instance, and the user's pins, goal and filters."""

    name: str
    model: memory.Model
    instance: InstanceFacts
    overhead: int
    dtype: str
    lnc: str | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    rank: str = "length"
    wanted: Wanted | None = None
    goal: Goal = field(default_factory=Goal)


def document(request: Request, plan_of: Planner) -> dict[str, Any]:
    """The `plan --recommend --json` shape; "ranking" says by what and which length came first, a
    "note" when that length fits in no configuration, "dropped" what was left out and why. Raises the
    plan's own ConfigError when the plan refused candidates and accepted none."""
    r = request
    want = wanted_length(r.model.shape, r.wanted, r.max_model_len)
    dropped = Dropped()
    seqs_choices = (r.max_num_seqs,) if r.max_num_seqs else SEQS
    length_choices = lengths(r.model.shape, r.max_model_len, want.tokens)
    configs = planned(
        plan_of,
        r.instance,
        length_choices=length_choices,
        seqs_choices=seqs_choices,
        dtype=r.dtype,
        lnc=r.lnc,
        dropped=dropped,
    )
    if not configs and (error := refusal(dropped)) is not None:
        raise error
    priced = [replace(c, usd_per_hour=r.goal.usd_per_hour) for c in configs]
    kept = ranked(filtered(priced, r.goal, dropped), r.rank, want.tokens, r.goal.name)
    doc: dict[str, Any] = {
        "instance": r.instance.as_json(),
        "model": {
            "name": r.name,
            **r.model.shape.as_json(),
            "parameters": r.model.checkpoint_params or memory.hf_parameter_count(r.model.shape),
            "dtype": r.dtype,
        },
        "ranking": {
            "by": "length" if r.rank == "length" else "goal",
            "goal": r.goal.name,
            "max_model_len": want.tokens,
            "max_model_len_from": want.source,
        },
        "configurations": [c.as_json() for c in kept],
        "dropped": dropped.as_json(),
    }
    if not configs:
        doc["why_none"] = why_none(r.model, r.instance, r.overhead, r.max_model_len, r.max_num_seqs)
    elif not kept:
        doc["why_none"] = "every configuration that fits misses the --max-tpot-ms / --max-ttft-ms target"
    elif r.rank == "length" and kept[0].max_model_len != want.tokens:
        doc["note"] = (
            f"max_model_len {want.tokens} ({want.source}) fits in no configuration on {r.instance.name}: "
            f"the longest that does, {kept[0].max_model_len}, comes first"
        )
    return doc
