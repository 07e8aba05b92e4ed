"""Request ids (front/requestid.py): a client id is echoed only when it is safe to log and send on,
SageMaker's inference id is the fallback, and every engine call gets an id of its own."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from neuronserve.front.requestid import MAX_LEN, REQUEST_ID_KEY, engine_id, request_id


def _scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "headers": list(headers)}


@pytest.mark.parametrize(
    "rid",
    ["abc", "0f8fad5b-d9cb-469f-a165-70867728950e", "1-5759e988:bd862e3f.x_y", "a" * MAX_LEN],
)
def test_a_safe_client_id_is_kept(rid: str) -> None:
    scope = _scope((b"x-request-id", rid.encode()))
    assert request_id(scope) == rid
    assert scope[REQUEST_ID_KEY] == rid


def test_x_request_id_wins_over_the_sagemaker_id_in_any_order() -> None:
    sm, mine = (b"x-amzn-sagemaker-inference-id", b"sm-1"), (b"x-request-id", b"mine")
    assert request_id(_scope(sm, mine)) == "mine"
    assert request_id(_scope(mine, sm)) == "mine"
    assert request_id(_scope(sm)) == "sm-1"


def test_blanks_around_an_id_are_dropped() -> None:
    assert request_id(_scope((b"x-request-id", b"  id-7 "))) == "id-7"


@pytest.mark.parametrize("raw", [b"a b", b"x\nforged=1", b"a" * (MAX_LEN + 1), b"caf\xe9", b"k=v", b"   "])
def test_an_unsafe_id_is_replaced_and_the_replacement_logged(
    raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="neuronserve.front"):
        rid = request_id(_scope((b"x-request-id", raw)))
    assert len(rid) == 32 and int(rid, 16) >= 0  # a uuid4 hex
    assert rid.encode() != raw.strip()
    assert [r.getMessage() for r in caplog.records if rid in r.getMessage()], caplog.text


def test_no_header_gets_a_new_id_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="neuronserve.front"):
        first, second = request_id(_scope()), request_id(_scope())
    assert first != second
    assert caplog.records == []


def test_the_id_is_chosen_once_per_scope() -> None:
    scope = _scope((b"x-request-id", b"bad id"))
    assert request_id(scope) == request_id(scope)
    scope[REQUEST_ID_KEY] = "set-by-gate"
    assert request_id(scope) == "set-by-gate"


def test_engine_ids_are_unique_per_call_and_keep_the_client_id() -> None:
    ids = [engine_id("same") for _ in range(100)]
    assert len(set(ids)) == 100
    assert all(i.startswith("same-") and int(i.removeprefix("same-"), 16) > 0 for i in ids)


def test_front_workers_never_give_the_engine_one_id() -> None:
    """Two processes with one client id: without their own ranges their engine ids collide (both count
    from 1); numbered as front workers are (serve/worker.py), they never do."""
    import subprocess
    import sys

    code = (
        "import sys; from neuronserve.front import requestid as r\n"
        "if sys.argv[1] != '-': r.number_engine_calls_from((int(sys.argv[1]) + 1) << 40)\n"
        "print(' '.join(r.engine_id('same') for _ in range(1000)))\n"
    )

    def ids(worker: str) -> set[str]:
        out = subprocess.run([sys.executable, "-c", code, worker], capture_output=True, text=True, check=True)
        return set(out.stdout.split())

    assert ids("-") & ids("-")  # one process's numbering, twice: the same ids
    zero, one = ids("0"), ids("1")
    assert len(zero) == len(one) == 1000 and not zero & one
    assert all(i.startswith("same-") for i in zero | one)
