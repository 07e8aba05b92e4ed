"""The Neuron image review: each point is a checker over the Dockerfile's text, run on the real
file (no problem) and on the fault it fixed, put back (the checker must report it).

1. every stage that runs apt is noninteractive (on noble python3.12 pulls tzdata, whose prompt hangs);
2. one pip resolution for the whole stack, constrained by the pins of the lane being built (the build
   writes the constraints from the resolved lane), with torchvision pinned to the CPU build paired with
   torch and the CPU index wherever torch is resolved;
3. the runtime stage keeps g++ and libpython (python3.X-dev) for the compile path;
4. vllm-neuron pinned by content: after cloning its branch (and checking out VLLM_NEURON_COMMIT where a
   lane pins one), the build fails unless the clone's vllm_neuron/ tree is VLLM_NEURON_TREE (that RUN is
   executed against a local git repo).
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser
from static_support import DOCKERFILES, ROOT, load_versions_module

pytestmark = pytest.mark.static

versions_mod = load_versions_module()
VERSIONS: dict[str, str] = versions_mod.load_versions()
NEURON = DOCKERFILES["neuron"].read_text()
# torch minor -> the torchvision minor released with it (pytorch/vision README, compatibility table).
TORCHVISION_FOR_TORCH = {"2.8": "0.23", "2.9": "0.24", "2.10": "0.25", "2.11": "0.26", "2.13": "0.28"}


def structure(text: str) -> list[dict[str, object]]:
    return list(DockerfileParser(fileobj=io.BytesIO(text.encode())).structure)


def stages(text: str) -> list[tuple[str, str, list[dict[str, object]]]]:
    """(name, base, instructions) per stage; a stage without AS gets its index as name."""
    out: list[tuple[str, str, list[dict[str, object]]]] = []
    for inst in structure(text):
        if inst["instruction"] == "FROM":
            words = str(inst["value"]).split()
            name = words[2] if len(words) > 2 and words[1].lower() == "as" else str(len(out))
            out.append((name, words[0], []))
        elif out:
            out[-1][2].append(inst)
    return out


def _assignments(value: str) -> dict[str, str]:
    pairs = {}
    for word in shlex.split(value):
        key, sep, val = word.partition("=")
        if sep:
            pairs[key] = val
    return pairs


# ---- 1 -------------------------------------------------------------------------------------------
def apt_problems(text: str) -> list[str]:
    """Stages whose apt-get runs without DEBIAN_FRONTEND=noninteractive in effect (ARG or ENV of the
    stage before the RUN, ENV inherited from the parent stage, or set on the command itself)."""
    problems = []
    env_of: dict[str, dict[str, str]] = {}  # the ENV each stage hands to a child stage
    for name, base, insts in stages(text):
        inherited = env_of.get(base, {})
        in_effect, own_env = dict(inherited), dict(inherited)
        for inst in insts:
            kind, value = str(inst["instruction"]), str(inst["value"])
            if kind in ("ENV", "ARG"):
                in_effect.update(_assignments(value))
                if kind == "ENV":  # ARG is not inherited by a child stage
                    own_env.update(_assignments(value))
            elif kind == "RUN" and re.search(r"apt-get\b.*\b(install|upgrade|dist-upgrade)\b", value):
                inline = "DEBIAN_FRONTEND=noninteractive" in value
                if in_effect.get("DEBIAN_FRONTEND") != "noninteractive" and not inline:
                    problems.append(
                        f"stage {name}: apt-get at line {int(str(inst['startline'])) + 1} may prompt"
                    )
        env_of[name] = own_env
    return problems


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_every_apt_stage_is_noninteractive(kind: str) -> None:
    text = DOCKERFILES[kind].read_text()
    assert "apt-get" in text
    assert apt_problems(text) == []


def test_apt_check_catches_a_stage_without_it() -> None:
    # The reviewed fault: the `wheel` stage's apt-get with nothing set.
    broken = NEURON.replace("ARG DEBIAN_FRONTEND=noninteractive\n", "", 1)
    assert broken != NEURON
    assert [p for p in apt_problems(broken) if p.startswith("stage wheel:")]
    # An ARG does not carry into a child stage (builder and runtime are FROM os).
    only_os = re.sub(r"(FROM os AS \w+\n(?:.*\n)*?)ARG DEBIAN_FRONTEND=noninteractive\n", r"\1", NEURON)
    assert {p.split(":")[0] for p in apt_problems(only_os)} >= {"stage builder", "stage runtime"}
    # An ENV in the parent does.
    as_env = only_os.replace(
        "FROM ${NEURON_BASE_IMAGE} AS os\n",
        "FROM ${NEURON_BASE_IMAGE} AS os\nENV DEBIAN_FRONTEND=noninteractive\n",
    )
    assert [p for p in apt_problems(as_env) if not p.startswith("stage wheel")] == []


# ---- 2 -------------------------------------------------------------------------------------------
def _pip_installs(text: str) -> list[tuple[str, str]]:
    """(stage, RUN text) of every RUN that runs `pip install`, except the wheel stage's build tools."""
    found = []
    for name, _, insts in stages(text):
        for inst in insts:
            value = str(inst["value"])
            if inst["instruction"] == "RUN" and re.search(r"\bpip install\b", value) and name != "wheel":
                found.append((name, value))
    return found


