"""Every import in src/ is satisfied by what pyproject.toml declares (tests/support/declared.py).

The base install serves, plans and stages; `deploy/` may also use the `deploy` extra's distributions,
models_local.py the `cpu` extra's (it converts the CPU demo model with torch and transformers). An
import is matched to its distribution by importlib.metadata.packages_distributions() of this venv, and
for what this venv lacks (the deploy extra lives in its own venv: scripts/deploy-venv) by NOT_HERE.
"""

from __future__ import annotations

from importlib.metadata import packages_distributions
from pathlib import Path

from tests.support.declared import declared, imported_top_levels, requirement_name, undeclared

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
SRC = ROOT / "src"
# Import name -> distribution, for distributions this venv does not hold.
NOT_HERE = {"sagemaker": ["sagemaker-core"]}
# Source paths (under src/neuronserve) that may use an extra's distributions.
EXTRA_OF = {"neuronserve/deploy/": "deploy", "neuronserve/models_local.py": "cpu"}


def _extra(rel: str) -> tuple[str, ...]:
    return tuple(extra for prefix, extra in EXTRA_OF.items() if rel.startswith(prefix))


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text() for p in sorted((SRC / "neuronserve").rglob("*.py"))}


def _providers() -> dict[str, list[str]]:
    return {**NOT_HERE, **packages_distributions()}


def test_every_import_in_src_is_declared() -> None:
    files = _sources()
    allowed = {rel: declared(PYPROJECT, _extra(rel)) for rel in files}
    assert undeclared(files, allowed, _providers()) == []


def test_the_checker_reads_every_kind_of_import() -> None:
    source = (
        "from __future__ import annotations\n"
        "import os, yarl.quoting\n"
        "from typing import TYPE_CHECKING\n"
        "from neuronserve.errors import ConfigError\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n"
        "    from mypy_boto3_s3 import S3Client\n"
        "else:\n"
        "    import s3transfer\n"
        "def f():\n"
        "    import httptools\n"
        "    try:\n"
        "        import uvloop\n"
        "    except ImportError:\n"
        "        pass\n"
    )
    assert imported_top_levels(source) == {"yarl": 2, "s3transfer": 9, "httptools": 11, "uvloop": 13}


def test_the_checker_finds_an_undeclared_and_an_unknown_import() -> None:
    """httptools, as serve/connections.py imported it before it was declared; a name nobody provides."""
    files = {"neuronserve/serve/connections.py": "import httptools\nimport fastapi\nimport nosuchthing\n"}
    allowed = {"neuronserve/serve/connections.py": frozenset({"fastapi", "uvicorn"})}
    providers = {"httptools": ["httptools"], "fastapi": ["fastapi"]}
    assert undeclared(files, allowed, providers) == [
        "neuronserve/serve/connections.py:1: imports httptools (from httptools), not declared in "
        "pyproject.toml for this module",
        "neuronserve/serve/connections.py:3: imports nosuchthing, which no known distribution provides",
    ]


def test_an_extra_is_allowed_only_where_it_is_named() -> None:
    base, deploy = declared(PYPROJECT), declared(PYPROJECT, ("deploy",))
    assert "sagemaker-core" in deploy and "sagemaker-core" not in base
    files = {
        "neuronserve/front/app.py": "import sagemaker\n",
        "neuronserve/deploy/spec.py": "import sagemaker\n",
    }
    allowed = {rel: declared(PYPROJECT, _extra(rel)) for rel in files}
    assert undeclared(files, allowed, NOT_HERE) == [
        "neuronserve/front/app.py:1: imports sagemaker (from sagemaker-core), not declared in "
        "pyproject.toml for this module"
    ]


def test_requirement_names_are_read_past_versions_and_markers() -> None:
    assert requirement_name("uvloop>=0.19; sys_platform != 'win32'") == "uvloop"
    assert requirement_name("moto[server]==5.2.5") == "moto"
    assert requirement_name("huggingface_hub>=0.30") == "huggingface-hub"
