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


def test_the_unit_tests_in_the_neuron_image_see_the_checkout_but_test_the_installed_package() -> None:
    """The unit tests read README.md, docs/ and docker/lanes/ besides tests/: mounting tests/ alone made
    those fail in the image. The checkout's src/ must not shadow the image's installed package
    (pyproject.toml puts src on pytest's path), so the run happens in a copy without it."""
    (step,) = [c for c in commands()["build"] if "tests/unit" in c and "docker run" in c]
    assert '-v "$PWD:/tmp/checkout:ro"' in step
    steps = ("cp -r /tmp/checkout /tmp/ns", "rm -rf /tmp/ns/src", "python3 -m pytest")
    copy, remove, run = (step.index(s) for s in steps)
    assert copy < remove < run


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
