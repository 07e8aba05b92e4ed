"""Fit the speed estimate's constants, and measure its error against every published source (not a test).

    PYTHONPATH=src python bench/fit_estimate.py fit     # fit the constants on the calibration rows
    PYTHONPATH=src python bench/fit_estimate.py table   # docs/FIT.md's error tables, constants as in the code
    PYTHONPATH=src python bench/fit_estimate.py rows    # every row: estimate vs measurement
    PYTHONPATH=src python bench/fit_estimate.py compare # refit each variant of the layer cost, compare

Calibration rows (bench/data/estimate/calibration.csv) are optimum-neuron's guidellm runs of vLLM on Neuron,
huggingface/optimum-neuron benchmark/vllm/ at commit 213224e6 (each row names its file; instance and TP
read from the .env, docker-compose and READMEs there). Held-out rows (bench/data/estimate/heldout.csv) are
every other published measurement found: aws-neuron/aws-neuron-sdk at commit 81ce03ae (NxD Inference and
vllm-neuron tutorials, and the Neuron docs' transformers-neuronx decoder tables), and optimum-neuron's
results outside the calibration: vLLM on inf2 in its pull request #1097 (head 1fbd4210, not in 213224e6) and
its TGI runs on inf2 (148350c0, 591ac13a, 6ba3db94; removed in 445e9235); the fit never sees them.
Model shapes: bench/data/estimate/models.json (each config.json's source named).

The fit: per NeuronCore generation, the three constants of plan/fit/estimate.py (layer_s, row_s,
prefill_mfu), plus the shared CPU-sampling host rate, minimise the sum of squared log errors
over that generation's calibration rows, each constant against the quantity it governs (the decode
constants and host rate: TPOT; the prefill efficiency: TTFT); throughput is only checked (coordinate
descent in log space from a fixed start; stdlib only).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neuronserve.plan.fit import eagle, estimate, instances, memory

DATA = Path(__file__).resolve().parent / "data" / "estimate"
QUANTITIES = ("tpot_ms", "ttft_ms", "instance_tps")
# Our stack's family (the goal is stated on it): NxD Inference / vllm-neuron, and vLLM on
# optimum-neuron's image (the calibration's serving path); a held-out row names its family.
OUR_STACK = ("nxdi-vllm", "vllm-neuron (optimum)")


@dataclass(frozen=True)
class Row:
    fields: dict[str, str]
    models: list[memory.Model]
    instance: instances.InstanceFacts
    compiled: estimate.Compiled
    workload: estimate.Workload

    def measured(self, key: str) -> float | None:
        text = self.fields.get(key, "")
        return float(text) if text else None

    def predicted(self) -> dict[str, float]:
        est = estimate.estimate(self.models, self.instance, self.compiled, self.workload)
        # transformers-neuronx's tables time a batch's first token after the whole batch is encoded
        batch = (self.workload.concurrency or 1) if self.fields.get("ttft_of_batch") == "1" else 1
        return {
            "tpot_ms": est.tpot_ms,
            "ttft_ms": est.ttft_ms * batch,
            "instance_tps": est.instance_output_tokens_per_s,
        }

    def inconsistent(self) -> float | None:
        """A one-user row whose throughput disagrees with its own TTFT and TPOT by over 1.25x: the
        measured over what those two give (output_len / (ttft + output_len x tpot) x DP), else None.
        Such a row's throughput measures something else (a wall clock with client gaps, say): no
        consistent model can match it, so it is listed and left out of the throughput statistics."""
        ttft, tpot, tps = (self.measured(q) for q in ("ttft_ms", "tpot_ms", "instance_tps"))
        if self.workload.concurrency != 1 or not (ttft and tpot and tps):
            return None
        out = self.workload.output_len or 1
        own = out / ((ttft + out * tpot) / 1000) * self.compiled.dp
        return tps / own if max(tps / own, own / tps) > 1.25 else None

    @property
    def label(self) -> str:
        f = self.fields
        return f"{f['model']} {f['instance']} TP{f['tp']}x{f['dp']} bs{f['max_num_seqs']} {f['row']}"


def ours(row: Row) -> bool:
    """A row of our stack's family (OUR_STACK)."""
    return row.fields.get("family") in OUR_STACK


