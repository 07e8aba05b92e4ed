"""Two front workers (NEURONSERVE_FRONT_WORKERS=2) and one supervisor, in the real server before the
stand-in engine with two data-parallel replicas: what must stay global stays global.

Every request here goes on a connection of its own, so SO_REUSEPORT's hash spreads them over both
workers; each answer names its worker (X-Neuronserve-Worker) and each test checks that both answered.
A prompt "standin-hold" keeps its slot STANDIN_HOLD_S at the stand-in, so the limit is filled on
purpose. The drain test ends the module's server and runs last.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.support.server import free_port_run
from tests.support.standin_server import StandinServer, standin_server
from tests.support.workers import alive, clients_on, fresh, spread, wait_for, worker_pids, workers_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LIMIT = 4
HOLD_S = 3.0
SETTINGS = {
    "NEURONSERVE_FRONT_WORKERS": "2",
    "NEURONSERVE_MAX_CONCURRENCY": str(LIMIT),
    "NEURONSERVE_DATA_PARALLEL": "2",
    "NEURON_RT_VISIBLE_CORES": "0,1",
    "SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "true",
    "STANDIN_HOLD_S": str(HOLD_S),
}
HOLD = {"model": "standin", "prompt": "standin-hold", "max_tokens": 1}
SMALL = {"inputs": "hi", "parameters": {"max_new_tokens": 1}}


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinServer]:
    port = str(free_port_run(2))  # the replicas listen on consecutive ports
    with standin_server(
        tmp_path_factory.mktemp("workers"), NEURONSERVE_ENGINE_PORT=port, **SETTINGS
    ) as server:
        yield server


def _holding(
    server: StandinServer, per_worker: int, body: dict[str, object] = HOLD
) -> tuple[list[threading.Thread], dict[str, list[int]]]:
    """`per_worker` clients on each worker sending a held request at once (each on its own connection)."""
    clients = clients_on(server, per_worker)
    out: dict[str, list[int]] = {w: [] for w in clients}

    def send(client: httpx.Client, worker: str) -> None:
        out[worker].append(client.post("/v1/completions", json=body).status_code)

    threads = [threading.Thread(target=send, args=(c, w)) for w, cs in clients.items() for c in cs]
    for t in threads:
        t.start()
    return threads, out


def _in_flight(server: StandinServer) -> float:
    return _families(fresh(server, "GET", "/metrics").text)["neuronserve_in_flight"][0][1]


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The front's families (the stand-in engine's /metrics answer is not Prometheus text)."""
    own = "\n".join(line for line in text.splitlines() if "neuronserve_" in line) + "\n"
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(own)}


def test_both_workers_answer_and_agree_on_ping_and_live(two: StandinServer) -> None:
    pings = spread(two, "GET", "/ping", 20)
    assert {r.status_code for r in pings} == {200}
    lives = spread(two, "GET", "/live", 20)
    assert {r.status_code for r in lives} == {200}
    assert len({r.text for r in lives}) == 1, {r.text for r in lives}  # the same answer from each
    assert workers_of(pings) == workers_of(lives) == {"0", "1"}


def test_sessions_stick_across_workers(two: StandinServer) -> None:
    """A session opened on one worker goes to its replica from every worker; closed on one, it is
    closed on both; new sessions spread over the replicas."""
    opened = [
        fresh(
            two,
            "POST",
            "/invocations",
            json={"requestType": "NEW_SESSION"},
            headers={"x-amzn-sagemaker-session-id": "NEW_SESSION"},
        )
        for _ in range(2)
    ]
    assert [r.status_code for r in opened] == [200, 200]
    homes = {r.headers["x-neuronserve-replica"] for r in opened}
    assert homes == {"0", "1"}, homes  # least outstanding, ties round robin: one on each
    for r in opened:
        sid = r.headers["x-amzn-sagemaker-new-session-id"].split(";")[0]
        used = spread(
            two, "POST", "/invocations", 12, json=SMALL, headers={"x-amzn-sagemaker-session-id": sid}
        )
        assert {u.status_code for u in used} == {200}
        assert {u.headers["x-neuronserve-replica"] for u in used} == {r.headers["x-neuronserve-replica"]}
        assert workers_of(used) == {"0", "1"}
    sid = opened[0].headers["x-amzn-sagemaker-new-session-id"].split(";")[0]
    closed = fresh(
        two,
        "POST",
        "/invocations",
        json={"requestType": "CLOSE"},
        headers={"x-amzn-sagemaker-session-id": sid},
    )
    assert closed.status_code == 200, closed.text
    after = spread(two, "POST", "/invocations", 6, json=SMALL, headers={"x-amzn-sagemaker-session-id": sid})
    assert {a.status_code for a in after} == {400}  # the worker that did not close it knows too
    assert all("unknown or expired session" in a.text for a in after)


