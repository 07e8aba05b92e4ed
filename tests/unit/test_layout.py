"""The layout keeps its promises, read from the syntax tree of src/neuronserve (tests/support/layout.py
holds the checkers; nothing is imported or run):

- plan/ is pure: it imports no I/O module (processes, files by pattern, sockets, HTTP or AWS clients, the
  server, nor the packages that do the I/O: host, stage, engine, serve, deploy, commands) and makes no
  file or directory call;
- front/ is HTTP only: it imports nothing that stages models or reads the host, and does not run the
  server (uvicorn belongs to serve/);
- tests mirror the code: every module with logic (it defines a function or method: tables, field-only
  classes and re-exports hold none) has `tests/<tier>/<package path>/test_<module>.py` in some tier
  (unit, integration, s3, static, image; the tier is what the test needs), deploy/ in its own tier
  tests/deploy/ (its own venv: scripts/deploy-venv) as `tests/deploy/test_<module>.py`; a package's
  `__init__.py` is exempt;
- no import cycle, between modules or between packages (a top-level module such as types.py is a
  package of its own): imports inside functions count, `if TYPE_CHECKING:` imports do not (never run).

Each checker is also fed a small bad source, so a checker that no longer finds anything fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.layout import (
    cycles,
    file_calls,
    forbidden_imports,
    has_logic,
    import_graph,
    mirrors,
    package_graph,
    unmirrored,
)

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "neuronserve"
TIERS = ("unit", "integration", "s3", "static", "image")
OWN_TIERS = {"deploy": "deploy"}  # a package tested in a tier of its own, named like it


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


def _sources() -> dict[str, str]:
    return {p.relative_to(SRC).as_posix(): p.read_text() for p in sorted(SRC.rglob("*.py"))}


def _graph() -> dict[str, set[str]]:
    modules = {}
    for rel, source in _sources().items():
        parts = ["neuronserve", *rel.removesuffix(".py").split("/")]
        package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if package else parts)] = (source, package)
    return import_graph(modules, "neuronserve")


def _missing_tests() -> dict[str, str]:
    tests = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")}
    return unmirrored(_sources(), tests, TIERS, OWN_TIERS)


def test_every_module_with_logic_has_its_test_file() -> None:
    assert _missing_tests() == {}


def test_no_import_cycle_between_modules_or_packages() -> None:
    graph = _graph()
    assert {"neuronserve.front.proxy", "neuronserve.types"} <= set(graph)
    assert "neuronserve.front.errors" in graph["neuronserve.front.proxy"]
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == []


@pytest.mark.parametrize(
    ("source", "logic"),
    [
        ("def f():\n    return 1", True),
        ("class A:\n    async def run(self):\n        pass", True),
        ("if True:\n    def f(): pass", True),
        ('"""Only data."""\nROWS = (1, 2)\nPARSE = lambda raw: raw.strip()', False),
        ("from dataclasses import dataclass\n@dataclass\nclass Spec:\n    name: str = ''", False),
        ('class Boom(Exception):\n    """why"""', False),
        ("from a import b\n__all__ = ['b']", False),
    ],
)
def test_logic_is_a_function_or_a_method(source: str, logic: bool) -> None:
    assert has_logic(source) is logic


def test_mirror_paths() -> None:
    assert mirrors("front/proxy.py", ("unit", "s3"), {}) == {
        "tests/unit/front/test_proxy.py",
        "tests/s3/front/test_proxy.py",
    }
    assert mirrors("cli.py", ("unit",), {}) == {"tests/unit/test_cli.py"}
    assert mirrors("deploy/spec.py", ("unit",), OWN_TIERS) == {
        "tests/unit/deploy/test_spec.py",
        "tests/deploy/test_spec.py",
    }
    assert "tests/deploy/lanes/test_x.py" in mirrors("deploy/lanes/x.py", (), OWN_TIERS)


def test_the_mirror_checker_finds_a_missing_test() -> None:
    modules = {
        "front/proxy.py": "def send(): pass",
        "front/routes.py": "TABLE = ()",  # no logic: needs no test
        "front/gate.py": "class Gate:\n    def __call__(self): pass",
        "front/__init__.py": "from neuronserve.front.gate import Gate",
        "stage/__init__.py": "def stage_all(): pass",  # the package itself: exempt
        "cli.py": "def main(): pass",
        "deploy/spec.py": "def validate(): pass",
    }
    tests = {"tests/unit/front/test_proxy.py", "tests/integration/test_cli.py", "tests/deploy/test_spec.py"}
    problems = unmirrored(modules, tests, TIERS, OWN_TIERS)
    assert list(problems) == ["front/gate.py"]
    assert "tests/unit/front/test_gate.py" in problems["front/gate.py"]
    assert unmirrored(modules, tests | {"tests/s3/front/test_gate.py"}, TIERS, OWN_TIERS) == {}
    assert list(unmirrored(modules, tests - {"tests/deploy/test_spec.py"}, TIERS, OWN_TIERS)) == [
        "deploy/spec.py",
        "front/gate.py",
    ]


def _bad_tree() -> dict[str, tuple[str, bool]]:
    return {
        "pkg": ("", True),
        "pkg.types": ("from pkg.config.table import defaults", False),
        "pkg.config": ("", True),
        "pkg.config.table": ("from .values import parse\nDEFAULTS = {}", False),
        "pkg.config.values": ("def parse():\n    from pkg.config import settings", False),
        "pkg.config.settings": (
            "from typing import TYPE_CHECKING\nfrom pkg import types\nfrom . import table\n"
            "if TYPE_CHECKING:\n    from pkg.front import app",
            False,
        ),
        "pkg.front": ("", True),
        "pkg.front.app": ("import pkg.config.settings\nimport json", False),
    }


def test_the_import_graph_reads_every_kind_of_import() -> None:
    graph = import_graph(_bad_tree(), "pkg")
    assert graph["pkg.config.table"] == {"pkg.config.values"}  # relative
    assert graph["pkg.config.values"] == {"pkg.config.settings"}  # inside a function
    assert graph["pkg.config.settings"] == {"pkg.types", "pkg.config.table"}  # TYPE_CHECKING left out
    assert graph["pkg.front.app"] == {"pkg.config.settings"}  # `import a.b.c`; json is not ours


def test_the_cycle_checker_finds_module_and_package_cycles() -> None:
    graph = import_graph(_bad_tree(), "pkg")
    assert cycles(graph) == [
        ("pkg.config.settings", "pkg.config.table", "pkg.config.values", "pkg.types"),
    ]
    assert cycles(package_graph(graph)) == [("config", "types")]
    graph["pkg.config.values"] = set()
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [("config", "types")]  # settings -> types -> table, still
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
