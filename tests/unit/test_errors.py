"""The error types (errors.py): what each means to the CLI (its exit code) and what a ConfigError carries
(the variables it names), which every refusal in the code base relies on."""

from __future__ import annotations

import pytest

from neuronserve.deploy.errors import DeployError
from neuronserve.errors import ConfigError, EngineError, NeuronServeError, StageError


def test_exit_codes() -> None:
    assert ConfigError("x").exit_code == 2  # nothing was started
    for err in (StageError("x"), EngineError("x"), DeployError("x"), NeuronServeError("x")):
        assert err.exit_code == 1


def test_the_message_is_the_whole_text_and_the_variables_are_kept() -> None:
    err = ConfigError("SM_VLLM_X=1 is wrong: set 2", ("SM_VLLM_X", "--flag"))
    assert str(err) == "SM_VLLM_X=1 is wrong: set 2"
    assert err.variables == ("SM_VLLM_X", "--flag")
    assert ConfigError("no names").variables == ()


@pytest.mark.parametrize("kind", [ConfigError, StageError, EngineError, DeployError])
def test_every_error_is_caught_as_the_base(kind: type[NeuronServeError]) -> None:
    with pytest.raises(NeuronServeError, match=r"^boom$"):
        raise kind("boom")