def _models() -> dict[str, memory.ModelShape]:
    doc = json.loads((DATA / "models.json").read_text())
    return {name: memory.model_shape(entry["config"]) for name, entry in doc.items()}


def load(name: str) -> list[Row]:
    shapes = _models()
    rows = []
    with open(DATA / name, newline="") as f:
        for r in csv.DictReader(f):
            quantized = r.get("quantized") == "1"
            precision = memory.Precision(2, 1 if quantized else 2)
            models = [memory.Model(shapes[r["model"]], precision)]
            if r.get("draft") in shapes:
                models.append(memory.Model(shapes[r["draft"]], precision))
            elif eagle.is_eagle(r.get("draft") or ""):  # "eagle3 head": the head its target implies
                models.append(eagle.head(models[0], r["draft"].split()[0]))
            chunk = int(r.get("chunk") or 0)
            rows.append(
                Row(
                    fields=r,
                    models=models,
                    instance=instances.instance_facts(r["instance"]),
                    compiled=estimate.Compiled(
                        tp=int(r["tp"]),
                        dp=int(r["dp"]),
                        max_model_len=int(r["max_model_len"]),
                        max_num_seqs=int(r["max_num_seqs"]),
                        cpu_sampling=r.get("cpu_sampling") == "1",
                        context_buckets=(chunk,) if chunk else None,
                        speculative_tokens=int(r.get("spec_tokens") or 0),
                        nxdi_speculation=r.get("nxdi_speculation") == "1",
                    ),
                    workload=estimate.Workload(
                        int(r["input_len"]),
                        int(r["output_len"]),
                        int(r["concurrency"]),
                        float(r["acceptance_length"]) if r.get("acceptance_length") else None,
                    ),
                )
            )
    return rows


def errors(rows: list[Row]) -> list[tuple[Row, str, float, float]]:
    """(row, quantity, estimate, measurement) for every measured quantity."""
    out = []
    for row in rows:
        pred = row.predicted()
        for q in QUANTITIES:
            meas = row.measured(q)
            if meas and not (q == "instance_tps" and row.inconsistent()):
                out.append((row, q, pred[q], meas))
    return out


def loss(rows: list[Row], quantities: tuple[str, ...] = QUANTITIES) -> float:
    return sum(math.log(p / m) ** 2 for _, q, p, m in errors(rows) if q in quantities)


# Each constant is fitted to the quantity it governs: the decode constants (and the CPU-sampling host rate)
# to TPOT, the prefill efficiency to TTFT; throughput, which mixes both, is only checked.
# Physical bounds: a layer's latency between a microsecond and 10 ms, a row's below a millisecond; a
# prefill reaches at most the peak.
BOUNDS = {
    "layer_s": (1e-6, 1e-2),
    "row_s": (1e-8, 1e-3),
    "prefill_mfu": (1e-3, 1.0),
    "host": (1e7, 1e11),
}
START = (1e-4, 1e-6, 0.2)  # layer_s, row_s, prefill_mfu
GOVERNS = {
    "layer_s": ("tpot_ms",),
    "row_s": ("tpot_ms",),
    "prefill_mfu": ("ttft_ms",),
    "host": ("tpot_ms",),
}


def _set(gen: str, k: estimate.Constants, host: float) -> None:
    estimate.CONSTANTS[gen] = k
    estimate.HOST_LOGITS_BYTES_PER_S = host


def fit(rows: list[Row]) -> tuple[dict[str, estimate.Constants], float]:
    """Coordinate descent in log space over each generation's constants and the shared host rate."""
    by_gen: dict[str, list[Row]] = {}
    for row in rows:
        if row.fields.get("fit", "1") == "1":
            by_gen.setdefault(estimate.generation(row.instance).name, []).append(row)
    host = 1e9  # a fixed start (START too): the fit does not depend on the constants in the code
    fitted = {gen: estimate.Constants(*START) for gen in by_gen}
    for _ in range(3):  # the host rate is shared: alternate
        for gen, gen_rows in sorted(by_gen.items()):
            k = fitted[gen]
            params = [k.layer_s, k.row_s, k.prefill_mfu, host]
            names = ["layer_s", "row_s", "prefill_mfu", "host"]
            step = 1.0
            while step > 1e-3:
                improved = False
                for i in range(len(params)):
                    if names[i] == "host" and not any(r.compiled.cpu_sampling for r in gen_rows):
                        continue
                    for sign in (1, -1):
                        trial = list(params)
                        trial[i] = params[i] * math.exp(sign * step)
                        low, high = BOUNDS[names[i]]
                        if not low <= trial[i] <= high:
                            continue
                        _set(gen, estimate.Constants(*trial[:3]), trial[3])
                        new = loss(gen_rows, GOVERNS[names[i]])
                        _set(gen, estimate.Constants(*params[:3]), params[3])
                        if new < loss(gen_rows, GOVERNS[names[i]]) - 1e-12:
                            params, improved = trial, True
                            _set(gen, estimate.Constants(*params[:3]), params[3])
                if not improved:
                    step /= 2
            fitted[gen] = estimate.Constants(*params[:3])
            host = params[3]
            _set(gen, fitted[gen], host)
    return fitted, host


