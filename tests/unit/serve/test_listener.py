"""The front server's connection settings: read from their rows, kept within the open-file limit."""

from __future__ import annotations

import resource

import pytest

from neuronserve.errors import ConfigError
from neuronserve.serve import listener
from neuronserve.serve.connections import PING_RESERVE, ConnectionLimits


def test_defaults_and_overrides_come_from_the_rows() -> None:
    assert listener.connection_limits({}) == ConnectionLimits(10.0, 65536, 1024)
    assert listener.body_timeout_s({}) == 30.0
    env = {
        "NEURONSERVE_HEADER_TIMEOUT_S": "2.5",
        "NEURONSERVE_MAX_HEADER_BYTES": "8192",
        "NEURONSERVE_MAX_CONNECTIONS": "50",
        "NEURONSERVE_BODY_TIMEOUT_S": "7",
    }
    assert listener.connection_limits(env) == ConnectionLimits(2.5, 8192, 50)
    assert listener.body_timeout_s(env) == 7.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NEURONSERVE_HEADER_TIMEOUT_S", "0"),
        ("NEURONSERVE_MAX_HEADER_BYTES", "0"),
        ("NEURONSERVE_MAX_CONNECTIONS", "many"),
    ],
)
def test_bad_values_name_their_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        listener.connection_limits({name: value})
    assert name in str(info.value)


def test_connections_are_kept_within_half_the_file_limit() -> None:
    limits = ConnectionLimits(10.0, 65536, 1024)
    assert listener.fit_to_files(limits, 1 << 20) == limits
    fitted = listener.fit_to_files(limits, 1024)
    assert fitted.max_connections == 512 - PING_RESERVE
    assert listener.fit_to_files(limits, 64).max_connections == listener.MIN_CONNECTIONS


def test_the_soft_file_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        now = listener.raise_file_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == now
        assert hard in (now, resource.RLIM_INFINITY)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
