"""docs/DEPLOY.md opens with the path a user walks (build, push to ECR, model to S3, quotas, plan, deploy,
invoke, delete), defines `$ECR` before using it, keeps the image's build internals below the deploy
targets, and its plan step runs as written (on a model directory shaped like the one step 3 downloads).

The bug: DEPLOY.md opened with image-build internals, `$ECR` was never defined, nothing said how to push
without CodeBuild, how to put a model in S3, or that a new account's `ml.inf2` endpoint quota is often 0.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from tests.packaging.test_readme_way import WRAPPER
from tests.support.checkout import bootstrap_env

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "DEPLOY.md").read_text()
SECTIONS = re.split(r"\n(?=## )", DOC)
STEPS = [
    "**1. Build the image",
    "**2. Push it to ECR",
    "**3. Put the model in S3",
    "**4. Check the instance quotas",
    "**5. Plan",
    "**6. Deploy",
    "**7. Invoke",
    "**8. Delete",
]
# TinyLlama-1.1B-Chat-v1.0's config.json values (the model the path downloads).
TINYLLAMA = json.loads((ROOT / "tests/data/models/TinyLlama-1.1B-Chat-v1.0/config.json").read_text())


def _headings() -> list[str]:
    return [s.splitlines()[0] for s in SECTIONS[1:]]


def test_the_first_section_is_the_path_in_order() -> None:
    path = SECTIONS[1]
    assert path.startswith("## The path")
    places = [path.find(f"{step}") for step in STEPS]
    assert -1 not in places, dict(zip(STEPS, places, strict=True))
    assert places == sorted(places)


def test_image_internals_come_after_the_deploy_targets() -> None:
    headings = _headings()
    images = headings.index("## The images")
    for target in ("## SageMaker", "## ECS (EC2 launch type on Neuron instances)", "## docker"):
        assert headings.index(target) < images, headings


def test_ecr_is_defined_before_it_is_used_and_pushed_without_codebuild() -> None:
    code = "".join(re.findall(r"```\w*\n(.*?)```", DOC, re.S))  # the commands, in the document's order
    defined = code.index("export ECR=")
    assert "$ECR" not in code[:defined]
    path = SECTIONS[1]
    assert "aws ecr get-login-password" in path and "docker push" in path and "podman" in path


def test_the_quota_step_says_how_to_check_and_ask_and_cites_service_quotas() -> None:
    path = SECTIONS[1]
    assert "ml.inf2.xlarge for endpoint usage" in path
    assert "aws service-quotas list-service-quotas" in path
    assert "aws service-quotas request-service-quota-increase" in path
    assert "https://docs.aws.amazon.com/servicequotas/latest/userguide/request-quota-increase.html" in path


def test_the_plan_step_runs_as_written(tmp_path: Path) -> None:
    block = re.search(r"\*\*5\. Plan\*\*.*?```bash\n(.*?)```", DOC, re.S)
    assert block, "no plan step"
    command = block.group(1).replace("\\\n", " ").strip()
    assert WRAPPER in command
    model = tmp_path / "TinyLlama-1.1B-Chat-v1.0"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINYLLAMA))
    command = command.replace("./TinyLlama-1.1B-Chat-v1.0", str(model))
    out = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=bootstrap_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("device:      neuron"), out.stdout


def test_what_the_doc_says_the_samples_hold_they_hold() -> None:
    """Each `the sample's `VALUE`` of DEPLOY.md is on a setting line of a file in sagemaker/envs/ (a
    `...` in it stands for the rest). The bug: step 5 called `s3://my-bucket/...` the sample's cache
    placeholder after the samples had dropped it for a comment (placeholders are refused)."""
    settings = "\n".join(
        line
        for env in sorted((ROOT / "sagemaker" / "envs").glob("*.env"))
        for line in env.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    quoted = re.findall(r"the samples?'s? `([^`]+)`", DOC)
    missing = [value for value in quoted if value.replace("...", "").strip() not in settings]
    assert missing == [], missing
    says_none = "the samples set no compile cache" in DOC
    assert says_none == ("NEURONSERVE_CACHE_URI=" not in settings)
