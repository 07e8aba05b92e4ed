"""Keep the Dockerfiles' ARG defaults and the Neuron pip constraints equal to docker/versions.env.

docker/versions.env is the one place versions are pinned. Dockerfile ARG defaults must be literals (a
Dockerfile cannot read a file before FROM), so this tool copies the file into every `ARG KEY=...` line
whose KEY it defines, and writes docker/constraints-neuron.txt: the pip constraints of the Neuron image's
single resolution (torch, torchvision, torch-xla, the Neuron wheels, vLLM), so no package of that stack
can move with resolution order (issue #13, point 2).

    python3 docker/versions.py --write     # after editing docker/versions.env
    python3 docker/versions.py --check     # exit 1 and list the drift (tests/static runs this)
    python3 docker/versions.py --build-args   # `--build-arg KEY=VALUE ...` for docker/podman build
    python3 docker/versions.py --constraints  # print what docker/constraints-neuron.txt must hold
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "versions.env"
DOCKERFILES = (HERE / "Dockerfile", HERE / "Dockerfile.cpu")
CONSTRAINTS_FILE = HERE / "constraints-neuron.txt"
# Distribution name -> versions.env key, for every package of the Neuron stack that pip resolves.
NEURON_CONSTRAINTS = {
    "torch": "TORCH_VERSION",
    "torchvision": "TORCHVISION_VERSION",
    "torch-xla": "TORCH_XLA_VERSION",
    "torch-neuronx": "TORCH_NEURONX_VERSION",
    "neuronx-cc": "NEURONX_CC_VERSION",
    "neuronx-distributed": "NEURONX_DISTRIBUTED_VERSION",
    "neuronx-distributed-inference": "NEURONX_DISTRIBUTED_INFERENCE_VERSION",
    "vllm": "VLLM_VERSION",
}
_ARG = re.compile(r"^(ARG\s+)([A-Z0-9_]+)=(\S*)\s*$")


def load_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """KEY=VALUE lines; comments and blank lines ignored; a malformed line is an error, not a skip."""
    versions: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Z0-9_]+", key) or not value or " " in value:
            raise ValueError(f"{path.name}:{number}: expected KEY=VALUE without spaces, got {raw!r}")
        versions[key] = value
    return versions


def sync(text: str, versions: dict[str, str]) -> str:
    """The Dockerfile text with every ARG default that versions.env defines replaced by its value."""
    out = []
    for line in text.splitlines(keepends=True):
        match = _ARG.match(line.rstrip("\n"))
        if match and match.group(2) in versions:
            out.append(f"{match.group(1)}{match.group(2)}={versions[match.group(2)]}\n")
        else:
            out.append(line)
    return "".join(out)


def constraints(versions: dict[str, str]) -> str:
    """docker/constraints-neuron.txt's text: one `name==version` line per package of NEURON_CONSTRAINTS."""
    lines = [
        "# Generated from docker/versions.env by `python3 docker/versions.py --write`; do not edit.",
        "# The Neuron image's one pip resolution runs with PIP_CONSTRAINT set to this file.",
    ]
    lines += [f"{name}=={versions[key]}" for name, key in NEURON_CONSTRAINTS.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    versions = load_versions()
    if argv == ["--build-args"]:
        print(" ".join(f"--build-arg {key}={value}" for key, value in versions.items()))
        return 0
    if argv == ["--constraints"]:
        print(constraints(versions), end="")
        return 0
    if argv not in (["--check"], ["--write"]):
        print(__doc__, file=sys.stderr)
        return 2
    stale = []
    for path in DOCKERFILES:
        text = path.read_text()
        synced = sync(text, versions)
        if synced != text:
            stale.append(path.name)
            if argv == ["--write"]:
                path.write_text(synced)
    wanted = constraints(versions)
    if not CONSTRAINTS_FILE.exists() or CONSTRAINTS_FILE.read_text() != wanted:
        stale.append(CONSTRAINTS_FILE.name)
        if argv == ["--write"]:
            CONSTRAINTS_FILE.write_text(wanted)
    if stale and argv == ["--check"]:
        names = ", ".join(stale)
        print(f"{names} differ from versions.env: run python3 docker/versions.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
