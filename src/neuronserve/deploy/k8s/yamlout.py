"""YAML out, with no YAML library: the objects are plain data (mappings, lists, text, numbers, booleans),
and block YAML for those is short to write and easy to check (the tests read every document back with
PyYAML and compare it with the object).

Text is written plain only where YAML 1.1 and 1.2 both read it back as the same text (letters, digits and
`-._/`, not a number, a boolean or null such as `yes`, `on`, `null`, `0o17`, `1e3`); anything else is a
JSON string, which is a valid YAML double-quoted scalar (YAML 1.2, section 7.3.1). A directory output
is one file per object plus a `kustomization.yaml` naming them, as `kubectl apply -k` takes it
(https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/resource/), in three parts:
`base/`, `compile/` (the Job, with `../base`) and the top directory (the server, with `base`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from neuronserve.errors import ConfigError

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9._/-]*")
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"})
KUSTOMIZATION = "kustomization.yaml"
# What a render writes at the top of its directory (render.py's file names), and its two subdirectories.
OWNED = frozenset(
    {
        KUSTOMIZATION,
        "base",
        "compile",
        "deployment.yaml",
        "service.yaml",
        "poddisruptionbudget.yaml",
        "scaledobject.yaml",
        "horizontalpodautoscaler.yaml",
    }
)


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return json.dumps(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower().lstrip("._") not in _RESERVED:
        return text
    return json.dumps(text, ensure_ascii=False)


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, Mapping):
        if not value:
            return [pad + "{}"]
        out: list[str] = []
        for key, item in value.items():
            head = f"{pad}{scalar(key)}:"
            if isinstance(item, (Mapping, list, tuple)) and item:
                out.append(head)
                out += _lines(item, indent + 2 if isinstance(item, Mapping) else indent)
            else:
                out.append(f"{head} {_inline(item)}")
        return out
    if isinstance(value, (list, tuple)):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            if isinstance(item, (Mapping, list, tuple)) and item:
                nested = _lines(item, indent + 2)
                out.append(f"{pad}- {nested[0].lstrip()}")
                out += nested[1:]
            else:
                out.append(f"{pad}- {_inline(item)}")
        return out
    return [pad + scalar(value)]


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return scalar(value)


def dump(doc: Any) -> str:
    """One document as block YAML."""
    return "\n".join(_lines(doc, 0)) + "\n"


def dump_all(docs: Iterable[Any]) -> str:
    """A stream of documents, each opened by `---`."""
    return "".join(f"---\n{dump(doc)}" for doc in docs)


def kustomization(resources: Sequence[str]) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(resources),
    }


def layout(
    base: Sequence[tuple[str, Any]], compile_job: Sequence[tuple[str, Any]], server: Sequence[tuple[str, Any]]
) -> dict[str, Any]:
    """Relative path -> document, the kustomizations included."""
    files: dict[str, Any] = {f"base/{name}": doc for name, doc in base}
    files["base/" + KUSTOMIZATION] = kustomization([name for name, _ in base])
    if compile_job:
        files.update({f"compile/{name}": doc for name, doc in compile_job})
        files["compile/" + KUSTOMIZATION] = kustomization(["../base", *(name for name, _ in compile_job)])
    files.update(dict(server))
    files[KUSTOMIZATION] = kustomization(["base", *(name for name, _ in server)])
    return files


def write(directory: Path, files: Mapping[str, Any]) -> list[Path]:
    """Write `files` under `directory`. A directory holding anything this command does not write is
    refused (nothing is lost); the files of an earlier render are replaced, and those this render no
    longer has (another autoscaler, no Job) are removed."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"--output {directory}: not a directory")
    try:  # before anything is removed or written: a place that cannot hold a directory is one line
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--output {directory}: cannot create it ({err.strerror})") from None
    if directory.exists():
        foreign = sorted(p.name for p in directory.iterdir() if p.name not in OWNED)
        foreign += sorted(
            f"{sub}/{p.name}"
            for sub in ("base", "compile")
            if (directory / sub).is_dir()
            for p in (directory / sub).iterdir()
            if not p.name.endswith(".yaml")
        )
        if foreign:
            raise ConfigError(
                f"--output {directory}: holds {', '.join(foreign[:5])}, which this command does not write: "
                "give an empty or new directory"
            )
        for name in sorted(OWNED - {"base", "compile"}):
            (directory / name).unlink(missing_ok=True)
        for sub in ("base", "compile"):
            for old in (directory / sub).glob("*.yaml"):
                old.unlink()
            if (directory / sub).is_dir() and not any((directory / sub).iterdir()):
                (directory / sub).rmdir()
    written = []
    for rel, doc in files.items():
        path = directory / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dump(doc))
        except OSError as err:
            raise ConfigError(f"--output {directory}: cannot write {rel} ({err.strerror})") from None
        written.append(path)
    return written