def resolution_problems(text: str) -> list[str]:
    problems = []
    installs = _pip_installs(text)
    if len(installs) != 1:
        return [f"{len(installs)} pip installs outside the wheel stage, expected one resolution"]
    _, run = installs[0]
    constraint = re.search(r"PIP_CONSTRAINT=(\S+)", run)
    if not constraint:
        problems.append("the pip install is not constrained by PIP_CONSTRAINT")
    elif f"> {constraint.group(1)}" not in run:
        problems.append(f"{constraint.group(1)} is not written from the lane's pins in the same RUN")
    if ". /opt/neuronserve/lane.env" not in run:
        problems.append("the resolution does not read the resolved lane")
    for index in ("${NEURON_PIP_INDEX}", "${TORCH_CPU_INDEX}"):
        if f'--extra-index-url "{index}"' not in run:
            problems.append(f"no {index} where torch is resolved")
    needed = [f'pin {name} "${{{key}}}"' for name, key in versions_mod.NEURON_STACK.items()]
    needed += [f'pin {name} "${{{key}}}"' for name, key in versions_mod.SOURCE_PINS.items()]
    needed += ["--requirement /tmp/stack.txt", "/tmp/vllm ", "/tmp/vllm-neuron ", "/wheels/*.whl"]
    problems += [f"{spec} is not in the one resolution" for spec in needed if spec not in run]
    if "pip check" not in run:
        problems.append("no `pip check` after the resolution")
    return problems


def constraints_problems(constraints_text: str) -> list[str]:
    pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)$", constraints_text, re.M))
    problems = [
        f"{name} not pinned" for name in ("torch", "torchvision", "vllm", "vllm-neuron") if name not in pins
    ]
    torch, vision = pins.get("torch", ""), pins.get("torchvision", "")
    if not torch.endswith("+cpu") or not vision.endswith("+cpu"):
        problems.append(f"torch {torch} / torchvision {vision}: not both the CPU builds")
    torch_minor = ".".join(torch.split("+")[0].split(".")[:2])
    vision_minor = ".".join(vision.split("+")[0].split(".")[:2])
    if TORCHVISION_FOR_TORCH.get(torch_minor) != vision_minor:
        problems.append(f"torchvision {vision} is not the release paired with torch {torch}")
    return problems


def test_one_constrained_resolution_with_both_indexes() -> None:
    assert resolution_problems(NEURON) == []


@pytest.mark.parametrize("lane", versions_mod.lanes())
def test_every_lane_pins_torchvision_to_its_torch(lane: str) -> None:
    assert constraints_problems(versions_mod.constraints(versions_mod.load_lane(lane))) == []


