"""Build and run the CPU image with whatever container tooling answers here.

- Docker (the `docker` Python SDK) where an engine answers: CodeBuild, developer machines.
- podman + buildah otherwise (shared/TOOLCHAIN.md): no registry is reachable, so the base image is made
  locally with debootstrap and imported once; `podman build --isolation=chroot` builds (layer cache kept
  between runs); `buildah run --isolation=chroot` runs it with the host network, since `podman run`
  cannot start containers on this kernel (cgroups v1 hybrid).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "localhost/debian-base:bookworm"
CPU_IMAGE = os.environ.get("NEURONSERVE_IMAGE_CPU", "localhost/neuronserve:cpu-test")
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def docker_client() -> object | None:
    """A docker SDK client when a Docker engine answers, else None."""
    try:
        import docker
    except ImportError:
        return None
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception:
        return None
    return client


def podman_missing() -> str | None:
    """Why the podman/buildah path cannot run here, or None when it can."""
    missing = [t for t in ("podman", "buildah", "debootstrap") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/image-deps installs them as root)"
    if os.geteuid() != 0:
        return "the podman/buildah path needs root here (chroot isolation, debootstrap)"
    return None


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd[:3])} failed ({result.returncode}):\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def ensure_base_image() -> None:
    """debootstrap bookworm (minbase) and import it, once per machine (~25-60 s)."""
    if subprocess.run(["podman", "image", "exists", BASE_IMAGE]).returncode == 0:
        return
    with tempfile.TemporaryDirectory(prefix="ns-rootfs-") as rootfs:
        _run(["debootstrap", "--variant=minbase", "bookworm", rootfs, "http://deb.debian.org/debian"], 600)
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["podman", "import", "-", BASE_IMAGE], stdin=tar.stdout, capture_output=True, timeout=300
        )
        tar.wait(timeout=60)
        if imported.returncode != 0:
            raise RuntimeError(f"podman import failed: {imported.stderr.decode()[-2000:]}")


def local_build_args() -> list[str]:
    """This machine's pip needs the host CA bundle, and torch==X+cpu lies only in its local wheel folder."""
    args = ["--build-arg", f"CPU_BASE_IMAGE={BASE_IMAGE}", "--build-arg", f"NEURON_BASE_IMAGE={BASE_IMAGE}"]
    if HOST_CA.exists():
        args += ["-v", f"{HOST_CA}:/host-ca.crt:ro", "--build-arg", "BUILD_CA_BUNDLE=/host-ca.crt"]
    wheels = os.environ.get("PIP_FIND_LINKS", "/opt/wheels")
    if wheels and Path(wheels).is_dir():
        args += ["-v", f"{wheels}:/host-wheels:ro", "--build-arg", "BUILD_WHEEL_DIR=/host-wheels"]
        args += ["--build-arg", "TORCH_CPU_INDEX="]
    return args


_BUILT: dict[tuple[str, str | None, str], float] = {}


def podman_build(
    tag: str = CPU_IMAGE, target: str | None = None, dockerfile: str = "docker/Dockerfile.cpu"
) -> float:
    """Build with podman (layer cache reused); returns the seconds it took.

    Once per test session for the same tag, target and Dockerfile: several test modules use the CPU image,
    and even a fully cached rebuild costs 15-45 s on this machine.
    """
    if (tag, target, dockerfile) in _BUILT:
        return 0.0
    ensure_base_image()
    start = time.monotonic()
    cmd = [
        "podman",
        "build",
        "--isolation=chroot",
        "--layers",
        "--format",
        "docker",
        "-f",
        str(ROOT / dockerfile),
        "-t",
        tag,
    ]
    if target:
        cmd += ["--target", target]
    cmd += [*local_build_args(), str(ROOT)]
    _run(cmd, 1800)  # cold: ~8 min idle, 15 min measured on a loaded 2-core machine
    _BUILT[(tag, target, dockerfile)] = seconds = time.monotonic() - start
    return seconds


class BuildahContainer:
    """A working container from the image; `start` runs a command in it like `docker run` would."""

    def __init__(self, image: str, name: str) -> None:
        self.name = name
        subprocess.run(["buildah", "rm", name], capture_output=True)
        _run(["buildah", "from", "--name", name, image], 120)
        self.proc: subprocess.Popen[bytes] | None = None

    def copy(self, src: Path, dest: str) -> None:
        _run(["buildah", "copy", "--chown", "1000:1000", self.name, str(src), dest], 120)

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        cmd = ["buildah", "run", "--isolation=chroot", "--network=host"]
        for key, value in env.items():
            cmd += ["--env", f"{key}={value}"]
        cmd += [self.name, "--", *argv]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def main_pid(self) -> int | None:
        """The container's first process (what Docker calls PID 1): the child of buildah-chroot-exec.

        buildah does not forward SIGTERM (signalled, it kills its child outright), so `stop` signals
        this process directly, as `docker stop` would.
        """
        if self.proc is None:
            return None
        comms: dict[int, tuple[int, str]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            try:
                comm = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            ppid, pgid = int(fields[1]), int(fields[2])
            if pgid == self.proc.pid:
                comms[int(entry.name)] = (ppid, comm)
        for pid, (ppid, _) in comms.items():
            if comms.get(ppid, (0, ""))[1] == "buildah-chroot-exec":
                return pid
        return None

    def stop(self, grace: float = 15) -> int | None:
        """SIGTERM to the container's main process (`docker stop`), SIGKILL to everything after the grace."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            main = self.main_pid()
            if main is not None:
                os.kill(main, signal.SIGTERM)
            else:
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # nothing of the container outlives the test
        return self.proc.returncode

    def remove(self) -> None:
        subprocess.run(["buildah", "rm", self.name], capture_output=True, timeout=60)
