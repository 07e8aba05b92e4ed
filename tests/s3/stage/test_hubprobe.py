"""A hub model the engine downloads itself (the CPU device), asked about before the engine starts
(stage/hubprobe.py), by the real huggingface_hub in a child with the engine's environment, against
the local stand-in of the hub API (tests/support/hubserver.py) and a real local hub cache: one line
naming the setting and the fix, or nothing when the engine can get it."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from tests.s3.helpers import make_plan
from tests.support.hubserver import HubControl, HubRepo, hub_server

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.stage.hub import HubAccess
from neuronserve.stage.hubprobe import probe
from neuronserve.types import ModelSpec

pytestmark = pytest.mark.s3
REPO = "tiny-org/tiny-llama"
ORIGIN = "SM_VLLM_MODEL"
NAMED = f"{ORIGIN}={REPO}"


@pytest.fixture
def hub() -> HubControl:
    with hub_server() as ctl:
        ctl.repos[REPO] = HubRepo({"config.json": b'{"model_type": "llama"}'})
        yield ctl


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The engine's hub environment as the stager derives it from the serve's (stage/hub.py)."""
    return HubAccess.from_environ({"HF_HOME": str(tmp_path / "hf"), **extra}, None).engine_env


def _cache(tmp_path: Path, repo: str = REPO) -> None:
    """`repo` in the local hub cache, laid out as huggingface_hub lays it out (refs/main -> snapshot)."""
    sha = "a" * 40
    root = tmp_path / "hf" / "hub" / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(sha)
    (root / "snapshots" / sha).mkdir(parents=True)
    (root / "snapshots" / sha / "config.json").write_text("{}")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_on_the_hub_or_in_the_cache_is_no_problem(hub: HubControl, tmp_path: Path) -> None:
    assert probe(REPO, None, ORIGIN, _env(tmp_path, HF_ENDPOINT=hub.endpoint)) is None
    assert any(r.path == f"/api/models/{REPO}" for r in hub.requests)
    _cache(tmp_path, "cached-org/m")
    seen = len(hub.requests)
    offline = _env(tmp_path, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE="1")
    assert probe("cached-org/m", None, ORIGIN, offline) is None
    assert len(hub.requests) == seen  # the cache answered: no request


def test_what_the_engine_could_not_get_is_one_line_naming_the_setting(
    hub: HubControl, tmp_path: Path
) -> None:
    env = _env(tmp_path, HF_ENDPOINT=hub.endpoint)
    missing = probe("tiny-org/typo", None, ORIGIN, env)
    assert (
        missing
        == f"SM_VLLM_MODEL=tiny-org/typo: no such model on {hub.endpoint} (a private one needs HF_TOKEN)"
    )
    revision = probe(REPO, "v9", ORIGIN, env)
    assert revision == f"{NAMED}: the hub has no revision 'v9' of it"
    offline = probe(REPO, None, ORIGIN, _env(tmp_path, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE="1"))
    assert offline is not None and offline.startswith(f"{NAMED} is not in the local hub cache (")
    assert "HF_HUB_OFFLINE is set" in offline and f"hf download {REPO}" in offline
    gone = probe(REPO, None, ORIGIN, _env(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}"))
    assert gone is not None and "cannot be reached" in gone and "not in the local hub cache" in gone
    assert all("\n" not in p for p in (missing, revision, offline, gone))


def test_a_private_repo_is_asked_with_the_token_which_is_never_said(hub: HubControl, tmp_path: Path) -> None:
    hub.token = token = "hf_ProbeTokenValue0123456789"
    with_token = _env(tmp_path, HF_ENDPOINT=hub.endpoint, HF_TOKEN=token)
    assert probe(REPO, None, ORIGIN, with_token) is None
    assert hub.requests[-1].authorization == f"Bearer {token}"
    without = probe(REPO, None, ORIGIN, _env(tmp_path, HF_ENDPOINT=hub.endpoint))
    assert without is not None and "needs HF_TOKEN" in without and token not in without


def test_staging_a_hub_model_left_to_the_engine_stops_on_the_problem(
    hub: HubControl, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The serve's staging (stage_all) raises the probe's line as a StageError before any engine."""
    spec = ModelSpec(source="hub", uri="tiny-org/typo", local_path=None, origin="SM_VLLM_MODEL")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub.endpoint}
    with pytest.raises(StageError, match=r"^SM_VLLM_MODEL=tiny-org/typo: no such model on "):
        stage_all(make_plan(spec), env)
    ok = ModelSpec(source="hub", uri=REPO, local_path=None, origin="SM_VLLM_MODEL")
    with caplog.at_level(logging.INFO, logger="neuronserve.stage"):
        assert stage_all(make_plan(ok), env).model_dir is None
    assert "downloaded by the engine itself" in caplog.text


def test_a_probe_that_cannot_answer_is_no_verdict(tmp_path: Path) -> None:
    """The child cannot run (nothing importable on its path): the engine decides, as before."""
    env = {**_env(tmp_path), "PYTHONPATH": str(tmp_path)}
    assert probe(REPO, None, ORIGIN, env) is None
