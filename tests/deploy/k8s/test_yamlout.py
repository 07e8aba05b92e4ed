"""The YAML writer (deploy/k8s/yamlout.py): every document reads back equal with PyYAML, text that YAML
would read as something else is quoted, and a directory write loses nothing it did not write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from k8s_support import MODEL, cli

from neuronserve.deploy.k8s import yamlout
from neuronserve.errors import ConfigError

yaml = pytest.importorskip("yaml", reason="needs PyYAML to read the documents back")

TRICKY = [
    "yes", "No", "on", "OFF", "y", "n", "true", "null", "~", "", " ", "8080", "0o17", "0x1F", "1e3", "+1",
    "-1", ".inf", ".NaN", "1:20", "2001-12-14", "a: b", "- x", "#x", "x #y", "*a", "&b", "!t", "%x", "@x",
    "`x`", "{a}", "[a]", "é", "line\nbreak", "tab\t", 'quote"', "back\\slash", "/ping", "s3://b/k/",
    "arn:aws:iam::1:role/x", "sum(x{a=\"b\"})", "neuron", "aws.amazon.com/neuroncore", "NEURONSERVE_DEVICE",
    "4096Mi", "500m",
]  # fmt: skip


@pytest.mark.parametrize("text", TRICKY)
def test_text_reads_back_as_text(text: str) -> None:
    doc = {text: text, "list": [text, {text: [text]}]}
    assert yaml.safe_load(yamlout.dump(doc)) == doc


def test_structures_read_back() -> None:
    doc: dict[str, Any] = {
        "a": {}, "b": [], "c": [[1, 2], [], [{}]], "d": [{"x": 1, "y": [True, False, None]}], "e": 1.5,
        "f": -3, "g": {"h": {"i": [{"j": {"k": "v"}}]}},
    }  # fmt: skip
    assert yaml.safe_load(yamlout.dump(doc)) == doc
    stream = yamlout.dump_all([doc, {"z": 1}])
    assert list(yaml.safe_load_all(stream)) == [doc, {"z": 1}]


def test_plain_where_safe() -> None:
    assert (
        yamlout.dump({"name": "neuronserve", "port": 8080, "on": True})
        == 'name: neuronserve\nport: 8080\n"on": true\n'
    )


def test_a_directory_of_someone_elses_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"holds notes\.txt"):
        yamlout.write(tmp_path, {"kustomization.yaml": {}})
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_output_that_cannot_be_a_directory_is_one_line_exit_2(tmp_path: Path) -> None:
    """The bug: `--output` under a regular file (or anywhere mkdir fails) ended in a traceback, exit 1."""
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(ConfigError, match=r"afile/out: cannot create it \(Not a directory\)"):
        yamlout.write(tmp_path / "afile" / "out", {"kustomization.yaml": {}})
    result = cli("--instance-type", "inf2.xlarge", *(f"--env={k}={v}" for k, v in MODEL.items()),
                 "--output", str(tmp_path / "afile" / "out"))  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.rstrip().endswith("cannot create it (Not a directory)")
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_second_render_replaces_the_first(tmp_path: Path) -> None:
    first = yamlout.layout(
        [("configmap.yaml", {"kind": "ConfigMap"})],
        [("job.yaml", {"kind": "Job"})],
        [("scaledobject.yaml", {"kind": "ScaledObject"})],
    )
    yamlout.write(tmp_path, first)
    assert yaml.safe_load((tmp_path / "compile" / "kustomization.yaml").read_text())["resources"] == [
        "../base",
        "job.yaml",
    ]
    second = yamlout.layout(
        [("configmap.yaml", {"kind": "ConfigMap"})], [], [("horizontalpodautoscaler.yaml", {"kind": "X"})]
    )
    yamlout.write(tmp_path, second)
    assert not (tmp_path / "scaledobject.yaml").exists() and not (tmp_path / "compile").exists()
    top = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    assert top == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["base", "horizontalpodautoscaler.yaml"],
    }
