"""A Hugging Face hub repo staged like an S3 prefix: lock, `<dest>.partial`, manifest last, rename.

Where the plan asks for it (an AssetSpec with fetch "hub": on Neuron the plugin needs a local
directory), the repo is downloaded with huggingface_hub's `snapshot_download` into the staging
directory, checked against the listing, and committed with a manifest, so a killed download never
looks complete, a complete one is never fetched again (no request at all), and a killed one resumes:
the staging directory keeps its name, and huggingface_hub skips the files its local-dir metadata
records as complete for the same commit.

Why a child process (`python -m neuronserve.stage.hubfetch`) and not a call in this one:
- huggingface_hub reads HF_HUB_OFFLINE and HF_ENDPOINT into module constants when it is first
  imported, and checks the offline constant before every request. The container (and the test
  environment) may set HF_HUB_OFFLINE=1 for everything else, while a planned hub asset is exactly a
  download the user asked for. Flipping the constant here would change it for every other thread of
  the server (and any later import); a child started without the offline variables gets its own
  constants, read from the environment it is given, and nothing here changes.
- The download can be killed with the stager (PR_SET_PDEATHSIG), like s5cmd.
- The token travels in the child's environment only (never argv, which `ps` shows), and everything
  the child says is scrubbed of it (and of every other secret-named value) before it is logged or
  raised.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronserve.errors import StageError
from neuronserve.redact import redact_text, secret_values
from neuronserve.stage import atomic
from neuronserve.stage.manifest import FileEntry, Manifest, local_complete
from neuronserve.stage.paths import safe_relpath
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s5cmdproc import PASS_ENV, die_with_parent
from neuronserve.types import Progress

log = logging.getLogger("neuronserve.stage")
ProgressCb = Callable[[Progress], None] | None

DEFAULT_ENDPOINT = "https://huggingface.co"
# Read by huggingface_hub at import; left out of the child's environment (see the module docstring).
_OFFLINE = frozenset({"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"})
# huggingface_hub's own bookkeeping inside a local_dir download (metadata, tree listing, locks).
_HF_META = os.path.join(".cache", "huggingface")


@dataclass(frozen=True)
class HubAccess:
    """How the hub download is started: the child's environment (see `child_env`), the hub's URL
    (HF_ENDPOINT through its row, config/stage.py; None: the public hub) and the secret values
    scrubbed from anything the child says. `offline`: the offline switches given, which the download
    leaves out and the engine keeps (stage/hubprobe.py asks as the engine would)."""

    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    endpoint: str | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    offline: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], endpoint: str | None) -> HubAccess:
        offline = {k: v for k, v in environ.items() if k in _OFFLINE}
        return cls(child_env(environ), endpoint, tuple(secret_values(environ)), offline)

    @property
    def engine_env(self) -> dict[str, str]:
        """The HF_* environment the engine reads the hub with (the download's, offline switches kept)."""
        return {**self.env, **self.offline}

    @property
    def url(self) -> str:
        return self.endpoint or DEFAULT_ENDPOINT


def hub_source(repo: str, revision: str | None, endpoint: str | None) -> str:
    """What a manifest records for a hub copy: the endpoint (when not the public hub), repo, revision."""
    url = (endpoint or "").rstrip("/")
    where = "" if url in ("", DEFAULT_ENDPOINT) else f"{url}/"
    return f"hf://{where}{repo}@{revision or 'main'}"


def stage_hub(
    repo: str,
    revision: str | None,
    dest: str,
    hub: HubAccess,
    progress: ProgressCb,
    *,
    what: str,
) -> Manifest:
    """Make `dest` a complete copy of the hub repo at `revision`; raises StageError naming the fix."""
    source = hub_source(repo, revision, hub.endpoint)
    done = local_complete(dest, source)
    if done is not None:
        log.info("%s: complete copy at %s (manifest present), nothing to download", what, dest)
        return done
    with atomic.dir_lock(dest):
        done = local_complete(dest, source)
        if done is not None:
            return done
        staging = atomic.staging_path(dest)
        os.makedirs(staging, exist_ok=True)  # kept across runs: a killed download resumes into it
        secrets = list(hub.secrets)
        child = _HubChild(repo, revision, staging, hub)
        try:
            commit, files = child.listing(what, secrets)
            total = sum(f.size for f in files)
            atomic.check_free_space(staging, total - _bytes_in(staging), source)
            log.info(
                "%s: %d files, %.1f MiB at commit %s to %s", what, len(files), total / 2**20, commit, dest
            )
            with ProgressMeter(what, total, progress) as meter, _watch(staging, meter):
                child.finish(what, secrets)
        finally:
            child.kill()
        _check_files(staging, files, what)
        shutil.rmtree(os.path.join(staging, _HF_META), ignore_errors=True)
        atomic.prune(staging, {f.path for f in files})
        manifest = Manifest(source=source, files=tuple(files), extra={"commit": commit})
        atomic.commit(staging, dest, manifest)
        return manifest


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The hub child's environment: the process basics, the HF_* settings given (the offline switches
    left out), this interpreter's import path, and huggingface_hub's bars and telemetry off."""
    env = {k: v for k, v in os.environ.items() if k in PASS_ENV}
    env.update(
        {k: v for k, v in environ.items() if (k.startswith("HF_") or k in PASS_ENV) and k not in _OFFLINE}
    )
    env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)  # "" is the cwd
    env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    return env


class _HubChild:
    """One running hubfetch: its JSON lines read in order, its stderr kept for a failure message."""

    def __init__(self, repo: str, revision: str | None, staging: str, hub: HubAccess) -> None:
        self.repo, self.revision = repo, revision
        self.endpoint = hub.url
        request = {
            "repo": repo,
            "revision": revision,
            "dest": staging,
            "cache_dir": os.path.join(staging, _HF_META, "hub"),
        }
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "neuronserve.stage.hubfetch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=dict(hub.env),
                preexec_fn=die_with_parent,  # noqa: PLW1509
            )
        except OSError as err:
            raise StageError(f"cannot start the hub download of {repo}: {err}") from err
        self.stderr: list[str] = []
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request))
        self.proc.stdin.close()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            del self.stderr[:-40]

    def _next(self) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict):
                    return doc
        return None

    def _fail(self, doc: dict[str, Any] | None, what: str, secrets: list[str]) -> StageError:
        self.proc.wait()
        self._err_reader.join(5)
        raw = doc.get("error") if doc else None
        error = raw if isinstance(raw, dict) else {}
        message = hub_error(error, self, what, "".join(self.stderr[-10:]))
        return StageError(redact_text(message, secrets))

    def listing(self, what: str, secrets: list[str]) -> tuple[str, list[FileEntry]]:
        """The commit the revision names and its files, checked again here (the child is not trusted)."""
        doc = self._next()
        if doc is None or "commit" not in doc:
            raise self._fail(doc, what, secrets)
        try:
            files = [
                FileEntry(
                    safe_relpath(str(f["path"]), what=f"file of hub repo {self.repo}"),
                    int(f["size"]),
                    str(f["etag"]),
                )
                for f in doc["files"]
            ]
        except (KeyError, TypeError, ValueError) as err:
            raise StageError(f"{what}: the hub download answered an unreadable listing ({err})") from None
        return str(doc["commit"]), files

    def finish(self, what: str, secrets: list[str]) -> None:
        doc = self._next()
        if doc is None or not doc.get("done") or self.proc.wait() != 0:
            raise self._fail(doc, what, secrets)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdout,):
            if pipe is not None:
                pipe.close()


def hub_error(error: dict[str, Any], child: _HubChild, what: str, stderr: str) -> str:
    """The child's failure in the user's terms: the likely cause first, then what the hub said."""
    status, kind = error.get("status"), str(error.get("type", ""))
    lines = [ln.strip() for ln in (str(error.get("message", "")) or stderr).splitlines() if ln.strip()]
    # huggingface_hub's messages: the status first, the server's own words last
    said = " ... ".join(lines[:1] + lines[-1:] if len(lines) > 1 else lines)[:600] or "no error message"
    rev = child.revision or "main"
    if status in (401, 403) or kind == "GatedRepoError":
        cause = (
            f"the hub refused access ({status or kind}): check HF_TOKEN (a token with read access to "
            f"{child.repo}; a gated model also needs its license accepted on the hub; a private or "
            "misspelled repo answers 401 without a valid token)"
        )
    elif status == 404 or kind in ("RepositoryNotFoundError", "RevisionNotFoundError", "EntryNotFoundError"):
        cause = (
            f"no such model or revision: {child.repo}@{rev} on {child.endpoint}; "
            "check the id and the revision"
        )
    elif kind in (
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "TimeoutException",
        "LocalEntryNotFoundError",
    ):
        cause = (
            f"cannot reach the hub at {child.endpoint}: check the network route (VPC endpoints, proxy) "
            "or HF_ENDPOINT, or stage the model to S3 and name its s3:// URI"
        )
    elif kind == "StageError":
        cause = "refused an unsafe file name in the repo"
    else:
        cause = f"the download failed ({kind or 'exit ' + str(child.proc.returncode)})"
    return f"{what}: {cause}: {said}"


def _check_files(staging: str, files: list[FileEntry], what: str) -> None:
    """Every listed file is in place at its listed size: snapshot_download may return a partial
    local_dir with a warning when the hub fails midway, and that must never be committed."""
    for f in files:
        path = os.path.join(staging, f.path)
        try:
            size = os.path.getsize(path)
        except OSError:
            size = -1
        if size != f.size:
            raise StageError(
                f"{what}: {f.path} is {'missing' if size < 0 else f'{size} bytes, not {f.size}'} after the "
                "download; re-run to resume it"
            )


def _bytes_in(root: str) -> int:
    """Bytes of the repo's files on disk: finished ones, and huggingface_hub's `.incomplete` ones
    (its own bookkeeping is not counted, so the meter does not pass the listed total)."""
    meta = os.path.join(root, _HF_META)
    n = 0
    for dirpath, _dirs, names in os.walk(root):
        in_meta = dirpath == meta or dirpath.startswith(meta + os.sep)
        for name in names:
            if in_meta and not name.endswith(".incomplete"):
                continue
            with contextlib.suppress(OSError):
                n += os.path.getsize(os.path.join(dirpath, name))
    return n


@contextlib.contextmanager
def _watch(staging: str, meter: ProgressMeter, interval: float = 0.5) -> Iterator[None]:
    """Feed the meter the bytes on disk in the staging directory (huggingface_hub reports none to us)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(interval):
            meter.set(_bytes_in(staging))

    thread = threading.Thread(target=run, name="hub-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        meter.set(_bytes_in(staging))