def test_resolution_checks_catch_the_reviewed_faults() -> None:
    # The reviewed Dockerfile: three pip installs, later ones without the CPU index, no torchvision.
    split = NEURON.replace(
        " /tmp/vllm /tmp/vllm-neuron /wheels/*.whl \\\n",
        ' \\\n && pip install --no-cache-dir --extra-index-url "${NEURON_PIP_INDEX}" /tmp/vllm-neuron \\\n',
    )
    split = split.replace("COPY --from=wheel /wheels /wheels\n", "")
    split += "COPY --from=wheel /wheels /wheels\nRUN pip install --no-cache-dir /wheels/*.whl\n"
    assert split != NEURON and resolution_problems(split)
    unconstrained = NEURON.replace("PIP_CONSTRAINT=/tmp/constraints.txt ", "")
    assert "the pip install is not constrained by PIP_CONSTRAINT" in resolution_problems(unconstrained)
    no_cpu_index = NEURON.replace(' --extra-index-url "${TORCH_CPU_INDEX}"', "")
    assert "no ${TORCH_CPU_INDEX} where torch is resolved" in resolution_problems(no_cpu_index)
    no_vision = NEURON.replace('      pin torchvision "${TORCHVISION_VERSION}"; \\\n', "")
    assert no_vision != NEURON
    assert 'pin torchvision "${TORCHVISION_VERSION}" is not in the one resolution' in resolution_problems(
        no_vision
    )
    good = versions_mod.constraints(VERSIONS)
    assert constraints_problems(re.sub(r"^torchvision==.*\n", "", good, flags=re.M))
    assert constraints_problems(good.replace("torchvision==0.23.0+cpu", "torchvision==0.23.0"))
    assert constraints_problems(good.replace("torchvision==0.23.0+cpu", "torchvision==0.24.0+cpu"))


# ---- 3 -------------------------------------------------------------------------------------------
def runtime_problems(text: str) -> list[str]:
    name, _, insts = stages(text)[-1]
    apt = " ".join(
        str(i["value"]) for i in insts if i["instruction"] == "RUN" and "apt-get" in str(i["value"])
    )
    kept = ("g++", '"python${PYTHON_VERSION}-dev"')
    problems = [f"final stage {name} does not install {pkg}" for pkg in kept if pkg not in apt.split()]
    problems += [f"final stage ships {pkg}" for pkg in ("build-essential", "git") if pkg in apt.split()]
    return problems


def test_runtime_keeps_gxx_and_libpython() -> None:
    assert runtime_problems(NEURON) == []


def test_runtime_check_catches_their_removal() -> None:
    without = NEURON.replace(' g++ "python${PYTHON_VERSION}-dev"', ' "python${PYTHON_VERSION}-dev"')
    assert runtime_problems(without) == ["final stage runtime does not install g++"]
    without_py = NEURON.replace(' g++ "python${PYTHON_VERSION}-dev"', " g++")
    assert runtime_problems(without_py) == [
        'final stage runtime does not install "python${PYTHON_VERSION}-dev"'
    ]


# ---- 4 -------------------------------------------------------------------------------------------
def _plugin_run(text: str) -> str:
    runs = [
        str(i["value"])
        for i in structure(text)
        if i["instruction"] == "RUN" and "VLLM_NEURON_REPO" in str(i["value"])
    ]
    assert len(runs) == 1, runs
    return runs[0]


def pin_problems(text: str, versions: dict[str, str]) -> list[str]:
    problems = []
    commit = versions.get("VLLM_NEURON_COMMIT", "")
    if commit != "unpinned" and not re.fullmatch(r"[0-9a-f]{40}", commit):
        problems.append(f"VLLM_NEURON_COMMIT={commit!r}: `unpinned` or a full 40-digit commit")
    tree = versions.get("VLLM_NEURON_TREE", "")
    if tree != "unpinned" and not re.fullmatch(r"[0-9a-f]{40}", tree):
        problems.append(f"VLLM_NEURON_TREE={tree!r}: `unpinned` or a full 40-digit tree hash")
    args = {
        str(i["value"]).partition("=")[0]
        for _, _, insts in stages(text)
        for i in insts
        if i["instruction"] == "ARG"
    }
    for key in ("VLLM_NEURON_COMMIT", "VLLM_NEURON_TREE"):
        if key not in args:
            problems.append(f"no ARG {key} (read from the lane file)")
    if re.search(r"vllm-neuron\S* @ git\+|git\+https://github.com/vllm-project/vllm-neuron", text):
        problems.append("vllm-neuron installed from a git URL, bypassing the pinned checkout")
    runs = [
        str(i["value"])
        for i in structure(text)
        if i["instruction"] == "RUN" and "VLLM_NEURON_REPO" in str(i["value"])
    ]
    run = runs[0] if runs else ""
    for needed in (
        ". /opt/neuronserve/lane.env",
        '--branch "${VLLM_NEURON_REF}"',
        'merge-base --is-ancestor "${VLLM_NEURON_COMMIT}" HEAD',
        'checkout --quiet "${VLLM_NEURON_COMMIT}"',
        "rev-parse --verify --quiet HEAD:vllm_neuron",
        '[ "${tree}" != "${VLLM_NEURON_TREE}" ]',
    ):
        if needed not in run:
            problems.append(f"the plugin's RUN lacks {needed}")
    return problems


