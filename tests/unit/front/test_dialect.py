"""Which generate dialect and LMI stream format a configuration selects; strict model names."""

from __future__ import annotations

import pytest

from neuronserve.config.serve import parse_dialect, parse_serve
from neuronserve.errors import ConfigError
from neuronserve.front.app import served_model_body
from neuronserve.front.errors import FrontError
from neuronserve.front.state import ServerState
from neuronserve.types import ServeOptions


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


def _state(*names: str) -> ServerState:
    state = ServerState()
    state.model_names = list(names)
    return state


@pytest.mark.parametrize("body", [b'{"model": "tgi", "prompt": "x"}', b'{"prompt": "x"}', b'{"model": ""}'])
def test_other_model_names_are_served_by_the_one_model(body: bytes) -> None:
    out = served_model_body(body, _state("m"), ServeOptions())
    assert out is not None and b'"model": "m"' in out


@pytest.mark.parametrize(
    ("body", "state", "opts"),
    [
        (b'{"model": "tgi"}', _state("m"), ServeOptions(strict_model_name=True)),  # strict: vLLM's 404
        (b'{"model": "tgi"}', _state("m", "lora"), ServeOptions()),  # several models: the name matters
        (b'{"model": "m"}', _state("m"), ServeOptions()),  # already right: forwarded as sent
    ],
)
def test_bodies_left_alone(body: bytes, state: ServerState, opts: ServeOptions) -> None:
    assert served_model_body(body, state, opts) is None


@pytest.mark.parametrize("body", [b"not json", b"\x80", b"[1]", b"[" * 100 + b"]" * 100, b"[" * 100_000])
def test_bodies_that_are_not_objects_are_400(body: bytes) -> None:
    with pytest.raises(FrontError) as err:
        served_model_body(body, _state("m"), ServeOptions(strict_model_name=True))
    assert err.value.status == 400
