"""`pip install .` into an empty venv (tests/packaging/conftest.py) gives a working `neuronserve`: the
commands a user types on a laptop, every module the base install ships imported by the venv's own
Python, and `neuronserve serve` up to the engine start (which needs vLLM, not installed here).

The bug this tier was made for: `neuronserve serve` died with `ModuleNotFoundError: httptools` after
`pip install .`, because httptools arrived in the dev venv only through vLLM.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.support.checkout import user_env

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
# Modules of the optional extras: deploy/ needs the `deploy` extra (sagemaker-core).
EXTRA_MODULES = ("neuronserve.deploy",)
# The README's plan example on a laptop: a Neuron plan without a Neuron device.
NEURON_PLAN = {
    "NEURONSERVE_DEVICE": "neuron",
    "NEURON_RT_VISIBLE_CORES": "0-1",
    "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "2048",
}


def _run(venv: Path, args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 60):
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=user_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_venv_has_no_vllm(installed: Path, tmp_path: Path) -> None:
    """What makes this tier mean anything: nothing the engine brings is there to hide a missing name."""
    out = _run(installed, ["python", "-c", "import vllm"], tmp_path)
    assert out.returncode != 0 and "No module named 'vllm'" in out.stderr


def test_plan_works(installed: Path, tmp_path: Path) -> None:
    out = _run(installed, ["neuronserve", "plan", "--json"], tmp_path, NEURON_PLAN)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["device"] == "neuron"
    assert "--tensor-parallel-size" in plan["argv"]
    refused = _run(
        installed, ["neuronserve", "plan"], tmp_path, {**NEURON_PLAN, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("neuronserve plan: error: SM_VLLM_TENSOR_PARALLEL_SIZE=4 exceeds"), (
        refused.stderr
    )


@pytest.mark.parametrize("command", ["stage", "serve", "plan"])
def test_help_works(installed: Path, tmp_path: Path, command: str) -> None:
    out = _run(installed, ["neuronserve", command, "--help"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: neuronserve {command}")


def test_every_base_module_imports(installed: Path, tmp_path: Path) -> None:
    """Every module of the installed package but the extras' imports in the venv's own Python, and the
    wheel ships every module of src/ (none left out of the package list)."""
    # By file, not pkgutil.walk_packages: it skips the directories without an __init__.py (plan/fit, ...).
    script = (
        "import importlib, json, pathlib, neuronserve\n"
        "top = pathlib.Path(neuronserve.__file__).parent\n"
        "names = sorted('.'.join(('neuronserve', *p.relative_to(top).with_suffix('').parts))"
        ".removesuffix('.__init__') for p in top.rglob('*.py') if p.name != '__main__.py')\n"
        "failed = {}\n"
        "for name in names:\n"
        f"    if name.startswith({EXTRA_MODULES!r}):\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as err:\n"
        "        failed[name] = f'{type(err).__name__}: {err}'\n"
        "print(json.dumps({'file': neuronserve.__file__, 'names': names, 'failed': failed}))\n"
    )
    out = _run(installed, ["python", "-c", script], tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["file"].startswith(str(installed)), report["file"]  # the installed copy, not src/
    assert report["failed"] == {}
    src = ROOT / "src"
    shipped = {
        ".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        for p in (src / "neuronserve").rglob("*.py")
        if p.name != "__main__.py"
    } - {"neuronserve"}
    assert shipped <= set(report["names"])


def test_serve_runs_up_to_the_engine(installed: Path, tmp_path: Path) -> None:
    """`neuronserve serve` as typed: the plan, the front (the whole server stack imported), staging,
    then the engine start, which fails for want of vLLM: exit 1 naming the engine's own last line."""
    model = tmp_path / "model"
    model.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64}
    (model / "config.json").write_text(json.dumps(config))
    env = {
        "SM_VLLM_MODEL": str(model),
        "SAGEMAKER_BIND_TO_PORT": "0",
        "NEURONSERVE_ENGINE_PORT": "18191",
        "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
    }
    out = _run(installed, ["neuronserve", "serve", "--device", "cpu"], tmp_path, env, timeout=120)
    log = out.stdout + out.stderr
    assert "Traceback" not in log, log
    assert "phase STAGING -> LOADING" in log, log
    assert out.returncode == 1
    assert "No module named 'vllm'" in out.stderr.split("neuronserve serve: error:")[-1], log