def test_plugin_pinned_by_its_tree_in_every_lane() -> None:
    assert pin_problems(NEURON, VERSIONS) == []
    for lane in versions_mod.lanes():
        assert pin_problems(NEURON, versions_mod.load_lane(lane)) == [], lane
    assert "/tmp/vllm-neuron " in NEURON.split("pip install", 1)[1]  # the checkout is what pip installs


def test_pin_check_catches_a_branch_install_and_a_bad_pin() -> None:
    reviewed = (
        '      "vllm-neuron @ git+https://github.com/vllm-project/vllm-neuron.git@${VLLM_NEURON_REF}" \\\n'
    )
    branch_install = NEURON.replace("/tmp/vllm /tmp/vllm-neuron ", "/tmp/vllm ").replace(
        "      --requirement /tmp/stack.txt", reviewed + "      --requirement /tmp/stack.txt"
    )
    assert branch_install != NEURON
    assert "vllm-neuron installed from a git URL, bypassing the pinned checkout" in pin_problems(
        branch_install, VERSIONS
    )
    no_arg = NEURON.replace(f"ARG VLLM_NEURON_TREE={VERSIONS['VLLM_NEURON_TREE']}\n", "")
    assert "no ARG VLLM_NEURON_TREE (read from the lane file)" in pin_problems(no_arg, VERSIONS)
    no_check = NEURON.replace('[ "${tree}" != "${VLLM_NEURON_TREE}" ]', "false")
    assert pin_problems(no_check, VERSIONS)
    assert pin_problems(NEURON, {**VERSIONS, "VLLM_NEURON_COMMIT": "0.2.2+lts"})
    assert pin_problems(NEURON, {**VERSIONS, "VLLM_NEURON_TREE": "abc123"})


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def plugin_repo(tmp_path: Path) -> dict[str, str]:
    """A repository with branch 0.2.2+lts (the pinned commit, then a commit that changes vllm_neuron/),
    a commit only on another branch, and a branch without vllm_neuron/ at all."""
    repo = tmp_path / "vllm-neuron"
    (repo / "vllm_neuron").mkdir(parents=True)
    _git(repo, "init", "--quiet", "--initial-branch", "main")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", "one")
    _git(repo, "checkout", "--quiet", "-b", "bare")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", "no plugin here")
    _git(repo, "checkout", "--quiet", "-b", "0.2.2+lts", "main")
    (repo / "vllm_neuron" / "__init__.py").write_text("RELEASE = 1\n")
    _git(repo, "add", "vllm_neuron")
    _git(repo, "commit", "--quiet", "-m", "pinned")
    pinned = _git(repo, "rev-parse", "HEAD")
    pinned_tree = _git(repo, "rev-parse", "HEAD:vllm_neuron")
    (repo / "vllm_neuron" / "__init__.py").write_text("RELEASE = 2  # moved on\n")
    _git(repo, "commit", "--quiet", "-am", "moved on")
    head = _git(repo, "rev-parse", "HEAD")
    head_tree = _git(repo, "rev-parse", "HEAD:vllm_neuron")
    _git(repo, "checkout", "--quiet", "-b", "elsewhere", "main")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", "not on the branch")
    other = _git(repo, "rev-parse", "HEAD")
    return {
        "url": f"file://{repo}",
        "pinned": pinned,
        "pinned_tree": pinned_tree,
        "head": head,
        "head_tree": head_tree,
        "other": other,
        "tmp": str(tmp_path),
    }


