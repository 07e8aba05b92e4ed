"""The Neuron image review: each point is a checker over the Dockerfile's text, run on the real
file (no problem) and on the fault it fixed, put back (the checker must report it).

1. every stage that runs apt is noninteractive (on noble python3.12 pulls tzdata, whose prompt hangs);
2. one pip resolution for the whole stack, constrained by the file generated from versions.env, with
   torchvision pinned to the CPU build paired with torch and the CPU index wherever torch is resolved;
3. the runtime stage keeps g++ and libpython (python3.X-dev) for the compile path;
4. vllm-neuron checked out at VLLM_NEURON_COMMIT from versions.env, after cloning its branch, and the
   build fails when the branch no longer contains it (that RUN is executed against a local git repo).
"""

from __future__ import annotations

import io
import os
import re
import shlex
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
TORCHVISION_FOR_TORCH = {"2.8": "0.23", "2.9": "0.24"}


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
    elif not re.search(
        rf"^COPY docker/constraints-neuron\.txt {re.escape(constraint.group(1))}$", text, re.M
    ):
        problems.append(f"{constraint.group(1)} is not docker/constraints-neuron.txt")
    for index in ("${NEURON_PIP_INDEX}", "${TORCH_CPU_INDEX}"):
        if f'--extra-index-url "{index}"' not in run:
            problems.append(f"no {index} where torch is resolved")
    needed = [
        '"torch==${TORCH_VERSION}"',
        '"torchvision==${TORCHVISION_VERSION}"',
        "/tmp/vllm ",
        "/tmp/vllm-neuron ",
    ]
    needed.append('"neuronx-distributed-inference==${NEURONX_DISTRIBUTED_INFERENCE_VERSION}"')
    needed.append("/wheels/*.whl")
    problems += [f"{spec} is not in the one resolution" for spec in needed if spec not in run]
    if "pip check" not in run:
        problems.append("no `pip check` after the resolution")
    return problems


def constraints_problems(constraints_text: str) -> list[str]:
    pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)$", constraints_text, re.M))
    problems = [f"{name} not pinned" for name in versions_mod.NEURON_CONSTRAINTS if name not in pins]
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


def test_constraints_file_is_generated_and_pins_torchvision_to_torch() -> None:
    text = (ROOT / "docker" / "constraints-neuron.txt").read_text()
    assert text == versions_mod.constraints(VERSIONS), "run python3 docker/versions.py --write"
    assert constraints_problems(text) == []
    assert "!docker/constraints-neuron.txt" in (ROOT / ".dockerignore").read_text().split()


