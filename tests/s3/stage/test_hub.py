"""A hub repo staged like an S3 prefix, downloaded by the real huggingface_hub client from a local
stand-in of the hub's HTTP API (tests/support/hubserver.py): byte-identical files, the token sent and
never shown, a killed download resumed, a complete one never fetched again."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.s3.assetplans import asset_plan
from tests.s3.helpers import read_tree
from tests.s3.killed import fetched_again, kill_when
from tests.support.hubserver import HubControl, HubRepo, hub_server

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.stage.paths import MANIFEST_NAME
from neuronserve.types import AssetSpec, ModelSpec, Progress

pytestmark = pytest.mark.s3
TOKEN = "hf_TestTokenValue0123456789"
REPO = "tiny-org/tiny-llama"

TINY = {
    "config.json": b'{"model_type": "llama", "tie_word_embeddings": true}',
    "tokenizer.json": b'{"version": "1.0"}' * 50,
    "model.safetensors": os.urandom(700_000),
    "sub/generation_config.json": b"{}",
}


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubControl]:
    """The stand-in, serving TINY as REPO; offline mode is ON for the test process, as in the image."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with hub_server() as ctl:
        ctl.repos[REPO] = HubRepo(dict(TINY))
        yield ctl


def hub_env(hub: HubControl, token: str | None = TOKEN) -> dict[str, str]:
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HUB_OFFLINE": "1"}  # offline asked for: the engine's, not ours
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def hub_asset(local: str, repo: str = REPO, revision: str | None = None, kind: str = "model") -> AssetSpec:
    return AssetSpec(
        kind=kind, source=repo, local=local, fetch="hub", origin="HF_MODEL_ID", revision=revision
    )  # type: ignore[arg-type]


def hub_model_plan(root: Path, local: str, **kw: str | None) -> object:
    """A Neuron plan whose model is a hub id downloaded to `local` (model first in plan.assets)."""
    model = ModelSpec(source="hub", uri=REPO, local_path=local, origin="HF_MODEL_ID")
    return asset_plan(root, hub_asset(local, **kw), model=model)  # type: ignore[arg-type]


