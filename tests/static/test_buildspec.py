"""buildspec.yml: valid YAML with the steps the release needs, and every command line shellcheck-clean."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from static_support import ROOT, tool

pytestmark = pytest.mark.static


def commands() -> dict[str, list[str]]:
    spec = yaml.safe_load((ROOT / "buildspec.yml").read_text())
    assert spec["version"] == 0.2
    return {phase: body["commands"] for phase, body in spec["phases"].items()}


def test_release_steps_in_order() -> None:
    text = "\n".join(c for phase in commands().values() for c in phase)
    steps = [
        "aws ecr get-login-password",
        "docker/versions.py --check",
        "--render | hadolint --no-color --failure-threshold info -",
        'docker build -f docker/Dockerfile $(python3 docker/versions.py --lane "$lane" --build-args)',
        '/opt/smoke/smoke.sh "/opt/smoke/lanes/${lane}.env"',
        'docker tag "neuronserve:${GIT_SHA}-neuron-lane${DEFAULT_LANE}" "neuronserve:${GIT_SHA}-neuron"',
        "docker build -f docker/Dockerfile.cpu",
        "plan --json",
        "pytest -q -p no:cacheprovider tests/unit",
        "-m image tests/image",
        "docker push",
        "aws ecr wait image-scan-complete",
        "describe-image-scan-findings",
    ]
    positions = [text.index(step) for step in steps]
    assert positions == sorted(positions)
    assert "${GIT_SHA}" in text and "${NEURON_SDK_VERSION}" in text and "${VLLM_VERSION}" in text


def test_commands_pass_shellcheck() -> None:
    script = "#!/usr/bin/env bash\n" + "\n".join(c for phase in commands().values() for c in phase) + "\n"
    path = ROOT / "buildspec.yml"
    result = subprocess.run(
        # SC2046: `$(versions.py --build-args)` is split into flags on purpose.
        # SC1091: versions.env is sourced from the checkout, not given to shellcheck.
        [tool("shellcheck"), "--shell=bash", "-e", "SC2046,SC1091", "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"{path}:\n{result.stdout}"
