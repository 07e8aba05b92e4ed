"""The settings table is the single source: every variable the code reads has a row, and the rows'
typed defaults and plan-decided defaults agree with the code that applies them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from neuronserve.config import table
from neuronserve.config.doc import shown_default

SRC = Path(__file__).resolve().parents[3] / "src" / "neuronserve"

# Mappings an environment read goes through: os.environ, the `environ` handed down from the CLI, an
# engine or user `env` (`plan.env`, `settings.passthrough_env`, `user_env`).
ENV_NAMES = ("environ", "env")
# The table's own lookups: a string given to them is a variable name too.
TABLE_HELPERS = frozenset({"VARS"})
# Variables of other programs, read on their behalf: the AWS SDK and s5cmd, the shell and XDG.
OTHER_PROGRAMS = frozenset({"HOME", "PATH", "XDG_CACHE_HOME"})
OTHER_PREFIXES = ("AWS_",)


def _is_env(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith(ENV_NAMES)


def _is(node: ast.expr, names: frozenset[str]) -> bool:
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute) and node.attr in names
    )


def _text(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _read_name(node: ast.AST) -> str | None:
    """The variable name one node reads, if it is an environment read with a literal name."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return _text(node.slice) if _is_env(node.value) or _is(node.value, TABLE_HELPERS) else None
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and _is_env(func.value):
            return _text(node.args[0])
        if _is(func, TABLE_HELPERS | {"getenv"}):
            return _text(node.args[0])
    if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
        return _text(node.left) if _is_env(node.comparators[0]) else None
    return None


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, less the bodies of mutation testing's altered copies of a function (mutmut compiles
    each mutant into the tree as `<name>__mutmut_<n>` beside `<name>__mutmut_orig`; only the latter is
    the code, and a mutant's `environ.get("")` is no variable read)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef) and re.search(r"__mutmut_\d+$", node.name):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def env_reads(source: str) -> set[str]:
    """Every environment variable name `source` reads with a literal name (syntax tree, not regex)."""
    return {name for node in _nodes(ast.parse(source)) if (name := _read_name(node)) is not None}


def _ours(name: str) -> bool:
    return name not in OTHER_PROGRAMS and not name.startswith(OTHER_PREFIXES)


def test_the_walker_finds_every_kind_of_read() -> None:
    sample = """
import os
from os import getenv
a = os.environ["A_SUB"]
b = os.environ.get("B_GET", "x")
c = os.getenv("C_GETENV")
d = getenv("D_BARE")
e = environ.get("E_ENVIRON")
f = self.environ["F_ATTR"]
g = "G_IN" in environ
h = "H_NOT_IN" not in user_env
i = spec.env.get("I_SPEC")
j = VARS["J_TABLE"].default

env["WRITTEN"] = "1"
other.get("NOT_ENV")
environ.get(name)
def get__mutmut_orig(environ):
    return environ.get("L_ORIGINAL")
def get__mutmut_1(environ):
    return environ.get("")
"""
    assert env_reads(sample) == {
        "A_SUB",
        "B_GET",
        "C_GETENV",
        "D_BARE",
        "E_ENVIRON",
        "F_ATTR",
        "G_IN",
        "H_NOT_IN",
        "I_SPEC",
        "J_TABLE",
        "L_ORIGINAL",
    }


def test_a_read_missing_from_the_table_is_caught() -> None:
    names = env_reads('import os\nos.environ.get("NEURONSERVE_NOT_A_ROW")\n')
    assert [n for n in names if _ours(n) and n not in table.VARS] == ["NEURONSERVE_NOT_A_ROW"]


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    read = {n: f.relative_to(SRC) for f in sorted(SRC.rglob("*.py")) for n in env_reads(f.read_text())}
    assert {"NEURON_RT_VISIBLE_CORES", "NEURONSERVE_S3_ENGINE", "NEURON_SDK_VERSION"} <= set(read)
    missing = {n: str(f) for n, f in read.items() if _ours(n) and n not in table.VARS}
    assert missing == {}


def test_table_defaults_match_the_code() -> None:
    from neuronserve.plan.fit.memory import DEFAULT_OVERHEAD_BYTES, GIB
    from neuronserve.plan.lanes.nxdi.kv import DEFAULT_BLOCK_SIZE
    from neuronserve.plan.lanes.nxdi.launch import DEFAULT_DTYPE, DEFAULT_MAX_NUM_SEQS

    shown = {v.name: shown_default(v) for v in table.VARS.values()}
    assert shown["SM_VLLM_MAX_NUM_SEQS"].startswith(f"{DEFAULT_MAX_NUM_SEQS} ")
    assert shown["SM_VLLM_BLOCK_SIZE"].startswith(f"{DEFAULT_BLOCK_SIZE} ")
    assert shown["SM_VLLM_DTYPE"].startswith(f"{DEFAULT_DTYPE} ")
    assert shown["NEURONSERVE_HBM_OVERHEAD_GIB"] == f"{DEFAULT_OVERHEAD_BYTES / GIB:g}"


def test_every_field_names_an_attribute_of_its_group() -> None:
    from dataclasses import fields

    from neuronserve.config.fit import FitOptions
    from neuronserve.config.settings import Settings

    assert set(table.rows_of("fit")) == {f.name for f in fields(FitOptions)}
    assert set(table.rows_of("settings")) <= {f.name for f in fields(Settings)}
    assert FitOptions() == FitOptions(**table.defaults("fit"))
    groups = {v.field.split(".")[0] for v in table.VARS.values() if v.field}
    assert groups == {"serve", "fit", "settings", "dialect", "engine_env"}
