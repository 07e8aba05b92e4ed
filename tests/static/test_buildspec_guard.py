"""buildspec.yml must not push an image whose build or tests failed, and must pin a Python with tomllib.

CodeBuild runs POST_BUILD even when BUILD failed, with CODEBUILD_BUILD_SUCCEEDING=0 (1 while the build
is succeeding); inside a phase the commands share one shell and the first failing command ends the
phase. The POST_BUILD commands run here exactly so, in bash, with `docker` and `aws` replaced by
recorders on PATH and the variables the earlier phases export.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from static_support import ROOT

pytestmark = pytest.mark.static

RECORDER = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$CALLS"\n'


def run_post_build(tmp_path: Path, succeeding: str) -> tuple[int, list[str]]:
    spec = yaml.safe_load((ROOT / "buildspec.yml").read_text())
    commands = spec["phases"]["post_build"]["commands"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("docker", "aws"):
        path = bin_dir / name
        path.write_text(
            RECORDER
            + (
                'if [[ "$*" == *describe-image-scan-findings* ]]; then echo "{}"; fi\n'
                if name == "aws"
                else ""
            )
        )
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    # One shell; after each command, stop the phase at its first failure (CodeBuild's rule).
    script = "\n".join(f"{c}\nrc=$?; if [[ $rc != 0 ]]; then exit $rc; fi" for c in commands)
    calls = tmp_path / "calls"
    calls.touch()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "CODEBUILD_BUILD_SUCCEEDING": succeeding,
        "GIT_SHA": "0123456789ab",
        "NEURON_TAG": "0.1.0-vllm0.11.0-neuron-sdk2.27.1",
        "NS_VERSION": "0.1.0",
        "DEFAULT_LANE": "2.27",
        "LANES": "2.27 2.28 2.32",
        "CPU_TAG": "0.1.0-vllm-cpu0.32.0",
        "REGISTRY": "123456789012.dkr.ecr.us-east-1.amazonaws.com",
        "ECR_REPOSITORY": "neuronserve",
        "SCAN_FAIL_SEVERITIES": "CRITICAL",
    }
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    return result.returncode, calls.read_text().splitlines()


def test_nothing_is_tagged_or_pushed_after_a_failed_build(tmp_path: Path) -> None:
    code, calls = run_post_build(tmp_path, succeeding="0")
    assert code != 0, "POST_BUILD must fail the build when BUILD failed"
    assert not [c for c in calls if c.startswith("docker")], calls


def test_a_succeeding_build_tags_and_pushes_every_image(tmp_path: Path) -> None:
    code, calls = run_post_build(tmp_path, succeeding="1")
    assert code == 0, calls
    pushed = [c.split()[-1] for c in calls if c.startswith("docker push")]
    repo = "123456789012.dkr.ecr.us-east-1.amazonaws.com/neuronserve:"
    assert all(p.startswith(repo) for p in pushed)
    tags = [p.removeprefix(repo) for p in pushed]
    # Today's four tags, then two per lane: the default lane keeps its tags and gets the lane's too.
    assert tags[:4] == [
        "0123456789ab-neuron",
        "0.1.0-vllm0.11.0-neuron-sdk2.27.1",
        "0123456789ab-cpu",
        "0.1.0-vllm-cpu0.32.0",
    ]
    for lane in ("2.27", "2.28", "2.32"):
        assert f"0123456789ab-neuron-lane{lane}" in tags and f"0.1.0-lane{lane}" in tags
    assert len(tags) == 10
    scanned = [c for c in calls if "image-scan-complete" in c]
    assert [c.split("imageTag=")[1] for c in scanned] == [
        "0.1.0-lane2.27",
        "0.1.0-lane2.28",
        "0.1.0-lane2.32",
    ]
    uris = json.loads((tmp_path / "image-uris.json").read_text())
    assert uris["neuron"] == repo + "0.1.0-vllm0.11.0-neuron-sdk2.27.1"
    assert uris["lanes"] == {lane: f"{repo}0.1.0-lane{lane}" for lane in ("2.27", "2.28", "2.32")}
    assert json.loads((tmp_path / "scan.json").read_text()) == {}  # the default lane's counts, as before


def test_python_runtime_is_pinned_to_one_with_tomllib() -> None:
    spec = yaml.safe_load((ROOT / "buildspec.yml").read_text())
    version = str(spec["phases"]["install"]["runtime-versions"]["python"])
    assert tuple(int(x) for x in version.split(".")[:2]) >= (3, 11)
    assert "standard:7.0" in (ROOT / "buildspec.yml").read_text().split("version:")[0]
