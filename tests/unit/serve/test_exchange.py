"""The fast path's exchange (serve/exchange.py) stands in uvicorn's `cycle` slot: every attribute
uvicorn's protocol reads or sets there, in the methods that can meet an exchange, is one it has.

Read from uvicorn's installed source, so a uvicorn that starts reading another attribute of its
cycle in those methods fails here (the fast path would raise AttributeError on a live connection)."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from neuronserve.serve.exchange import Exchange

# The protocol's methods that run while an exchange is in the slot: the client leaving, a pipelined
# request's head arriving, the answer's end, a shutdown (serve/fastpath.py's docstring, with lines).
_METHODS = ("connection_lost", "on_headers_complete", "on_response_complete", "shutdown")


def _cycle_attributes(method: str) -> set[str]:
    """The names the method reads or sets on `self.cycle` or on a local bound to it."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(HttpToolsProtocol, method))))
    aliases = {"cycle"}
    for node in ast.walk(tree):  # `existing_cycle = self.cycle`
        if isinstance(node, ast.Assign) and ast.unparse(node.value) == "self.cycle":
            aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        direct = isinstance(owner, ast.Attribute) and owner.attr == "cycle"
        aliased = isinstance(owner, ast.Name) and owner.id in aliases - {"cycle"}
        if direct or aliased:
            names.add(node.attr)
    return names


@pytest.mark.parametrize("method", _METHODS)
def test_every_attribute_uvicorn_uses_on_its_cycle_is_the_exchanges(method: str) -> None:
    used = _cycle_attributes(method)
    exchange = Exchange({}, b"", True, 0.0)
    assert {name for name in used if not hasattr(exchange, name)} == set()


def test_the_methods_read_the_cycle_at_all() -> None:
    """The reading above finds something (it would pass vacuously on a renamed slot)."""
    found = set().union(*(_cycle_attributes(m) for m in _METHODS))
    assert {"response_complete", "disconnected", "message_event", "keep_alive"} <= found


def test_what_uvicorn_sets_there_is_taken() -> None:
    exchange = Exchange({}, b"", True, 0.0)
    exchange.disconnected = True
    exchange.message_event.set()  # uvicorn wakes its cycle's reader: the fast path has none
    exchange.keep_alive = False
    assert not exchange.complete
    exchange.response_complete = True
    assert exchange.complete
