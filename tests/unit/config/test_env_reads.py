"""Every environment variable is read through its row: no module outside config/ and cli.py reads one.

config/ turns the environment into typed values (each variable through its `Var` row: its parser, its
default, its ConfigError naming it), and cli.py reads the process environment once and hands the mapping
down as `environ`, the name every layer gives it. Anywhere else, `environ["X"]`, `environ.get("X")`,
`"X" in environ`, `os.environ...` or `os.getenv("X")` is a second reading of X that skips its row: a
bare `int()` there is how `NEURONSERVE_S3_CONCURRENCY=-3` was silently clamped and a typo failed after
the front was up. Read from the syntax tree, not by regex. Passing the whole mapping on (to a child
process, to config/: `env=dict(environ)`, `parse_stage(environ)`, `environ.items()`) is not a read.

The check keys on the name `environ` (any name or attribute ending in it, `os.environ` included), so a
copy under another name escapes it: keep the name when handing the mapping down.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src" / "neuronserve"
# Where reading the environment is the job: the settings, and the CLI's one read of os.environ.
READERS = ("config/", "cli.py")
READ_METHODS = frozenset({"get", "pop"})  # setdefault builds a mapping to hand on; it reads nothing back


def _is_environ(node: ast.expr) -> bool:
    """`environ`, `os.environ`, `self.environ`, `opts._environ`: the environment mapping by its name."""
    if isinstance(node, ast.Name):
        return node.id.endswith("environ")
    return isinstance(node, ast.Attribute) and node.attr.endswith("environ")


def _is_getenv(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "getenv") or (
        isinstance(func, ast.Attribute) and func.attr == "getenv"
    )


def _variable(node: ast.expr | None) -> str:
    """The variable a read names: its literal name, else the expression in angle brackets."""
    if node is None:
        return "<>"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return f"<{ast.unparse(node)}>"


def env_reads(source: str) -> list[tuple[int, str]]:
    """(line, variable) for every read of one variable of the environment in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            found.append((node.lineno, _variable(node.slice)))
        elif isinstance(node, ast.Call):
            func = node.func
            method = isinstance(func, ast.Attribute) and func.attr in READ_METHODS and _is_environ(func.value)
            if _is_getenv(func) or method:
                found.append((node.lineno, _variable(node.args[0] if node.args else None)))
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn) and _is_environ(right):
                    found.append((node.lineno, _variable(node.left)))
    return sorted(found)


def _reads_outside_config() -> dict[tuple[str, str], list[int]]:
    """{(module, variable): lines} for every module that is not a reader."""
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        if module.startswith(READERS):
            continue
        for line, variable in env_reads(path.read_text()):
            out.setdefault((module, variable), []).append(line)
    return out


def test_no_module_outside_config_and_the_cli_reads_a_variable() -> None:
    reads = _reads_outside_config()
    unexpected = [f"{m}:{lines[0]}: reads {v}" for (m, v), lines in reads.items()]
    assert unexpected == [], "read these through their rows (config/), e.g. VARS[name].read(environ)"


def test_the_readers_exist() -> None:
    assert (SRC / "config" / "table.py").is_file() and (SRC / "cli.py").is_file()
    assert len(list(SRC.rglob("*.py"))) > 50


BAD = """
import os
from os import environ, getenv
a = os.environ["A_SUB"]
b = os.environ.get("B_GET", "1")
c = os.getenv("C_GETENV")
d = getenv("D_BARE")
e = environ.get("E_ENVIRON")
f = self.environ["F_ATTR"]
g = "G_IN" in environ
h = "H_NOT_IN" not in opts.environ
i = int(environ.pop("I_POP"))
j = environ[name]
"""


def test_the_checker_finds_every_kind_of_read() -> None:
    assert env_reads(BAD) == [
        (4, "A_SUB"),
        (5, "B_GET"),
        (6, "C_GETENV"),
        (7, "D_BARE"),
        (8, "E_ENVIRON"),
        (9, "F_ATTR"),
        (10, "G_IN"),
        (11, "H_NOT_IN"),
        (12, "I_POP"),
        (13, "<name>"),
    ]


@pytest.mark.parametrize(
    "source",
    [
        "subprocess.run(argv, env=dict(environ))",
        "subprocess.run(argv, env={**os.environ, 'X': '1'})",
        "child = {k: v for k, v in environ.items() if k.startswith('AWS_')}",
        "options = parse_stage(environ)",
        "value = VARS['NEURONSERVE_S3_ENGINE'].read(environ)",
        "for name in sorted(environ): pass",
        "env = {}\nenv['PATH'] = '/bin'\nenv.setdefault('HOME', '/root')",
        "environ.setdefault('NEURONSERVE_INSTANCE_TYPE', 'inf2.xlarge')",
        "plan.env.get('NEURON_RT_VISIBLE_CORES')",
        "os.environ['X'] = '1'",
    ],
)
def test_handing_the_whole_mapping_on_or_building_one_is_not_a_read(source: str) -> None:
    assert env_reads(source) == []
