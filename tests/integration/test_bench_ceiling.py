"""The front-ceiling benchmark's parts against the real server (bench/bench_ceiling.py, docs/PERFORMANCE.md).

The synthetic engine (bench/synth_engine) is started by the real `neuronserve serve --device neuron` in
each dialect; every work kind must answer in full both ways (the engine directly and through the front),
with the events the benchmark divides CPU by, and the CPU reading must tell the front from the engine.
No vLLM and no wrk: a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.ceiling import procs, rounds, serve
from bench.ceiling.kinds import KINDS, STREAM_TOKENS


@pytest.mark.parametrize("dialect", ["tgi", "lmi"])
def test_every_kind_answers_in_full_both_ways(tmp_path: Path, dialect: str) -> None:
    server = serve.start(tmp_path, dialect, serve.Options(dialect=dialect))
    try:
        roles = procs.split(server.pid)
        assert server.pid in roles.front
        assert roles.engine_pid is not None and roles.engine_pid not in roles.front
        for kind in (k for k in KINDS.values() if k.dialect == dialect):
            direct = rounds.calibrated(kind, server, "direct")  # SystemExit unless 200 with every event
            front = rounds.calibrated(kind, server, "front")
            if kind.stream:
                assert direct.events == front.events == STREAM_TOKENS
                assert direct.body.startswith(b"data: {")  # the engine's own OpenAI SSE
        if dialect == "lmi":  # LMI's default framing is JSON lines, TGI's (and OpenAI's) SSE
            assert front.body.startswith(b'{"token"')
        cpu = procs.cpu(server.pid)
        assert cpu.front_s > 0
        assert cpu.engine_s > 0
    finally:
        server.stop()
