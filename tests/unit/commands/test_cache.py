"""`neuronserve cache push` (commands/cache.py) in process through the CLI: every refusal comes before
any S3 call and names the setting to change. The push itself, against a real moto server, is
tests/s3/test_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronserve.cli import main
from neuronserve.commands.cache import COMPILE_CACHE_SUBDIR


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    return {
        **env,
        # an endpoint nothing listens on: a refusal that reached S3 would fail differently, and slowly
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
    }


def _push(argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["cache", "push", *argv], env) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("neuronserve cache: error: ")
    return captured.err


@pytest.mark.parametrize("uri", ["", "   "])
def test_the_cache_uri_is_required(
    uri: str, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _push([str(tmp_path), "--key", "k"], {**env, "NEURONSERVE_CACHE_URI": uri}, capsys)
    assert "needs NEURONSERVE_CACHE_URI" in err


def test_the_cache_uri_must_be_s3(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _push([str(tmp_path), "--key", "k"], {**env, "NEURONSERVE_CACHE_URI": " /local/cache "}, capsys)
    assert "NEURONSERVE_CACHE_URI='/local/cache' must be an s3:// URI" in err


@pytest.mark.parametrize("key", ["a/b", ".", ".."])
def test_a_key_is_one_path_segment(
    key: str, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _push([str(tmp_path), "--key", key], {**env, "NEURONSERVE_CACHE_URI": "s3://b/p/"}, capsys)
    assert f"cache key {key!r} must be a single path segment" in err


def test_a_cpu_plan_has_no_key_to_push_under(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _push([str(tmp_path), "--device", "cpu"], {**env, "NEURONSERVE_CACHE_URI": "s3://b/p/"}, capsys)
    assert "no cache key" in err and "--key KEY" in err


def test_a_vllm_cache_root_is_refused_naming_the_directory_to_push(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "vllm-cache"
    (root / COMPILE_CACHE_SUBDIR / "abc123").mkdir(parents=True)
    err = _push([str(root), "--key", "k"], {**env, "NEURONSERVE_CACHE_URI": "s3://b/p/"}, capsys)
    assert f"push {root / COMPILE_CACHE_SUBDIR} instead" in err
