"""The floor benchmark's relays against the real engine (bench/bench_floor.py, docs/PERFORMANCE.md,
"How far the front is from the floor").

A floor that answered less than the engine (a truncated stream, an error, a lost keep-alive) would
make the front look worse than it is; so each relay (raw, asgi, and asgi inside the real gate) must
give every work kind of the TGI serve in full: the engine's status, a body of the engine's size and
every event, on a keep-alive connection twice in a row (the second through the relay's pooled engine
connection). No wrk.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bench import bench_floor
from bench.ceiling import calibrate, procs, serve
from bench.ceiling.kinds import KINDS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[serve.Serve]:
    srv = serve.start(tmp_path_factory.mktemp("floor"), "serve-tgi", serve.Options())
    yield srv
    srv.stop()


@pytest.mark.parametrize("mode", ["raw", "asgi", "gate"])
def test_each_relay_gives_every_kind_what_the_engine_gives(
    server: serve.Serve, mode: str, tmp_path: Path
) -> None:
    proc, port = bench_floor.start_relay(server.engine_port, mode, tmp_path)
    try:
        for kind in (k for k in KINDS.values() if k.dialect == "tgi"):
            body = kind.direct_body(server.model)
            direct = calibrate.request(server.engine_port, kind.direct_path, body)
            for _ in range(2):
                relayed = calibrate.request(port, kind.direct_path, body)
                assert relayed.status == direct.status == 200, (kind.name, relayed.body[:300])
                assert relayed.events == direct.events, kind.name
                if not kind.stream:  # a stream's framing may differ in chunk sizes, never in events
                    assert len(relayed.body) == len(direct.body), kind.name
        assert procs.cpu_of(proc.pid) > 0
    finally:
        proc.terminate()
        proc.wait()  # (its access lines are written by its exit at the latest: logbatch.BatchHandler)
    if mode == "gate":  # the gate really ran: one access line per request, as the serve writes it
        log = (tmp_path / "relay-gate.log").read_text()
        assert log.count("POST /v1/completions status=200") == 2 * sum(
            1 for k in KINDS.values() if k.dialect == "tgi" and k.direct_path == "/v1/completions"
        )


def test_the_generate_relay_answers_a_tgi_body_as_the_front_does(server: serve.Serve, tmp_path: Path) -> None:
    """`gen` serves the client's TGI body with the front's Generator: the front's answer, in size and
    events, for each TGI-body kind, and one access line per request from its gate."""
    proc, port = bench_floor.start_relay(server.engine_port, "gen", tmp_path, server.model)
    tgi_kinds = [k for k in KINDS.values() if "gen" in bench_floor.sides(k)]
    try:
        for kind in tgi_kinds:
            body = kind.front_body(server.model)
            front = calibrate.request(server.port, kind.front_path, body)
            relayed = calibrate.request(port, kind.front_path, body)
            assert relayed.status == front.status == 200, (kind.name, relayed.body[:300])
            assert relayed.events == front.events, kind.name
            if not kind.stream:
                assert relayed.body == front.body, kind.name
    finally:
        proc.terminate()
        proc.wait()
    log = (tmp_path / "relay-gen.log").read_text()
    assert log.count("POST /invocations status=200") == len(tgi_kinds)


@pytest.mark.parametrize("mode", ["one", "oneraw"])
def test_the_one_piece_relay_answers_a_tgi_body_as_the_front_does(
    server: serve.Serve, tmp_path: Path, mode: str
) -> None:
    """`one` takes the gate's and the generate flow's steps in one coroutine (`oneraw`: the same below
    uvicorn): for a non-streamed TGI body, the front's answer byte for byte, twice, and an access line
    for each."""
    proc, port = bench_floor.start_relay(server.engine_port, mode, tmp_path, server.model)
    (kind,) = [k for k in KINDS.values() if mode in bench_floor.sides(k)]
    assert kind.name == "tgi-plain"
    try:
        body = kind.front_body(server.model)
        front = calibrate.request(server.port, kind.front_path, body)
        for _ in range(2):
            relayed = calibrate.request(port, kind.front_path, body)
            assert relayed.status == front.status == 200, relayed.body[:300]
            assert relayed.body == front.body
    finally:
        proc.terminate()
        proc.wait()
    log = (tmp_path / f"relay-{mode}.log").read_text()
    assert log.count("POST /invocations status=200") == 2
    assert "tokens_in=" in log and "tokens_out=16" in log
