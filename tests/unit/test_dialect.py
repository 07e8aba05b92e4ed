"""Strict model names: which OpenAI bodies the one served model answers (the dialect a configuration
selects is tested with config/serve.py, tests/unit/config/test_serve.py)."""

from __future__ import annotations

import pytest

from neuronserve.front.app import served_model_body
from neuronserve.front.errors import FrontError
from neuronserve.front.state import ServerState
from neuronserve.types import ServeOptions


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
