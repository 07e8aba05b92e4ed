"""The command line (cli.py) in process: the environment read once and handed on, `--` arguments for
the engine, each command's errors as one line with the error's exit code (never a traceback), and the
light top level that keeps `plan` fast."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.host_files import LLAMA, write_model

import neuronserve
from neuronserve.cli import _split_extra, build_parser, main


def test_extra_arguments_start_after_the_first_bare_double_dash() -> None:
    assert _split_extra(["plan", "--json"]) == (["plan", "--json"], [])
    assert _split_extra(["plan", "--", "--seed", "1", "--", "x"]) == (["plan"], ["--seed", "1", "--", "x"])
    assert _split_extra(["plan", "--"]) == (["plan"], [])


def test_every_command_is_on_the_parser() -> None:
    parser = build_parser()
    for command in ("plan", "serve", "stage", "cache", "compile"):
        assert (
            parser.parse_args([command] if command != "cache" else [command, "push", "d"]).command == command
        )


def test_version_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"], {})
    assert (
        done.value.code == 0 and capsys.readouterr().out.strip() == f"neuronserve {neuronserve.__version__}"
    )
    with pytest.raises(SystemExit) as done:
        main(["launch"], {})
    assert done.value.code == 2 and "invalid choice: 'launch'" in capsys.readouterr().err


def test_the_process_environment_is_read_when_none_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SM_VLLM_MODEL", str(write_model(tmp_path / "m", LLAMA)))
    monkeypatch.setenv("SAGEMAKER_BIND_TO_PORT", "http")
    assert main(["plan", "--device", "cpu"]) == 2
    assert "SAGEMAKER_BIND_TO_PORT" in capsys.readouterr().err
    assert (
        main(["plan", "--device", "cpu"], {"SM_VLLM_MODEL": str(tmp_path / "m")}) == 0
    )  # the mapping given wins


def test_a_stage_error_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(b"not an archive")
    env = {
        "SM_VLLM_MODEL": str(archive),
        "SM_MODEL_DIR": str(tmp_path / "none"),
        "NEURONSERVE_WORK_DIR": str(tmp_path),
    }
    assert main(["stage", "--device", "cpu"], env) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"neuronserve stage: error: {archive} is not a readable .tar.gz"
    )


def test_a_config_error_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stage", "--device", "cpu"], {"SM_VLLM_MODEL": "/nonexistent/model.tar.gz"}) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "neuronserve stage: error: SM_VLLM_MODEL=/nonexistent/model.tar.gz: no such archive on this host"
    ]


def test_plan_imports_neither_the_server_nor_aws(tmp_path: Path) -> None:
    """`neuronserve plan` answers in well under a second because it imports no server, HTTP or AWS stack."""
    model = write_model(tmp_path / "m", LLAMA)
    code = (
        "import io, contextlib, sys\n"
        "from neuronserve.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['plan', '--json', '--device', 'cpu'], {{'SM_VLLM_MODEL': {str(model)!r}}}) == 0\n"
        "heavy = ('uvicorn', 'fastapi', 'starlette', 'aiohttp', 'httpx', 'boto3', 'vllm', 'torch')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(src)}, check=True
    )
    assert out.stdout.strip() == "[]", out.stderr