def ratio(p: float, m: float) -> float:
    """The error factor: max(est / meas, meas / est), 1 = exact."""
    return max(p / m, m / p)


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        for pos, i in enumerate(order):
            r[i] = float(pos)
        return r

    rx, ry = ranks(xs), ranks(ys)
    return statistics.correlation(rx, ry) if len(xs) > 2 else float("nan")


def p80(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(0.8 * len(s)) - 1)]


def table(rows: list[Row], title: str) -> list[str]:
    """Per source: median and 80th-percentile error factor per quantity, signed bias, rank correlation
    (ten rows or more), and the worst rows."""
    lines = [
        f"### {title}",
        "",
        "| source | family | rows | TPOT median / p80 | TTFT median / p80 | throughput median / p80 | "
        "rank corr. TPOT / TTFT / thr. | pairs ordered right TPOT / TTFT / thr. | "
        "configuration pairs ordered right TPOT / TTFT / thr. |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sources: dict[str, list[Row]] = {}
    for row in rows:
        unfitted = " Llama 4 (not fitted: shared expert and interleaved MoE layers not modeled)"
        sources.setdefault(
            row.fields["source"] + (unfitted if row.fields.get("fit") == "0" else ""), []
        ).append(row)
    worst: list[str] = []
    misordered: list[str] = []
    inconsistent: list[str] = []
    for source, srows in sources.items():
        errs = errors(srows)
        cells = []
        corr = []
        order = []
        configs = []
        for q in QUANTITIES:
            e = [(p, m) for _, qq, p, m in errs if qq == q]
            order.append(ordered_pairs(errs, q)[0])
            counted, wrong = ordered_pairs(errs, q, workload_key)
            configs.append(counted)
            misordered += [f"- {source}, {q}: {a} against {b}" for a, b in wrong]
            if not e:
                cells.append("-")
                corr.append("-")
                continue
            rs = [ratio(p, m) for p, m in e]
            bias = statistics.median(p / m for p, m in e)
            cells.append(f"{statistics.median(rs):.2f}x / {p80(rs):.2f}x (est/meas {bias:.2f})")
            corr.append(f"{spearman([p for p, _ in e], [m for _, m in e]):.2f}" if len(e) >= 10 else "-")
        family = ", ".join(sorted({r.fields.get("family") or "vllm-neuron (optimum)" for r in srows}))
        lines.append(
            f"| {source} | {family} | {len(srows)} | "
            + " | ".join(cells)
            + " | "
            + " / ".join(corr)
            + " | "
            + " / ".join(order)
            + " | "
            + " / ".join(configs)
            + " |"
        )
        inconsistent.extend(
            f"- {source}: {r.label}: throughput {r.measured('instance_tps')} is {f:.2f}x what its own "
            "TTFT and TPOT give"
            for r in srows
            if (f := r.inconsistent())
        )
        for row, q, p, m in sorted(errs, key=lambda t: -ratio(t[2], t[3]))[:3]:
            worst.append(
                f"- {source}: {row.label}: {q} estimate {p:.1f} vs measured {m:.1f} ({ratio(p, m):.2f}x)"
            )
    return [
        *lines,
        "",
        "Worst rows:",
        "",
        *worst,
        "",
        "Configuration pairs ordered wrong:",
        "",
        *(misordered or ["- none"]),
        "",
        "Self-inconsistent rows (throughput left out of the statistics above):",
        "",
        *(inconsistent or ["- none"]),
        "",
    ]


def workload_key(row: Row) -> tuple[str, str, int, int, bool]:
    """What `--recommend` chooses between: configurations of one model serving one workload (the same
    source, prompt and output lengths within 10 %, and one user or a full batch)."""
    w = row.workload

    def rounded(n: int | None) -> int:
        return round(math.log(n or 1) / math.log(1.1))

    return (row.fields["source"], row.fields["model"], rounded(w.input_len), rounded(w.output_len),
            w.concurrency == 1)  # fmt: skip


def ordered_pairs(
    errs: list[tuple[Row, str, float, float]], q: str, same: Callable[[Row], object] | None = None
) -> tuple[str, list[tuple[str, str]]]:
    """Of the pairs of rows whose measurements of q differ by over 10 % (and, given `same`, whose keys
    are equal: configuration pairs, workload_key), "right/total" that the estimate orders the same way,
    and the labels of the pairs it orders wrong (or calls equal)."""
    rows = [(r, p, m) for r, qq, p, m in errs if qq == q]
    wrong, total = [], 0
    for i, (r1, p1, m1) in enumerate(rows):
        for r2, p2, m2 in rows[i + 1 :]:
            if (same and same(r1) != same(r2)) or max(m1, m2) / min(m1, m2) < 1.1:
                continue
            total += 1
            if (p1 - p2) * (m1 - m2) <= 0:
                wrong.append((r1.label, r2.label))
    return (f"{total - len(wrong)}/{total}" if total else "-"), wrong


def band(rows: list[Row]) -> dict[str, list[float]]:
    """The measured/estimate ratio's 10th and 90th percentiles per quantity: the 80 % band the plan prints."""
    out = {}
    for q, key in (("tpot_ms", "tpot_ms"), ("ttft_ms", "ttft_ms"), ("instance_tps", "output_tokens_per_s")):
        r = sorted(m / p for _, qq, p, m in errors(rows) if qq == q)
        lo = r[max(0, math.ceil(0.1 * len(r)) - 1)]
        hi = r[min(len(r) - 1, math.ceil(0.9 * len(r)) - 1)]
        out[key] = [round(lo, 2), round(hi, 2)]
    return out


def family_summary(rows: list[Row], label: str) -> str:
    """Median and 80th-percentile error factor per quantity over all the rows given."""
    errs = errors(rows)
    parts = []
    for q in QUANTITIES:
        rs = [ratio(p, m) for _, qq, p, m in errs if qq == q]
        if rs:
            parts.append(f"{q} median {statistics.median(rs):.2f}x, p80 {p80(rs):.2f}x ({len(rs)})")
    return f"{label}: " + "; ".join(parts)


# `compare`: what an MoE prefill pays for its experts, how a layer's latency grows with TP, and what an MoE
# row costs, against the estimate's choices (the first of each). Each variant is refitted on the
# calibration rows alone.
def _chips(instance: instances.InstanceFacts, tp: int) -> int:
    return int(
        max(1, math.ceil(tp * instance.logical_nc_config / estimate.generation(instance).physical_cores))
    )


GROWTHS = {
    "none": estimate.collective_growth,
    "log2(2 TP)": lambda instance, tp: math.log2(2 * tp),
    "1 + log2(chips)": lambda instance, tp: 1 + math.log2(_chips(instance, tp)),
}


def _moe_prefill_bytes(
    model: memory.Model, instance: instances.InstanceFacts, c: estimate.Compiled, tokens: int
) -> float:
    """The first version's MoE prefill: each routed expert's weight shard read once per token and expert."""
    shape = model.shape
    if not (shape.experts and shape.experts_per_token):
        return 0.0
    layout = memory.weight_layout(shape, c.tp)
    one_expert = layout.expert_linear * model.precision.linear_bytes / (shape.experts * shape.layers)
    return tokens * shape.experts_per_token * shape.layers * one_expert / instance.hbm_bytes_per_s_per_core


MOE_PREFILLS = {
    "row_s per routed expert pass": estimate.moe_prefill_s,
    "expert bytes per token": _moe_prefill_bytes,
}
ROW_UNITS = {
    "(2 + 2 top_k) / 4": estimate.row_units,
    "1": lambda shape: 1.0,
    "top_k": lambda shape: float(shape.experts_per_token or 1),
}


def compare(calibration: list[Row], heldout: list[Row]) -> list[str]:
    """Each variant refitted on the calibration rows alone: its calibration loss and its held-out medians."""
    fitted_rows = [r for r in calibration if r.fields.get("fit") == "1"]
    family = [r for r in heldout if ours(r)]
    tnx = [r for r in heldout if r.fields.get("family") == "transformers-neuronx"]
    tgi = [r for r in heldout if r.fields.get("family") == "tgi-neuron (optimum)"]

    def medians(rows: list[Row]) -> str:
        return " / ".join(
            f"{statistics.median(ratio(p, m) for _, qq, p, m in errors(rows) if qq == q):.2f}x"
            for q in QUANTITIES
        )

    lines = [
        "| MoE prefill | layer latency growth with TP | MoE row units | calibration loss TPOT / TTFT / all | "
        "held-out NxDI/vllm-neuron TPOT / TTFT / thr. median | transformers-neuronx TPOT / TTFT / thr. | "
        "TGI (optimum) TPOT / TTFT / thr. |",
        "|---|---|---|---|---|---|---|",
    ]
    saved = estimate.moe_prefill_s, estimate.collective_growth, estimate.row_units, dict(estimate.CONSTANTS)
    host = estimate.HOST_LOGITS_BYTES_PER_S
    for d, dispatch in MOE_PREFILLS.items():
        for g, growth in GROWTHS.items():
            for u, units in ROW_UNITS.items():
                estimate.moe_prefill_s, estimate.collective_growth, estimate.row_units = (
                    dispatch,
                    growth,
                    units,
                )
                fit(calibration)
                losses = " / ".join(
                    f"{loss(fitted_rows, qs):.2f}" for qs in (("tpot_ms",), ("ttft_ms",), QUANTITIES)
                )
                lines.append(
                    f"| {d} | {g} | {u} | {losses} | {medians(family)} | {medians(tnx)} | {medians(tgi)} |"
                )
                estimate.moe_prefill_s, estimate.collective_growth, estimate.row_units = saved[:3]
                estimate.CONSTANTS.clear()
                estimate.CONSTANTS.update(saved[3])
                estimate.HOST_LOGITS_BYTES_PER_S = host
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("fit", "table", "rows", "compare"))
    args = parser.parse_args(argv)
    calibration = load("calibration.csv")
    heldout = load("heldout.csv")
    if args.command == "fit":
        fitted, host = fit(calibration)
        for gen, k in sorted(fitted.items()):
            print(
                f'    "{gen}": Constants(layer_s={k.layer_s:.4e}, row_s={k.row_s:.4e}, '
                f"prefill_mfu={k.prefill_mfu:.4g}),"
            )
        print(f"HOST_LOGITS_BYTES_PER_S = {host:.4g}")
        print(f"calibration loss {loss([r for r in calibration if r.fields.get('fit') == '1']):.3f}")
        family = [r for r in heldout if ours(r)]
        print(f"ERROR_BAND = {band([r for r in calibration if r.fields.get('fit') == '1'] + family)}")
        return 0
    if args.command == "compare":
        print("\n".join(compare(calibration, heldout)))
        return 0
    if args.command == "rows":
        for name, rows in (("calibration", calibration), ("held-out", heldout)):
            for row, q, p, m in errors(rows):
                print(f"{name:11} {row.label:70} {q:12} est {p:9.1f} meas {m:9.1f} {p / m:5.2f}")
        return 0
    print("\n".join(table(calibration, "Calibration (fitted on; optimum-neuron benchmark/vllm @213224e6)")))
    print("\n".join(table(heldout, "Held out (never fitted on)")))
    family = [r for r in heldout if ours(r)]
    print("Our stack's family (NxD Inference / vLLM Neuron), held out:")
    print("  " + family_summary(family, "all"))
    for fam in OUR_STACK:
        print("  " + family_summary([r for r in family if r.fields.get("family") == fam], fam))
    for gen in ("NeuronCore-v2", "NeuronCore-v3"):
        on_gen = [r for r in family if estimate.generation(r.instance).name == gen]
        print("  " + family_summary(on_gen, gen))
    print("Calibration rows:")
    print("  " + family_summary(calibration, "vllm-neuron (optimum)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
