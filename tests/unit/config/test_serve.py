"""config/serve.py: the front server's options (SAGEMAKER_* / NEURONSERVE_*) and the generate dialect,
each read through its settings-table row."""

from __future__ import annotations

import pytest

from neuronserve.config.serve import parse_dialect, parse_serve
from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError


def test_serve_options() -> None:
    s = parse_settings(
        {
            "SAGEMAKER_BIND_TO_PORT": "9090",
            "NEURONSERVE_ENGINE_PORT": "9191",
            "SAGEMAKER_MAX_PAYLOAD_IN_MB": "12",
            "NEURONSERVE_MAX_CONCURRENCY": "0",
            "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "90",
            "NEURONSERVE_DRAIN_GRACE_S": "5",
            "SAGEMAKER_STARTUP_TIMEOUT": "1800",
            "NEURONSERVE_WORK_DIR": "/scratch",
        }
    )
    assert (s.serve.port, s.engine_port, s.serve.max_payload_mb, s.serve.max_concurrency) == (
        9090,
        9191,
        12.0,
        0,
    )
    assert (s.serve.request_timeout_s, s.serve.drain_grace_s, s.serve.startup_timeout_s) == (
        90.0,
        5.0,
        1800.0,
    )
    assert s.work_dir == "/scratch"
    d = parse_settings({})
    assert (d.serve.port, d.engine_port, d.serve.max_payload_mb, d.serve.max_concurrency) == (
        8080,
        8081,
        6.0,
        256,
    )
    assert d.serve.startup_timeout_s is None and d.work_dir == "/tmp/neuronserve"


@pytest.mark.parametrize(
    ("props", "dialect", "stream_format"),
    [
        ({"option.output_formatter": "SSE"}, "lmi", "sse"),
        ({"option.tgi_compat": "true"}, "tgi", "jsonlines"),
        ({"option.model_id": "m"}, "lmi", "jsonlines"),
    ],
)
def test_serving_properties_decide_the_generate_dialect(
    props: dict[str, str], dialect: str, stream_format: str
) -> None:
    """A serving.properties means an LMI deployment: /invocations speaks LMI's shapes, in the stream
    format its option.output_formatter names, unless option.tgi_compat=true (the same as OPTION_*)."""
    s = parse_settings({"SM_VLLM_MODEL": "m"}, serving_properties=props)
    assert (s.serve.dialect, s.serve.lmi_stream_format) == (dialect, stream_format)
    plain = parse_settings({"SM_VLLM_MODEL": "m"})
    assert (plain.serve.dialect, plain.serve.lmi_stream_format) == ("tgi", "jsonlines")


@pytest.mark.parametrize(
    ("env", "props", "want"),
    [
        ({}, {}, ("tgi", "jsonlines")),
        ({"HF_MODEL_ID": "m"}, {}, ("tgi", "jsonlines")),
        ({"OPTION_MODEL_ID": "m"}, {}, ("lmi", "jsonlines")),
        ({}, {"option.model_id": "m"}, ("lmi", "jsonlines")),  # a serving.properties
        ({"OPTION_MODEL_ID": "m", "OPTION_TGI_COMPAT": "true"}, {}, ("tgi", "jsonlines")),
        ({"OPTION_MODEL_ID": "m"}, {"option.tgi_compat": "true"}, ("tgi", "jsonlines")),
        ({"OPTION_MODEL_ID": "m", "OPTION_TGI_COMPAT": "false"}, {}, ("lmi", "jsonlines")),
        ({"OPTION_MODEL_ID": "m", "OPTION_OUTPUT_FORMATTER": "sse"}, {}, ("lmi", "sse")),
        ({"OPTION_MODEL_ID": "m", "NEURONSERVE_GENERATE_DIALECT": "tgi"}, {}, ("tgi", "jsonlines")),
        ({"NEURONSERVE_GENERATE_DIALECT": "LMI"}, {}, ("lmi", "jsonlines")),
    ],
)
def test_dialect(env: dict[str, str], props: dict[str, str], want: tuple[str, str]) -> None:
    assert parse_dialect(env, props) == want


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"NEURONSERVE_GENERATE_DIALECT": "openai"}, "NEURONSERVE_GENERATE_DIALECT"),
        ({"OPTION_TGI_COMPAT": "yes"}, "OPTION_TGI_COMPAT"),
        ({"OPTION_OUTPUT_FORMATTER": "json"}, "OPTION_OUTPUT_FORMATTER"),
        ({"NEURONSERVE_STRICT_MODEL_NAME": "maybe"}, "NEURONSERVE_STRICT_MODEL_NAME"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], var: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_serve(env)
    assert var in str(err.value)


