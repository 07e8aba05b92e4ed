"""A local stand-in of the Hugging Face Hub's HTTP API, enough for `huggingface_hub.snapshot_download`.

The tests have no network but loopback, and a hub download must still run through the real client
(its redirects, headers, resume and errors), so this answers the calls that client makes, read from the
installed huggingface_hub (hf_api.py `repo_info` / `_iter_repo_tree_pages`, file_download.py
`get_hf_file_metadata` / `http_get`):
- `GET /api/models/{repo}/revision/{rev}`: the repo's info; `sha` is the commit the revision names
  (`GET /api/models/{repo}`: the same for `main`, hf_api.py `model_info` without a revision).
- `GET /api/models/{repo}/tree/{rev}?recursive=...`: the files, each `{"type": "file", "path", "size",
  "oid"}` (no Link header: one page).
- `HEAD|GET /{repo}/resolve/{rev}/{path}`: `X-Repo-Commit`, `ETag` and `Content-Length` (the client
  refuses a file without the first two); GET honours `Range: bytes=N-` (the client resumes with it).
Errors carry the hub's `X-Error-Code` (RepoNotFound, RevisionNotFound, EntryNotFound), which the client
turns into its typed exceptions. With `token` set, a request without `Authorization: Bearer <token>`
is answered 401, as the hub answers for a private or gated repo.

Every request is recorded with its Authorization header, and a file's GET can be held open (`hold`),
so a test can kill a download midway, like tests/support/s3server.py does for S3.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit


@dataclass
class Request:
    method: str
    path: str  # without the query
    authorization: str | None


@dataclass
class HubRepo:
    files: dict[str, bytes]
    sha: str = ""  # the commit `main` names (derived from the files when empty)

    def commit(self) -> str:
        if not self.sha:
            h = hashlib.sha1()
            for path in sorted(self.files):
                h.update(path.encode() + b"\0" + self.files[path])
            self.sha = h.hexdigest()
        return self.sha


def blob_oid(data: bytes) -> str:
    """A git blob id, the `oid` the hub lists (and its ETag for a non-LFS file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HubControl:
    """What a test sets and reads: the repos served, the token required, requests seen, held files."""

    endpoint: str = ""
    repos: dict[str, HubRepo] = field(default_factory=dict)
    token: str | None = None
    echo_auth: bool = False  # a 401 repeats the Authorization header it got (as a careless proxy might)
    requests: list[Request] = field(default_factory=list)
    hold: dict[str, threading.Event] = field(default_factory=dict)  # file path in a repo -> released when set
    lock: threading.Lock = field(default_factory=threading.Lock)

    def file_gets(self) -> dict[str, int]:
        """GETs of file contents (resolve URLs), by file path inside its repo."""
        out: dict[str, int] = {}
        with self.lock:
            for r in self.requests:
                m = re.match(r"^/.+?/resolve/[^/]+/(.+)$", r.path)
                if r.method == "GET" and m:
                    out[m.group(1)] = out.get(m.group(1), 0) + 1
        return out


class _Handler(BaseHTTPRequestHandler):
    ctl: HubControl
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: pytest shows failures, not access logs

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, *, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.ctl.lock:
            self.ctl.requests.append(Request(self.command, path, self.headers.get("Authorization")))
        if self.ctl.token is not None and self.headers.get("Authorization") != f"Bearer {self.ctl.token}":
            said = f" (got {self.headers.get('Authorization')})" if self.ctl.echo_auth else ""
            self._error(401, "RepoNotFound", f"Invalid username or password.{said}", head)
            return
        if path.startswith("/api/models/"):
            self._api(path[len("/api/models/") :], head)
        elif "/resolve/" in path:
            self._resolve(path.lstrip("/"), head)
        else:
            self._error(404, "", "not a hub route of this stand-in", head)

    def _repo(self, rest: str, marker: str) -> tuple[str, HubRepo, str] | None:
        """Split `<repo id>/<marker>/<remainder>` against the repos served."""
        for repo_id, repo in self.ctl.repos.items():
            if rest.startswith(f"{repo_id}/{marker}/"):
                return repo_id, repo, rest[len(repo_id) + len(marker) + 2 :]
        return None

    def _api(self, rest: str, head: bool) -> None:
        if rest in self.ctl.repos:  # `model_info` without a revision: the main branch
            rest = f"{rest}/revision/main"
        for marker in ("revision", "tree"):
            found = self._repo(rest, marker)
            if found is None:
                continue
            repo_id, repo, rev = found
            if rev not in ("main", repo.commit()):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
                return
            if marker == "revision":
                body: Any = {
                    "id": repo_id,
                    "modelId": repo_id,
                    "sha": repo.commit(),
                    "private": False,
                    "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                }
            else:
                body = [
                    {"type": "file", "path": p, "size": len(d), "oid": blob_oid(d)}
                    for p, d in sorted(repo.files.items())
                ]
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"}, head)
            return
        self._error(404, "RepoNotFound", "Repository not found", head)

    def _resolve(self, rest: str, head: bool) -> None:
        found = self._repo(rest, "resolve")
        if found is None:
            self._error(404, "RepoNotFound", "Repository not found", head)
            return
        _repo_id, repo, tail = found
        rev, _, name = tail.partition("/")
        if rev not in ("main", repo.commit()):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            return
        if name not in repo.files:
            self._error(
                404, "EntryNotFound", f"{name} does not exist", head, {"X-Repo-Commit": repo.commit()}
            )
            return
        data = repo.files[name]
        meta = {"X-Repo-Commit": repo.commit(), "ETag": f'"{blob_oid(data)}"', "Accept-Ranges": "bytes"}
        held = self.ctl.hold.get(name)
        if held is not None and not head:
            held.wait(60)
        start = _range_start(self.headers.get("Range"))
        if start and not head and start < len(data):
            meta["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            self._send(206, data[start:], meta, head)
            return
        self._send(200, data, meta, head)

    def _error(
        self, status: int, code: str, message: str, head: bool, extra: dict[str, str] | None = None
    ) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers, head)

    def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


def _range_start(header: str | None) -> int:
    m = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(m.group(1)) if m else 0


@contextmanager
def hub_server() -> Iterator[HubControl]:
    """A stand-in hub on 127.0.0.1 (a free port), stopped on exit; held downloads are released first."""
    ctl = HubControl()
    handler = type("Handler", (_Handler,), {"ctl": ctl})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    ctl.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="hub-standin", daemon=True)
    thread.start()
    try:
        yield ctl
    finally:
        for ev in ctl.hold.values():
            ev.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
