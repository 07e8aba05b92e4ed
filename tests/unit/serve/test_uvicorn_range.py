"""serve/connections.py subclasses uvicorn's httptools protocol and relies on its private parts (its
`cycle`, `parser`, `scope`, `headers`, `pipeline` and `on_*` callbacks; corking replaces its transport):
pyproject.toml holds uvicorn to the one minor version that code is written against, and this test
fails when the installed uvicorn leaves that range, or when the range is widened past one minor."""

from __future__ import annotations

import tomllib
from importlib.metadata import version

from packaging.requirements import Requirement
from packaging.version import Version
from tests.support.server import REPO

from neuronserve.serve.connections import _GuardedProtocol


def _uvicorn() -> Requirement:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "uvicorn"]
    return req


def test_the_range_is_one_minor_version() -> None:
    spec = _uvicorn().specifier
    lows = [Version(s.version) for s in spec if s.operator == ">="]
    highs = [Version(s.version) for s in spec if s.operator == "<"]
    assert len(lows) == 1 and len(highs) == 1, f"uvicorn{spec}: want >=X.Y,<X.Y+1"
    low, high = lows[0], highs[0]
    assert (high.major, high.minor) == (low.major, low.minor + 1) and high.micro == 0, spec


def test_the_installed_uvicorn_is_in_the_range() -> None:
    installed = version("uvicorn")
    spec = _uvicorn().specifier
    assert spec.contains(installed), (
        f"uvicorn {installed} is installed, but serve/connections.py is written against uvicorn{spec}: "
        "read its subclass against the new HttpToolsProtocol, run tests/integration/serve and "
        "tests/integration/test_hostile_*.py, then move the range in pyproject.toml"
    )


def test_what_the_subclass_relies_on_is_there() -> None:
    """The parts of uvicorn's protocol the subclass calls or reads (an attribute error at the first
    request otherwise)."""
    for name in ("on_message_begin", "on_url", "on_header", "on_headers_complete", "on_body"):
        assert callable(getattr(_GuardedProtocol, name, None)), name
    for name in ("data_received", "connection_made", "connection_lost", "on_response_complete"):
        assert callable(getattr(_GuardedProtocol, name, None)), name
