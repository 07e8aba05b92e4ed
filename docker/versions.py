"""Keep the Dockerfiles' ARG defaults equal to docker/versions.env, and versions.env to the default lane.

Every pin of a Neuron image lane is in docker/lanes/<lane>.env (2.27, the default; 2.28; 2.32), cited from
AWS's DLC Dockerfile for that SDK. docker/versions.env repeats the default lane's pins (plus the CPU image's
and the wheel build's) for the tools that read one file. Dockerfile ARG defaults must be literals (a
Dockerfile cannot read a file before FROM), so this tool copies versions.env into every `ARG KEY=...` line
whose KEY it defines; inside the build, docker/lane.sh resolves the lane the build asks for
(`--build-arg LANE=2.28`), so the defaults only have to be the default lane's.

    python3 docker/versions.py --write     # after editing docker/versions.env
    python3 docker/versions.py --check     # exit 1 and list the drift (tests/static runs this)
    python3 docker/versions.py --build-args   # `--build-arg KEY=VALUE ...` for docker/podman build
    python3 docker/versions.py --constraints  # the pip constraints the Neuron build generates
    python3 docker/versions.py --lanes        # the lanes, one a line, the default first
    python3 docker/versions.py --lane 2.28 --build-args    # lane 2.28's pins as --build-arg flags
    python3 docker/versions.py --lane 2.28 --constraints   # lane 2.28's pip constraints
    python3 docker/versions.py --lane 2.28 --render        # docker/Dockerfile with lane 2.28's ARG defaults
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "versions.env"
DOCKERFILES = (HERE / "Dockerfile", HERE / "Dockerfile.cpu")
LANES_DIR = HERE / "lanes"
# The lane a build gets without --build-arg LANE (ARG LANE's default; versions.env's LANE).
DEFAULT_LANE = "2.27"
# Distribution name -> lane key, for every package of the Neuron stack that the build names to pip, in
# the order of the Dockerfile's pin() calls (tests/static checks both agree). Value `none`: not in the
# lane; `unpinned`: named without a version; else pinned (and constrained).
NEURON_STACK = {
    "torch": "TORCH_VERSION",
    "torchvision": "TORCHVISION_VERSION",
    "torch-xla": "TORCH_XLA_VERSION",
    "torch-neuronx": "TORCH_NEURONX_VERSION",
    "neuronx-cc": "NEURONX_CC_VERSION",
    "neuronx-distributed": "NEURONX_DISTRIBUTED_VERSION",
    "neuronx-distributed-inference": "NEURONX_DISTRIBUTED_INFERENCE_VERSION",
    "nki": "NKI_VERSION",
    "libtorch-neuronx-lite": "LIBTORCH_NEURONX_LITE_VERSION",
    "neuron-agentic-development": "NEURON_AGENTIC_DEVELOPMENT_VERSION",
}
# Installed from source checkouts, constrained to the lane's versions.
SOURCE_PINS = {"vllm": "VLLM_VERSION", "vllm-neuron": "VLLM_NEURON_VERSION"}
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


def lanes() -> list[str]:
    """The lanes that docker/lanes/ holds, the default first."""
    found = sorted(p.name.removesuffix(".env") for p in LANES_DIR.glob("*.env"))
    return sorted(found, key=lambda lane: lane != DEFAULT_LANE)


def load_lane(lane: str) -> dict[str, str]:
    """docker/lanes/<lane>.env; an unknown lane is an error that names the lanes there are."""
    path = LANES_DIR / f"{lane}.env"
    if not path.is_file():
        raise ValueError(f"no lane {lane!r}: docker/lanes/ holds {', '.join(lanes())}")
    return load_versions(path)


def constraints(pins: dict[str, str]) -> str:
    """The pip constraints the Neuron build generates from a lane's pins (its Dockerfile's pin() step):
    every pinned package of NEURON_STACK, then vLLM and the plugin, whose sources are checked out."""
    lines = [
        f"{name}=={pins[key]}" for name, key in NEURON_STACK.items() if pins[key] not in ("none", "unpinned")
    ]
    lines += [f"{name}=={pins[key]}" for name, key in SOURCE_PINS.items()]
    return "\n".join(lines) + "\n"


def lane_args(lane: str) -> dict[str, str]:
    """Every build argument of a Neuron build of `lane`: versions.env's (the wheel stage's too), then
    the lane's, then LANE itself."""
    return {**load_versions(), **load_lane(lane), "LANE": lane}


def drift() -> list[str]:
    """What differs between versions.env and the default lane, and between the lanes' sets of keys."""
    versions, default = load_versions(), load_lane(DEFAULT_LANE)
    problems = [
        f"versions.env {key}={versions.get(key)}, docker/lanes/{DEFAULT_LANE}.env {key}={value}"
        for key, value in default.items()
        if versions.get(key) != value
    ]
    if versions.get("LANE") != DEFAULT_LANE:
        problems.append(f"versions.env LANE={versions.get('LANE')}, the default lane is {DEFAULT_LANE}")
    for lane in lanes():
        keys = set(load_lane(lane))
        if keys != set(default):
            problems.append(
                f"docker/lanes/{lane}.env keys differ from {DEFAULT_LANE}.env: "
                f"missing {sorted(set(default) - keys)}, extra {sorted(keys - set(default))}"
            )
    return problems


def _lane_main(lane: str, command: list[str]) -> int:
    try:
        pins = lane_args(lane)
    except ValueError as exc:
        print(f"versions.py: {exc}", file=sys.stderr)
        return 2
    if command == ["--build-args"]:
        print(" ".join(f"--build-arg {key}={value}" for key, value in pins.items()))
    elif command == ["--constraints"]:
        print(constraints(pins), end="")
    elif command == ["--render"]:
        print(sync(DOCKERFILES[0].read_text(), pins), end="")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


def main(argv: list[str]) -> int:
    versions = load_versions()
    if len(argv) == 3 and argv[0] == "--lane":
        return _lane_main(argv[1], argv[2:])
    if argv == ["--lanes"]:
        print("\n".join(lanes()))
        return 0
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
    lane_problems = drift()
    for problem in lane_problems:
        print(problem)
    if stale and argv == ["--check"]:
        names = ", ".join(stale)
        print(f"{names} differ from versions.env: run python3 docker/versions.py --write")
        return 1
    return 1 if lane_problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
