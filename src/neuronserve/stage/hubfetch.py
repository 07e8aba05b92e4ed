"""The hub download itself, run as a child process by stage/hub.py: `python -m neuronserve.stage.hubfetch`.

It reads its request as one JSON object on stdin ({"repo", "revision", "dest", "cache_dir"}) and the
token from HF_TOKEN in its environment only (never argv: argv is visible to every user of the host in
`ps`). It answers with JSON lines on stdout:
- `{"commit": <sha>, "files": [{"path", "size", "etag"}]}` once the revision is resolved and listed,
  before any file is fetched (the parent sizes its progress meter from it);
- `{"done": true}` when every file is in `dest`;
- `{"error": {"status": <HTTP status or null>, "type": <exception class>, "message": ...}}` on failure
  (exit status 3); the parent words the error and removes any secret from it.

The revision is resolved to one commit first and the download is pinned to it, so a branch that moves
during the download cannot mix two commits. Every listed name passes the stager's own `safe_relpath`
before the first byte is fetched (huggingface_hub checks names too; this is the same rule S3 keys and
archive members pass). Files already complete in `dest` (a killed earlier run) are kept by
huggingface_hub's local-dir metadata, which is how a download resumes.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from neuronserve.config.table import VARS
from neuronserve.stage.paths import check_no_conflicts, safe_relpath


def _say(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def _error(err: BaseException) -> dict[str, Any]:
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", None)
    return {
        "status": status if isinstance(status, int) else None,
        "type": type(err).__name__,
        "message": str(err)[:2000],
    }


def fetch(request: dict[str, Any], token: str | bool) -> None:
    """List the pinned revision, check every name, then let snapshot_download fetch into `dest`."""
    from huggingface_hub import HfApi, snapshot_download  # noqa: PLC0415
    from huggingface_hub.hf_api import RepoFile  # noqa: PLC0415

    repo, revision, dest = str(request["repo"]), request.get("revision"), str(request["dest"])
    api = HfApi(token=token)
    info = api.repo_info(repo, revision=revision or "main")
    commit = str(info.sha)
    files: list[dict[str, Any]] = []
    for entry in api.list_repo_tree(repo, revision=commit, recursive=True):
        if isinstance(entry, RepoFile):
            rel = safe_relpath(entry.path, what=f"file of hub repo {repo}")
            etag = entry.lfs.sha256 if entry.lfs is not None else entry.blob_id
            files.append({"path": rel, "size": int(entry.size), "etag": str(etag or "")})
    check_no_conflicts([str(f["path"]) for f in files], where=f"hub repo {repo}")
    _say({"commit": commit, "files": files})
    snapshot_download(
        repo,
        revision=commit,
        local_dir=dest,
        cache_dir=str(request["cache_dir"]),
        token=token,
        max_workers=8,
    )
    _say({"done": True})


def main() -> int:
    try:
        request = json.loads(sys.stdin.read())
        # HF_TOKEN (its row) or no token at all (False): never a token file the parent does not know to
        # scrub. This child's environment is the one hub.child_env gave it, read here like cli.py reads.
        fetch(request, VARS["HF_TOKEN"].read(os.environ) or False)
    except Exception as err:  # every failure is reported to the parent as one JSON line
        _say({"error": _error(err)})
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
