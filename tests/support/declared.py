"""Which distributions pyproject.toml declares, and which third-party modules a source file imports, read
from the syntax tree (nothing is imported). tests/unit/test_dependencies.py holds src/ to the declared
list; tests/packaging installs that list into an empty venv.

Why: `pip install .` gave a `neuronserve serve` that died with `ModuleNotFoundError: httptools`:
serve/connections.py imported it, and only vLLM's own dependencies had put it in the dev venv.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

# The project's own top-level package and the modules Python ships (never a distribution to declare).
OWN = "neuronserve"


def canonical(name: str) -> str:
    """A distribution name as PyPI compares them (PEP 503): `huggingface_hub` == `huggingface-hub`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """`httptools>=0.6; sys_platform != 'win32'` -> `httptools` (the name, before any version or marker)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return canonical(match.group(1))


def declared(pyproject: Path, extras: Iterable[str] = ()) -> frozenset[str]:
    """The canonical names of the base dependencies plus those of `extras`."""
    project = tomllib.loads(pyproject.read_text())["project"]
    reqs = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        reqs += optional[extra]
    return frozenset(requirement_name(r) for r in reqs)


def _type_checking_block(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): imports only the type checker runs."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_top_levels(source: str) -> dict[str, int]:
    """{top-level module: first line} of every absolute import that runs (module level or inside a
    function; not under `if TYPE_CHECKING:`), less the standard library and this project."""
    found: dict[str, int] = {}
    stack: list[ast.AST] = [ast.parse(source)]
    while stack:
        node = stack.pop()
        if _type_checking_block(node):
            assert isinstance(node, ast.If)
            stack.extend(node.orelse)
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top != OWN and top not in sys.stdlib_module_names:
                found[top] = min(found.get(top, node.lineno), node.lineno)
        stack.extend(ast.iter_child_nodes(node))
    return found


def undeclared(
    files: Mapping[str, str],
    allowed: Mapping[str, frozenset[str]],
    providers: Mapping[str, list[str]],
) -> list[str]:
    """One line per import no allowed distribution provides.

    `files`: {path: source}; `allowed`: {path: canonical names it may use}; `providers`: {import name:
    distributions that provide it} (importlib.metadata.packages_distributions() plus a table for what
    the running venv lacks). An import nobody provides is reported too: its distribution is unknown."""
    problems = []
    for path, source in sorted(files.items()):
        for top, line in sorted(imported_top_levels(source).items()):
            dists = {canonical(d) for d in providers.get(top, [])}
            if not dists:
                problems.append(f"{path}:{line}: imports {top}, which no known distribution provides")
            elif not dists & allowed[path]:
                problems.append(
                    f"{path}:{line}: imports {top} (from {', '.join(sorted(dists))}), not declared in "
                    "pyproject.toml for this module"
                )
    return problems