def test_a_hub_model_arrives_byte_identical_with_the_token_sent(
    hub: HubControl, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub.token = TOKEN
    local = str(tmp_path / "hub" / "tiny")
    seen: list[Progress] = []
    caplog.set_level(logging.DEBUG)
    result = stage_all(hub_model_plan(tmp_path, local), hub_env(hub), seen.append)  # type: ignore[arg-type]
    assert result.model_dir == local
    got = read_tree(local)
    manifest = json.loads(got.pop(MANIFEST_NAME))
    assert got == TINY  # byte-identical, and nothing of huggingface_hub's bookkeeping left in it
    assert manifest["source"] == f"hf://{hub.endpoint}/{REPO}@main"
    assert manifest["extra"]["commit"] == hub.repos[REPO].commit()
    assert not os.path.exists(local + ".partial")
    assert hub.file_gets() == {name: 1 for name in TINY}
    auth = {r.authorization for r in hub.requests if "/api/agent-harnesses" not in r.path}
    assert auth == {f"Bearer {TOKEN}"}  # every repo request carried the token
    assert seen[-1].what == f"model {REPO}"
    assert seen[-1].done_bytes == seen[-1].total_bytes == sum(len(v) for v in TINY.values())
    assert TOKEN not in caplog.text
    assert f"model {REPO}" in caplog.text


def test_a_complete_hub_copy_costs_no_request(hub: HubControl, tmp_path: Path) -> None:
    local = str(tmp_path / "tiny")
    plan = hub_model_plan(tmp_path, local)
    stage_all(plan, hub_env(hub))  # type: ignore[arg-type]
    before = len(hub.requests)
    stage_all(plan, hub_env(hub))  # type: ignore[arg-type]
    assert len(hub.requests) == before
    hub.repos[REPO].files["config.json"] = b"{}"  # even if the branch moved: the copy is pinned
    stage_all(plan, hub_env(hub))  # type: ignore[arg-type]
    assert Path(local, "config.json").read_bytes() == TINY["config.json"]


def test_a_pinned_revision_and_an_adapter_from_the_hub(hub: HubControl, tmp_path: Path) -> None:
    sha = hub.repos[REPO].commit()
    local = str(tmp_path / "adapter")
    plan = asset_plan(tmp_path, hub_asset(local, revision=sha, kind="lora"))
    stage_all(plan, hub_env(hub, token=None))
    got = read_tree(local)
    got.pop(MANIFEST_NAME)
    assert got == TINY
    assert all(f"/{sha}" in r.path for r in hub.requests if "/resolve/" in r.path)
    assert {r.authorization for r in hub.requests} == {None}  # no token set: none sent


def test_a_refused_token_is_a_clear_error_without_the_token(
    hub: HubControl, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub.token = "hf_TheRightOneIsDifferent"
    hub.echo_auth = True  # the refusal repeats the token: only the stager's scrubbing keeps it out
    local = str(tmp_path / "tiny")
    seen: list[Progress] = []
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StageError) as err:
        stage_all(hub_model_plan(tmp_path, local), hub_env(hub), seen.append)  # type: ignore[arg-type]
    message = str(err.value)
    assert "check HF_TOKEN" in message
    assert "401" in message and REPO in message and "HF_MODEL_ID" in message
    assert any(r.authorization == f"Bearer {TOKEN}" for r in hub.requests)  # it was sent, and refused
    assert TOKEN not in message
    assert TOKEN not in caplog.text
    assert all(TOKEN not in p.what for p in seen)
    chain: BaseException | None = err.value
    while chain is not None:  # nor anywhere in what a traceback would print
        assert TOKEN not in str(chain)
        chain = chain.__cause__ or chain.__context__
    assert not os.path.exists(local)


@pytest.mark.parametrize(("repo", "revision"), [("tiny-org/absent", None), (REPO, "v9")])
def test_no_such_model_or_revision(hub: HubControl, tmp_path: Path, repo: str, revision: str | None) -> None:
    with pytest.raises(StageError) as err:
        stage_all(
            asset_plan(tmp_path, hub_asset(str(tmp_path / "m"), repo=repo, revision=revision)), hub_env(hub)
        )
    assert f"no such model or revision: {repo}@{revision or 'main'}" in str(err.value)
    assert TOKEN not in str(err.value)


def test_an_unreachable_hub_names_the_endpoint(tmp_path: Path) -> None:
    with hub_server() as gone:
        endpoint = gone.endpoint
    env = {"HF_ENDPOINT": endpoint, "HF_TOKEN": TOKEN}
    with pytest.raises(StageError) as err:
        stage_all(asset_plan(tmp_path, hub_asset(str(tmp_path / "m"))), env)
    assert f"cannot reach the hub at {endpoint}" in str(err.value)
    assert TOKEN not in str(err.value)


def test_an_unsafe_file_name_in_the_repo_is_refused_before_any_download(
    hub: HubControl, tmp_path: Path
) -> None:
    hub.repos["evil/repo"] = HubRepo({"config.json": b"{}", ".neuronserve-manifest.json": b"{}"})
    with pytest.raises(StageError, match="unsafe file name"):
        stage_all(asset_plan(tmp_path, hub_asset(str(tmp_path / "m"), repo="evil/repo")), hub_env(hub))
    assert hub.file_gets() == {}
    assert not os.path.exists(tmp_path / "m")


def recorded(local_dir: Path, name: str) -> bool:
    """huggingface_hub's local-dir record of a finished file: `.cache/huggingface/download/<name>.metadata`
    holds three lines (commit, etag, time), written in one call after the file is moved into place
    (huggingface_hub/_local_folder.py, write_download_metadata); without it a resume downloads the
    file again."""
    meta = local_dir / ".cache" / "huggingface" / "download" / f"{name}.metadata"
    try:
        return len(meta.read_text().splitlines()) >= 3
    except OSError:
        return False


def test_a_killed_hub_download_never_looks_complete_and_resumes(hub: HubControl, tmp_path: Path) -> None:
    hub.repos[REPO].files["zz-slow.bin"] = os.urandom(100_000)
    release = threading.Event()
    hub.hold["zz-slow.bin"] = release
    local = str(tmp_path / "tiny")
    doc = {"kind": "model", "source": REPO, "local": local, "fetch": "hub", "origin": "HF_MODEL_ID"}
    partial = Path(local + ".partial")
    # every other file whole and recorded: a file can exist before its bytes are written, and
    # huggingface_hub writes a file's local-dir metadata (commit, etag, time) only after moving
    # it into place; killed in either gap, the resume rightly fetches that file again, which
    # is not what this test counts
    landed = lambda: all(  # noqa: E731
        (partial / name).is_file()
        and (partial / name).stat().st_size == len(data)
        and recorded(partial, name)
        for name, data in TINY.items()
    )
    try:
        # SIGKILL: the stager, and with it (PR_SET_PDEATHSIG) its download
        kill_when(["tests.s3.assetplans", str(tmp_path), json.dumps(doc)], hub_env(hub), landed, 60)
    finally:
        release.set()
        del hub.hold["zz-slow.bin"]
    assert not os.path.exists(local)  # nothing at the path the engine reads
    before = hub.file_gets()
    assert all(before.get(name) == 1 for name in TINY)
    stage_all(asset_plan(tmp_path, AssetSpec(**doc)), hub_env(hub))  # type: ignore[arg-type]
    after = hub.file_gets()
    assert fetched_again(before, after) == {"zz-slow.bin": 1}
    got = read_tree(local)
    got.pop(MANIFEST_NAME)
    assert got == hub.repos[REPO].files