def test_resolution_checks_catch_the_reviewed_faults() -> None:
    # The reviewed Dockerfile: three pip installs, later ones without the CPU index, no torchvision.
    split = NEURON.replace(
        " \\\n      /tmp/vllm /tmp/vllm-neuron /wheels/*.whl \\\n",
        ' \\\n && pip install --no-cache-dir --extra-index-url "${NEURON_PIP_INDEX}" /tmp/vllm-neuron \\\n',
    )
    split = split.replace("COPY --from=wheel /wheels /wheels\n", "")
    split += "COPY --from=wheel /wheels /wheels\nRUN pip install --no-cache-dir /wheels/*.whl\n"
    assert resolution_problems(split)
    unconstrained = NEURON.replace("PIP_CONSTRAINT=/tmp/constraints-neuron.txt ", "")
    assert "the pip install is not constrained by PIP_CONSTRAINT" in resolution_problems(unconstrained)
    no_cpu_index = NEURON.replace(' --extra-index-url "${TORCH_CPU_INDEX}"', "")
    assert "no ${TORCH_CPU_INDEX} where torch is resolved" in resolution_problems(no_cpu_index)
    no_vision = NEURON.replace('      "torchvision==${TORCHVISION_VERSION}" \\\n', "")
    assert '"torchvision==${TORCHVISION_VERSION}" is not in the one resolution' in resolution_problems(
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
    builder = {
        str(i["value"]).partition("=")[0]
        for _, _, insts in stages(text)
        for i in insts
        if i["instruction"] == "ARG"
    }
    if "VLLM_NEURON_COMMIT" not in builder:
        problems.append("no ARG VLLM_NEURON_COMMIT (read from versions.env)")
    if re.search(r"vllm-neuron\S* @ git\+|git\+https://github.com/vllm-project/vllm-neuron", text):
        problems.append("vllm-neuron installed from a git URL, bypassing the pinned checkout")
    runs = [
        str(i["value"])
        for i in structure(text)
        if i["instruction"] == "RUN" and "VLLM_NEURON_REPO" in str(i["value"])
    ]
    run = runs[0] if runs else ""
    for needed in (
        '--branch "${VLLM_NEURON_REF}"',
        'merge-base --is-ancestor "${VLLM_NEURON_COMMIT}" HEAD',
        'checkout --quiet "${VLLM_NEURON_COMMIT}"',
    ):
        if needed not in run:
            problems.append(f"the plugin's RUN lacks {needed}")
    return problems


def test_plugin_pinned_to_the_commit_in_versions_env() -> None:
    assert pin_problems(NEURON, VERSIONS) == []
    assert "/tmp/vllm-neuron " in NEURON.split("pip install", 1)[1]  # the checkout is what pip installs


def test_pin_check_catches_a_branch_install_and_a_bad_pin() -> None:
    reviewed = (
        '      "vllm-neuron @ git+https://github.com/vllm-project/vllm-neuron.git@${VLLM_NEURON_REF}" \\\n'
    )
    branch_install = NEURON.replace("/tmp/vllm /tmp/vllm-neuron ", "/tmp/vllm ").replace(
        '      "torch==${TORCH_VERSION}" \\\n', '      "torch==${TORCH_VERSION}" \\\n' + reviewed
    )
    assert "vllm-neuron installed from a git URL, bypassing the pinned checkout" in pin_problems(
        branch_install, VERSIONS
    )
    no_arg = NEURON.replace("ARG VLLM_NEURON_COMMIT=unpinned\n", "")
    assert "no ARG VLLM_NEURON_COMMIT (read from versions.env)" in pin_problems(no_arg, VERSIONS)
    no_check = NEURON.replace('merge-base --is-ancestor "${VLLM_NEURON_COMMIT}" HEAD', "rev-parse HEAD")
    assert pin_problems(no_check, VERSIONS)
    assert pin_problems(NEURON, {**VERSIONS, "VLLM_NEURON_COMMIT": "0.2.2+lts"})
    assert pin_problems(NEURON, {**VERSIONS, "VLLM_NEURON_COMMIT": "abc123"})


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def plugin_repo(tmp_path: Path) -> dict[str, str]:
    """A repository with branch 0.2.2+lts (two commits) and a commit that is only on another branch."""
    repo = tmp_path / "vllm-neuron"
    repo.mkdir()
    _git(repo, "init", "--quiet", "--initial-branch", "main")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", "one")
    _git(repo, "checkout", "--quiet", "-b", "0.2.2+lts")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", "pinned")
    pinned = _git(repo, "rev-parse", "HEAD")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", "moved on")
    head = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "--quiet", "-b", "elsewhere", "main")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", "not on the branch")
    other = _git(repo, "rev-parse", "HEAD")
    return {"url": f"file://{repo}", "pinned": pinned, "head": head, "other": other, "tmp": str(tmp_path)}


def run_plugin_step(repo: dict[str, str], commit: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The Dockerfile's own RUN for the plugin, with its two absolute paths moved under tmp."""
    tmp = Path(repo["tmp"])
    (tmp / "venv").mkdir(exist_ok=True)
    script = (
        _plugin_run(NEURON)
        .replace("/tmp/vllm-neuron", str(tmp / "clone"))
        .replace("/opt/venv/", f"{tmp}/venv/")
    )
    env = {
        **os.environ,
        "VLLM_NEURON_REPO": repo["url"],
        "VLLM_NEURON_REF": "0.2.2+lts",
        "VLLM_NEURON_COMMIT": commit,
    }
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    return result, tmp / "venv" / "vllm-neuron.git"


def test_plugin_step_checks_out_the_pinned_commit(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, plugin_repo["pinned"])
    assert result.returncode == 0, result.stderr
    assert record.read_text() == f"ref=0.2.2+lts\ncommit={plugin_repo['pinned']}\n"
    assert "WARNING" not in result.stderr


def test_plugin_step_fails_when_the_branch_lost_the_commit(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, plugin_repo["other"])
    assert result.returncode != 0
    assert f"no longer contains VLLM_NEURON_COMMIT={plugin_repo['other']}" in result.stderr
    assert not record.exists()


def test_plugin_step_warns_loudly_when_unpinned(plugin_repo: dict[str, str]) -> None:
    result, record = run_plugin_step(plugin_repo, "unpinned")
    assert result.returncode == 0, result.stderr
    assert "WARNING: vllm-neuron is NOT pinned" in result.stderr and plugin_repo["head"] in result.stderr
    assert record.read_text() == f"ref=0.2.2+lts\ncommit={plugin_repo['head']}\n"


def test_readme_says_when_the_plugin_is_unpinned() -> None:
    if VERSIONS["VLLM_NEURON_COMMIT"] == "unpinned":
        assert "VLLM_NEURON_COMMIT=unpinned" in (ROOT / "README.md").read_text()
