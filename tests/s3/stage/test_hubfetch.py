"""stage/hubfetch.py, run as the child stage/hub.py starts, against the local stand-in of the hub
(tests/support/hubserver.py): it answers the pinned commit and the checked listing before any file, then
`done`; the token comes from its environment only; a failure is one JSON error line and exit 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.hubserver import HubControl, HubRepo, hub_server

from neuronserve.stage.hub import child_env

pytestmark = pytest.mark.s3
REPO = "tiny-org/fetch-me"
FILES = {"config.json": b'{"model_type": "llama"}', "weights/w.bin": os.urandom(300_000)}
TOKEN = "hf_FetchTokenValue0123456789"


@pytest.fixture
def hub() -> Iterator[HubControl]:
    with hub_server() as ctl:
        ctl.repos[REPO] = HubRepo(dict(FILES))
        yield ctl


def fetch(hub: HubControl, dest: Path, repo: str = REPO, token: str | None = None) -> tuple[int, list[Any]]:
    """Run the child as hub.py does: the request on stdin, the child environment hub.child_env builds."""
    environ = {"HF_ENDPOINT": hub.endpoint, "HF_HUB_OFFLINE": "1", **({"HF_TOKEN": token} if token else {})}
    request = {"repo": repo, "revision": None, "dest": str(dest), "cache_dir": str(dest / ".cache" / "hub")}
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "neuronserve.stage.hubfetch"],
        input=json.dumps(request),
        env=child_env(environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


def test_the_listing_comes_first_then_every_file_then_done(hub: HubControl, tmp_path: Path) -> None:
    rc, lines = fetch(hub, tmp_path / "dest")
    assert rc == 0
    listing, done = lines
    assert listing["commit"] == hub.repos[REPO].commit()
    assert {f["path"]: f["size"] for f in listing["files"]} == {k: len(v) for k, v in FILES.items()}
    assert done == {"done": True}
    for rel, data in FILES.items():
        assert (tmp_path / "dest" / rel).read_bytes() == data


def test_the_token_is_sent_from_the_environment_and_never_printed(hub: HubControl, tmp_path: Path) -> None:
    hub.token = TOKEN
    rc, lines = fetch(hub, tmp_path / "without")
    assert rc == 3 and lines[-1]["error"]["status"] == 401
    rc, lines = fetch(hub, tmp_path / "with", token=TOKEN)
    assert rc == 0 and lines[-1] == {"done": True}
    assert {r.authorization for r in hub.requests if r.authorization} == {f"Bearer {TOKEN}"}
    assert TOKEN not in json.dumps(lines)


def test_a_missing_repo_is_one_error_line_and_exit_3(hub: HubControl, tmp_path: Path) -> None:
    rc, lines = fetch(hub, tmp_path / "dest", repo="tiny-org/not-there")
    assert rc == 3
    assert len(lines) == 1
    error = lines[0]["error"]
    assert error["status"] == 404 and error["type"] == "RepositoryNotFoundError"
    assert not (tmp_path / "dest" / "config.json").exists()
