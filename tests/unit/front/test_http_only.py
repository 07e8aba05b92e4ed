"""front/ is HTTP and protocols only: read from the syntax tree, no module of it imports the staging or
host-reading packages, nor uvicorn (neuronserve.serve runs the server and hands the front its facts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FRONT = Path(__file__).resolve().parents[3] / "src" / "neuronserve" / "front"
REFUSED = ("neuronserve.stage", "neuronserve.host", "uvicorn")


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{alias.name}" for alias in node.names}
    return out


@pytest.mark.parametrize("path", sorted(FRONT.glob("*.py")), ids=lambda p: p.name)
def test_no_front_module_imports_staging_host_reading_or_the_server(path: Path) -> None:
    bad = sorted(m for m in _imports(path) if any(m == r or m.startswith(r + ".") for r in REFUSED))
    assert not bad, f"{path.name} imports {bad}"


def test_the_check_sees_every_front_module() -> None:
    assert {"app.py", "gate.py", "dialect.py", "routes.py"} <= {p.name for p in FRONT.glob("*.py")}
