"""The checkers behind tests/unit/test_layout.py. Each reads Python source as a syntax tree (nothing is
imported or run): the imports of forbidden modules, the calls that touch files, which modules hold
logic and which test files mirror them, and the import graph of the package with its cycles."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

# --- imports of forbidden modules ------------------------------------------------------------------


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


# --- calls that touch files ------------------------------------------------------------------------

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


# --- tests mirror the code -------------------------------------------------------------------------


def has_logic(source: str) -> bool:
    """A module holds logic when it defines a function (`def` or `async def`, at any depth, methods
    included). Constants, tables of data (rows, even with lambdas), classes of fields and docstrings
    only (dataclasses, exception types), and re-exports hold none."""
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(ast.parse(source)))


def mirrors(rel: str, tiers: Iterable[str], own_tiers: Mapping[str, str]) -> set[str]:
    """The test files that mirror the module at `rel` (a path under the package root, e.g.
    "front/proxy.py"): `tests/<tier>/<package path>/test_<module>.py` in any tier, or, for a package with
    a tier of its own (`own_tiers`: package -> tier folder), that tier with the package's own name left
    out (tests/deploy/test_spec.py mirrors deploy/spec.py)."""
    *folders, filename = rel.split("/")
    name = f"test_{filename.removesuffix('.py')}.py"
    found = {"/".join(["tests", tier, *folders, name]) for tier in tiers}
    if folders and folders[0] in own_tiers:
        found.add("/".join(["tests", own_tiers[folders[0]], *folders[1:], name]))
    return found


def unmirrored(
    modules: Mapping[str, str], test_files: set[str], tiers: Iterable[str], own_tiers: Mapping[str, str]
) -> dict[str, str]:
    """module path -> the test files that would mirror it, for each module with logic that none of
    `test_files` mirrors. A package's `__init__.py` is exempt (it is the package, tested through it)."""
    tiers = tuple(tiers)
    problems = {}
    for rel, source in sorted(modules.items()):
        if rel.rsplit("/", 1)[-1] == "__init__.py" or not has_logic(source):
            continue
        wanted = mirrors(rel, tiers, own_tiers)
        if not wanted & test_files:
            problems[rel] = "no test file: one of " + ", ".join(sorted(wanted))
    return problems


# --- the import graph and its cycles ---------------------------------------------------------------


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, known: set[str]) -> str:
    """The known module a dotted name lands in (`neuronserve.front.proxy.send` -> its module)."""
    while module not in known and "." in module:
        module = module.rpartition(".")[0]
    return module


def imports_of(name: str, source: str, is_package: bool, known: set[str], root: str) -> set[str]:
    """The modules of `root` that module `name` imports: absolute and relative imports, at the top
    level and inside functions (an import there still ties the two modules together), but not under
    `if TYPE_CHECKING:` (never executed: annotations only). `from pkg import x` is the module pkg.x
    when that is a module, else pkg itself. A package's parent `__init__` is not counted as imported."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(_resolve(a.name, known) for a in node.names if _under(a.name, (root,)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if _under(base, (root,)):
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in known else _resolve(base, known))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    found.discard(name)
    return found


def import_graph(modules: Mapping[str, tuple[str, bool]], root: str) -> dict[str, set[str]]:
    """module -> the modules it imports, for `modules`: dotted name -> (source, is a package)."""
    known = set(modules)
    return {name: imports_of(name, src, is_pkg, known, root) for name, (src, is_pkg) in modules.items()}


def package_of(module: str) -> str:
    """`neuronserve.plan.lanes.x` -> "plan"; a top-level module is a package of its own ("types")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        here = package_of(module)
        out.setdefault(here, set()).update(p for p in map(package_of, deps) if p != here)
    return out


def cycles(graph: Mapping[str, set[str]]) -> list[tuple[str, ...]]:
    """Every set of nodes that import each other in a circle (Tarjan's strongly connected components
    of more than one node), each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                strong(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return sorted(found)