def test_the_limit_holds_for_the_container(two: StandinServer) -> None:
    """Three times the limit at once, half on each worker: exactly LIMIT admitted, the rest 429 (the
    worker that admitted fewer refused the rest at once); the in-flight gauge is the container's from
    either worker; a request whose sequences do not fit what is left is 429 from either worker."""
    threads, out = _holding(two, 3 * LIMIT // 2)
    wait_for(lambda: sum(s == 429 for v in out.values() for s in v) >= 2 * LIMIT, 10, "the refusals")
    scrapes = spread(two, "GET", "/metrics", 4)
    assert {_families(s.text)["neuronserve_in_flight"][0][1] for s in scrapes} == {LIMIT}
    for t in threads:
        t.join()
    codes = sorted(s for v in out.values() for s in v)
    assert codes == [200] * LIMIT + [429] * (2 * LIMIT), out
    # LIMIT - 1 held, on both workers: a request of 2 sequences (two prompts) does not fit, on either
    clients = clients_on(two, 2)
    held: list[int] = []

    def hold(client: httpx.Client) -> None:
        held.append(client.post("/v1/completions", json=HOLD).status_code)

    threads = [threading.Thread(target=hold, args=(c,)) for c in [*clients["0"], clients["1"][0]]]
    for t in threads:
        t.start()
    wait_for(lambda: _in_flight(two) == LIMIT - 1, 10, "the holds")
    two_prompts = {"model": "standin", "prompt": ["a", "b"], "max_tokens": 1}
    refused = spread(two, "POST", "/v1/completions", 4, json=two_prompts)
    assert {r.status_code for r in refused} == {429}
    assert all(f"only 1 of {LIMIT} are free" in r.text for r in refused), refused[0].text
    for t in threads:
        t.join()
    assert held == [200] * (LIMIT - 1)


def test_metrics_are_one_view(two: StandinServer) -> None:
    """Requests answered by both workers are counted once each, in a scrape from either worker; each
    family is exposed once."""

    def count(text: str) -> float:
        return sum(
            v
            for labels, v in _families(text).get("neuronserve_requests", [])
            if labels.get("route") == "/invocations" and labels.get("status") == "200"
        )

    before = count(fresh(two, "GET", "/metrics").text)
    sent = spread(two, "POST", "/invocations", 10, json=SMALL)
    assert {r.status_code for r in sent} == {200}
    scrapes = spread(two, "GET", "/metrics", 4)
    for s in scrapes:
        assert count(s.text) == before + len(sent)
        assert len(re.findall(r"^# TYPE neuronserve_requests_total counter$", s.text, re.M)) == 1
        assert _families(s.text)["neuronserve_build_info"][0][1] == 1.0
        assert _families(s.text)["neuronserve_phase"] and 'neuronserve_phase{phase="READY"} 1.0' in s.text
    routed = {
        labels["replica"]: v for labels, v in _families(scrapes[0].text)["neuronserve_replica_requests"]
    }
    assert sum(routed.values()) >= len(sent)


def test_drain_loses_nothing_and_exits_0(two: StandinServer) -> None:
    """SIGTERM with held requests on both workers: /ping turns 503 DRAINING on both, a new request is
    refused, every held request finishes 200, the supervisor exits 0 and no worker is left."""
    pids = worker_pids(two)
    threads, out = _holding(two, LIMIT // 2)
    wait_for(lambda: _in_flight(two) == LIMIT, 10, "the holds")
    two.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: fresh(two, "GET", "/ping").status_code == 503, 5, "/ping 503")
    pings = spread(two, "GET", "/ping", 6)
    assert {(r.status_code, r.json()["phase"]) for r in pings} == {(503, "DRAINING")}
    refused = spread(two, "POST", "/invocations", 4, json=SMALL)
    assert {r.status_code for r in refused} == {503}
    for t in threads:
        t.join()
    assert out == {"0": [200] * (LIMIT // 2), "1": [200] * (LIMIT // 2)}  # both workers' held requests
    assert two.proc.wait(timeout=30) == 0
    assert "drained: no request in flight" in two.log()
    time.sleep(0.2)
    assert not any(alive(pid) for pid in pids.values()), pids
