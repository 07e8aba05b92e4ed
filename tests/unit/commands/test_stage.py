"""`neuronserve stage` (commands/stage.py) in process through the CLI, on a local model: where things
are, as JSON or lines, and a refusal before anything is staged. Against S3 (a real moto server) the
command runs as a subprocess in tests/s3/test_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronserve.cli import main


def test_json_says_where_the_model_is(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stage", "--json", "--device", "cpu"], env) == 0
    assert json.loads(capsys.readouterr().out) == {
        "model_dir": env["SM_VLLM_MODEL"],
        "artifacts_dir": None,
        "cache": "off",
    }


def test_lines_say_the_same(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stage", "--device", "cpu"], env) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"model_dir: {env['SM_VLLM_MODEL']}",
        "artifacts_dir: None",
        "cache: off",
    ]


def test_a_required_hit_without_a_remote_cache_is_refused_before_staging(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    neuron = {
        **env,
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "NEURONSERVE_REQUIRE_CACHE_HIT": "true",
        "NEURON_COMPILED_ARTIFACTS": str(tmp_path / "artifacts"),
    }
    assert main(["stage", "--json", "--device", "neuron"], neuron) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "NEURONSERVE_REQUIRE_CACHE_HIT" in captured.err and "NEURONSERVE_CACHE_URI" in captured.err
    assert not (tmp_path / "artifacts").exists()


def test_the_token_secret_is_read_as_serve_reads_it(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """HF_TOKEN_SECRET_ARN goes through host/secrets.py before the plan (an EKS stage initContainer
    fetches gated models with it): a value that is no ARN, or beside HF_TOKEN, is refused, exit 2."""
    assert main(["stage", "--device", "cpu"], {**env, "HF_TOKEN_SECRET_ARN": "hf_not_an_arn"}) == 2
    assert "is not a Secrets Manager secret ARN" in capsys.readouterr().err
    arn = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf-AbCdEf"
    assert main(["stage", "--device", "cpu"], {**env, "HF_TOKEN_SECRET_ARN": arn, "HF_TOKEN": "hf_x"}) == 2
    assert "keep HF_TOKEN_SECRET_ARN" in capsys.readouterr().err
