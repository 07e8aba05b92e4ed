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


def render() -> str:
    lines = [
        "Precedence, highest first (the same setting from two sources with different values is an error",
        "naming both variables; the model is taken from the first source that has one):",
        "",
        *[f"{i}. {p}" for i, p in enumerate(PRECEDENCE, 1)],
        "",
        "Model source order: arguments after `--` (`--model`), `SM_VLLM_MODEL`, a non-empty `/opt/ml/model`",
        "(`SM_MODEL_DIR`), `HF_MODEL_ID`, `OPTION_MODEL_ID`. Unknown `OPTION_*` keys produce a warning.",
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