def test_serve_options_carry_the_dialect() -> None:
    opts, _ = parse_serve({"OPTION_MODEL_ID": "m", "NEURONSERVE_STRICT_MODEL_NAME": "true"})
    assert opts.dialect == "lmi" and opts.strict_model_name


def test_every_serve_row_is_read_and_every_option_has_a_row() -> None:
    """A ServeOptions attribute gets its default from its row (types.py) and its value through it
    (serve.py reads them in a fixed order): a row outside that order would be silently skipped."""
    from dataclasses import fields

    from neuronserve.config import serve
    from neuronserve.config.table import defaults, rows_of
    from neuronserve.types import ServeOptions

    rows = set(rows_of("serve"))
    assert rows == {"port", "dialect", "lmi_stream_format", *serve._READ_ORDER}
    assert {f.name for f in fields(ServeOptions)} == rows | {"host"}
    assert ServeOptions() == ServeOptions(**defaults("serve"))


@pytest.mark.parametrize(
    ("env", "props", "origin"),
    [
        ({"OPTION_TGI_COMPAT": "Yes"}, {}, "OPTION_TGI_COMPAT"),
        ({}, {"option.tgi_compat": "1"}, "serving.properties option.tgi_compat"),
    ],
)
def test_a_bad_tgi_compat_is_named_by_where_it_came_from(
    env: dict[str, str], props: dict[str, str], origin: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_dialect(env, props)
    value = (env or props).popitem()[1].lower()
    assert str(err.value) == f"{origin}={value!r} is not a boolean: use true or false"
    assert err.value.variables == (origin,)


def test_equal_ports_are_refused_with_the_port_to_use() -> None:
    with pytest.raises(ConfigError) as err:
        parse_serve({"SAGEMAKER_BIND_TO_PORT": "9000", "NEURONSERVE_ENGINE_PORT": "9000"})
    assert str(err.value) == (
        "NEURONSERVE_ENGINE_PORT=9000 equals the front port SAGEMAKER_BIND_TO_PORT=9000: "
        "set NEURONSERVE_ENGINE_PORT=9001"
    )
    assert err.value.variables == ("NEURONSERVE_ENGINE_PORT", "SAGEMAKER_BIND_TO_PORT")


@pytest.mark.parametrize(
    ("raw", "host"),
    [("", "0.0.0.0"), ("127.0.0.1", "127.0.0.1"), (" ::1 ", "::1"), ("0:0::0", "::")],
)
def test_the_listen_address(raw: str, host: str) -> None:
    """NEURONSERVE_HOST: scripts/serve-local listens on 127.0.0.1, as the README shows; containers on
    every interface."""
    assert parse_serve({"NEURONSERVE_HOST": raw} if raw else {})[0].host == host


@pytest.mark.parametrize("raw", ["localhost", "127.0.0.256", "0.0.0.0:8080", "http://127.0.0.1"])
def test_a_listen_address_that_is_no_ip_address_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"NEURONSERVE_HOST=.* is not an IP address") as err:
        parse_serve({"NEURONSERVE_HOST": raw})
    assert err.value.variables == ("NEURONSERVE_HOST",)


@pytest.mark.parametrize(
    ("raw", "want"), [("", None), ("1", 1), ("4", 4), (" 8 ", 8), ("auto", None), ("AUTO", None)]
)
def test_front_workers(raw: str, want: int | None) -> None:
    opts, _ = parse_serve({"NEURONSERVE_FRONT_WORKERS": raw})
    assert opts.front_workers == want


@pytest.mark.parametrize("raw", ["0", "-1", "two", "1.5", "2e1", "auto2", "²"])
def test_a_malformed_front_workers_names_the_variable(raw: str) -> None:
    with pytest.raises(
        ConfigError, match=r"NEURONSERVE_FRONT_WORKERS=.* must be a whole number >= 1 or auto"
    ):
        parse_serve({"NEURONSERVE_FRONT_WORKERS": raw})
