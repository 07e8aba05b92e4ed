"""NEURONSERVE_LOG_FORMAT: one JSON object per line with the access-log fields; text stays the default."""

from __future__ import annotations

import json
import logging

import pytest

from neuronserve import logsetup
from neuronserve.errors import ConfigError


@pytest.fixture(autouse=True)
def _restore() -> object:
    yield
    logsetup.setup("text")


def test_json_lines_parse_and_carry_the_access_fields(capsys: pytest.CaptureFixture[str]) -> None:
    logsetup.setup("json")
    logging.getLogger("neuronserve.access").info(
        "POST /invocations status=200",
        extra={
            "request_id": "r1",
            "route": "/invocations",
            "status": 200,
            "latency_ms": 12.5,
            "tokens": {"prompt": 3},
        },
    )
    logging.getLogger("neuronserve.serve").warning('quote " and\nnewline')
    print(logsetup.engine_line('INFO engine says "hi"'), end="")
    logsetup.fatal("the engine exited with code 1; its last lines:", ["a", "b"])
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]  # every line is one object
    assert len(lines) == 3
    access, warning, engine = lines
    assert access["logger"] == "neuronserve.access" and access["level"] == "INFO"
    assert {k: access[k] for k in ("request_id", "route", "status", "latency_ms")} == {
        "request_id": "r1",
        "route": "/invocations",
        "status": 200,
        "latency_ms": 12.5,
    }
    assert access["time"].endswith("Z") and access["message"] == "POST /invocations status=200"
    assert warning["message"] == 'quote " and\\x0anewline'  # escaped: one event, one line, both formats
    assert engine == {"time": engine["time"], "source": "engine", "message": 'INFO engine says "hi"'}
    final = json.loads(err)
    assert final["level"] == "ERROR" and final["engine_last_lines"] == ["a", "b"]


def test_text_is_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert logsetup.parse_format({}) == "text"
    logsetup.setup(logsetup.parse_format({}))
    print(logsetup.engine_line("x"), end="")
    logsetup.fatal("boom", ["last"])
    out, err = capsys.readouterr()
    assert out == "[engine] x\n"
    assert err == "neuronserve serve: error: boom\n  | last\n"


def test_unknown_format_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        logsetup.parse_format({"NEURONSERVE_LOG_FORMAT": "yaml"})
    assert "NEURONSERVE_LOG_FORMAT" in str(info.value) and info.value.variables == ("NEURONSERVE_LOG_FORMAT",)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_control_characters_never_make_a_second_line(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A client's bytes in a message (a decoded %0A path, an id, a model name) cannot forge a line, in
    either format; the text stays readable (each control character becomes a backslash escape)."""
    logsetup.setup(fmt)
    hostile = "GET /a\nFAKE INFO neuronserve.access: forged\r\x1b[31m\x85\u2028end"
    logging.getLogger("neuronserve.access").info("%s", hostile, extra={"request_id": "r\n2"})
    print(logsetup.engine_line("engine\rline\x00"), end="")
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 2, lines
    message = json.loads(lines[0])["message"] if fmt == "json" else lines[0]
    assert "GET /a\\x0aFAKE INFO neuronserve.access: forged\\x0d\\x1b[31m\\x85\\u2028end" in message
    if fmt == "json":
        assert json.loads(lines[0])["request_id"] == "r\\x0a2"
        assert json.loads(lines[1])["message"] == "engine\\x0dline\\x00"
    else:
        assert lines[1] == "[engine] engine\\x0dline\\x00"
