"""The layout keeps its promises, read from the syntax tree of src/neuronserve:

- plan/ is pure: it imports no I/O module (processes, files by pattern, sockets, HTTP or AWS clients, the
  server, nor the packages that do the I/O: host, stage, engine, serve, deploy, commands) and makes no
  file or directory call;
- front/ is HTTP only: it imports nothing that stages models or reads the host, and does not run the
  server (uvicorn belongs to serve/).

Each checker is also fed a small bad source, so a checker that no longer finds anything fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "neuronserve"

# Modules whose import means I/O (a module and everything under it).
PLAN_FORBIDDEN_IMPORTS = (
    "subprocess",
    "glob",
    "shutil",
    "socket",
    "asyncio.subprocess",
    "http.client",
    "http.server",
    "urllib.request",
    "httpx",
    "aiohttp",
    "requests",
    "boto3",
    "botocore",
    "s3transfer",
    "uvicorn",
    "neuronserve.host",
    "neuronserve.stage",
    "neuronserve.engine",
    "neuronserve.serve",
    "neuronserve.deploy",
    "neuronserve.commands",
)
FRONT_FORBIDDEN_IMPORTS = ("neuronserve.stage", "neuronserve.host", "uvicorn")

# Calls that touch files or directories: builtins, `os.*` / `os.path.*` functions, and Path methods (matched
# by method name, whatever the receiver: plan/ has no other use for these names).
FILE_BUILTINS = frozenset({"open"})
OS_FILE_CALLS = frozenset(
    {
        "listdir",
        "scandir",
        "walk",
        "stat",
        "lstat",
        "open",
        "remove",
        "unlink",
        "rename",
        "replace",
        "mkdir",
        "makedirs",
        "rmdir",
        "readlink",
        "access",
        "exists",
        "isfile",
        "isdir",
        "islink",
        "getsize",
        "getmtime",
        "realpath",
        "system",
        "popen",
    }
)
PATH_FILE_METHODS = frozenset(
    {
        "read_text",
        "read_bytes",
        "write_text",
        "write_bytes",
        "open",
        "exists",
        "is_file",
        "is_dir",
        "iterdir",
        "glob",
        "rglob",
        "stat",
        "lstat",
        "mkdir",
        "unlink",
        "rmdir",
        "touch",
    }
)


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted module) for every import; `from a import b` counts as both `a` and `a.b`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def _under(module: str, prefixes: tuple[str, ...]) -> str | None:
    for prefix in prefixes:
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return None


def forbidden_imports(source: str, forbidden: tuple[str, ...]) -> list[str]:
    """One line per import of a forbidden module (or anything under it)."""
    problems = []
    for line, module in _imported(ast.parse(source)):
        if (prefix := _under(module, forbidden)) is not None:
            problems.append(f"line {line}: imports {module} ({prefix})")
    return sorted(set(problems))


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def file_calls(source: str) -> list[str]:
    """One line per call that reads or changes the filesystem."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in FILE_BUILTINS:
            problems.append(f"line {node.lineno}: {func.id}()")
        elif isinstance(func, ast.Attribute):
            dotted = _dotted(func)
            if dotted is not None and dotted.split(".")[0] == "os" and func.attr in OS_FILE_CALLS:
                problems.append(f"line {node.lineno}: {dotted}()")
            elif func.attr in PATH_FILE_METHODS:
                problems.append(f"line {node.lineno}: .{func.attr}()")
    return problems


def _modules(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(SRC.parent).as_posix()


@pytest.mark.parametrize("path", _modules("plan"), ids=_rel)
def test_plan_module_imports_no_io(path: Path) -> None:
    assert forbidden_imports(path.read_text(), PLAN_FORBIDDEN_IMPORTS) == []


@pytest.mark.parametrize("path", _modules("plan"), ids=_rel)
def test_plan_module_makes_no_file_call(path: Path) -> None:
    assert file_calls(path.read_text()) == []


@pytest.mark.parametrize("path", _modules("front"), ids=_rel)
def test_front_module_neither_stages_nor_reads_the_host_nor_runs_the_server(path: Path) -> None:
    assert forbidden_imports(path.read_text(), FRONT_FORBIDDEN_IMPORTS) == []


def test_the_packages_checked_exist() -> None:
    assert len(_modules("plan")) > 5
    assert len(_modules("front")) > 5


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import subprocess", ["line 1: imports subprocess (subprocess)"]),
        ("import os, glob", ["line 1: imports glob (glob)"]),
        ("from asyncio import subprocess", ["line 1: imports asyncio.subprocess (asyncio.subprocess)"]),
        ("import urllib.request", ["line 1: imports urllib.request (urllib.request)"]),
        (
            "from botocore.config import Config",
            [
                "line 1: imports botocore.config (botocore)",
                "line 1: imports botocore.config.Config (botocore)",
            ],
        ),
        (
            "from neuronserve.host import facts",
            [
                "line 1: imports neuronserve.host (neuronserve.host)",
                "line 1: imports neuronserve.host.facts (neuronserve.host)",
            ],
        ),
        ("def f():\n    import httpx", ["line 2: imports httpx (httpx)"]),
        ("from neuronserve import stage", ["line 1: imports neuronserve.stage (neuronserve.stage)"]),
        ("import json\nfrom neuronserve.plan import kv\nimport socketserver", []),
        ("from neuronserve.hosting import x", []),
    ],
)
def test_import_checker_catches_io_modules(source: str, expected: list[str]) -> None:
    assert forbidden_imports(source, PLAN_FORBIDDEN_IMPORTS) == sorted(expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import uvicorn", ["line 1: imports uvicorn (uvicorn)"]),
        (
            "from neuronserve.stage.paths import x",
            [
                "line 1: imports neuronserve.stage.paths (neuronserve.stage)",
                "line 1: imports neuronserve.stage.paths.x (neuronserve.stage)",
            ],
        ),
        ("import httpx\nfrom neuronserve.engine.pool import EnginePool", []),
    ],
)
def test_front_import_checker_catches_stage_host_and_server(source: str, expected: list[str]) -> None:
    assert forbidden_imports(source, FRONT_FORBIDDEN_IMPORTS) == sorted(expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("data = open('config.json').read()", ["line 1: open()"]),
        ("import os\nos.listdir('.')", ["line 2: os.listdir()"]),
        ("import os\nif os.path.exists(p):\n    pass", ["line 2: os.path.exists()"]),
        ("import os\nn = os.path.getsize(p)", ["line 2: os.path.getsize()"]),
        ("for _ in os.walk(root): pass", ["line 1: os.walk()"]),
        ("text = Path(p).read_text()", ["line 1: .read_text()"]),
        ("raw = model_dir.joinpath('x').read_bytes()", ["line 1: .read_bytes()"]),
        ("files = list(root.glob('*.safetensors'))", ["line 1: .glob()"]),
        ("ok = Path(p).is_file()", ["line 1: .is_file()"]),
        ("entries = [e for e in Path(p).iterdir()]", ["line 1: .iterdir()"]),
        ("with Path(p).open() as f: pass", ["line 1: .open()"]),
        ("size = Path(p).stat().st_size", ["line 1: .stat()"]),
        ("name = os.path.join(a, b)\nkey = Path(p).name\nx = json.loads(s)", []),
    ],
)
def test_file_call_checker_catches_file_and_directory_calls(source: str, expected: list[str]) -> None:
    assert file_calls(source) == expected