def run_plugin_step(
    repo: dict[str, str], commit: str, tree: str, ref: str = "0.2.2+lts"
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The Dockerfile's own RUN for the plugin, its absolute paths moved under tmp and the resolved lane
    file (/opt/neuronserve/lane.env, written by docker/lane.sh in the build) written there."""
    tmp = Path(repo["tmp"])
    (tmp / "venv").mkdir(exist_ok=True)
    lane_env = tmp / "lane.env"
    lane_env.write_text(
        f"LANE=2.27\nVLLM_NEURON_REPO={repo['url']}\nVLLM_NEURON_REF={ref}\n"
        f"VLLM_NEURON_COMMIT={commit}\nVLLM_NEURON_TREE={tree}\n"
    )
    shutil.rmtree(tmp / "clone", ignore_errors=True)
    script = (
        _plugin_run(NEURON)
        .replace("/opt/neuronserve/lane.env", str(lane_env))
        .replace("/tmp/vllm-neuron", str(tmp / "clone"))
        .replace("/opt/venv/", f"{tmp}/venv/")
    )
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script], capture_output=True, text=True, timeout=60
    )
    return result, tmp / "venv" / "vllm-neuron.git"


def test_plugin_step_takes_the_pinned_commit_and_checks_its_tree(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, plugin_repo["pinned"], plugin_repo["pinned_tree"])
    assert result.returncode == 0, result.stderr
    assert record.read_text() == (
        f"ref=0.2.2+lts\ncommit={plugin_repo['pinned']}\ntree={plugin_repo['pinned_tree']}\n"
    )
    assert "WARNING" not in result.stderr


def test_plugin_step_pins_by_content_without_a_commit(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, "unpinned", plugin_repo["head_tree"])
    assert result.returncode == 0, result.stderr
    assert f"tree={plugin_repo['head_tree']}" in record.read_text()
    assert "WARNING" not in result.stderr


def test_plugin_step_fails_when_the_branch_content_changed(plugin_repo: dict[str, str]) -> None:
    """The branch moved on to other code: the tree recorded for the lane no longer matches."""
    result, record = run_plugin_step(plugin_repo, "unpinned", plugin_repo["pinned_tree"])
    assert result.returncode != 0
    assert (
        f"is {plugin_repo['head_tree']}, not VLLM_NEURON_TREE={plugin_repo['pinned_tree']} "
        "(docker/lanes/2.27.env): the branch's code changed"
    ) in result.stderr
    assert not record.exists()


def test_plugin_step_fails_when_the_branch_lost_the_commit(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, plugin_repo["other"], plugin_repo["pinned_tree"])
    assert result.returncode != 0
    assert f"no longer contains VLLM_NEURON_COMMIT={plugin_repo['other']}" in result.stderr
    assert not record.exists()


def test_plugin_step_fails_clearly_without_a_plugin_directory(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, "unpinned", plugin_repo["pinned_tree"], ref="bare")
    assert result.returncode != 0
    assert "has no vllm_neuron/ directory" in result.stderr
    assert not record.exists()


def test_plugin_step_warns_loudly_when_unpinned(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, "unpinned", "unpinned")
    assert result.returncode == 0, result.stderr
    assert "WARNING: vllm-neuron is NOT pinned" in result.stderr
    assert plugin_repo["head"] in result.stderr and plugin_repo["head_tree"] in result.stderr
    assert record.read_text() == (
        f"ref=0.2.2+lts\ncommit={plugin_repo['head']}\ntree={plugin_repo['head_tree']}\n"
    )


def test_readme_says_which_lanes_are_unpinned() -> None:
    unpinned = [
        lane
        for lane in versions_mod.lanes()
        if versions_mod.load_lane(lane)["VLLM_NEURON_TREE"] == "unpinned"
    ]
    assert VERSIONS["VLLM_NEURON_TREE"] != "unpinned", "the default lane is pinned by content"
    lanes_doc = (ROOT / "docs" / "LANES.md").read_text()
    for lane in unpinned:
        assert f"`VLLM_NEURON_TREE=unpinned` in `docker/lanes/{lane}.env`" in lanes_doc
