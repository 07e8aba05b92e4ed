"""SIGTERM drains without losing a request; an engine death fails fast. Runs after the shared
server's other tests (it ends servers), in the order of tests/integration/conftest.py."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from tests.support.s3server import ServerControl
from tests.support.server import Server, ServerPool, base_env, engine_core_pid, frozen, start_server

from neuronserve.front.sse import SSEParser

from ..conftest import model_from_s3

pytestmark = [pytest.mark.integration, pytest.mark.after_shared_server(2)]


def _stream(url: str, results: list[tuple[str, object]], started: threading.Event) -> None:
    body = {"prompt": "hello", "max_tokens": 200, "ignore_eos": True, "stream": True}
    events: list[str] = []
    with httpx.stream("POST", f"{url}/invocations", json=body, timeout=120) as r:
        started.set()  # the 200 and its headers: the front took it and the engine's API answered
        parser = SSEParser()
        for chunk in r.iter_raw():
            events += parser.feed(chunk)
        events += parser.close()
    results.append(("stream", (r.status_code, events)))


def _plain(url: str, results: list[tuple[str, object]], sent: threading.Event) -> None:
    def mark(_request: httpx.Request) -> None:
        sent.set()

    with httpx.Client(timeout=120, event_hooks={"request": [mark]}) as client:
        r = client.post(f"{url}/invocations", json={"prompt": "hello", "max_tokens": 300, "ignore_eos": True})
    results.append(("plain", (r.status_code, r.json())))


def test_sigterm_drains_in_flight_requests(server: Server, server_pool: ServerPool) -> None:
    """Four requests are provably in flight when SIGTERM comes, and all four finish.

    The engine's EngineCore is frozen first (its API server still answers), so no request can finish
    before the signal, however fast the machine: the streams' 200s show they reached the engine, no
    answer has come back, and the front itself reports 4 requests in flight as it starts draining.
    Each of them then completes in full once the engine runs again; a request sent after the signal
    is refused.
    """
    owned = server_pool.take("shared")
    assert owned is server
    results: list[tuple[str, object]] = []
    started = [threading.Event() for _ in range(3)]
    plain_sent = threading.Event()
    threads = [threading.Thread(target=_plain, args=(server.url, results, plain_sent))]
    threads += [threading.Thread(target=_stream, args=(server.url, results, ev)) for ev in started]
    with frozen(engine_core_pid(server)):
        threads[0].start()
        assert plain_sent.wait(timeout=10)  # the plain request goes first, the streams after it
        for t in threads[1:]:
            t.start()
        for ev in started:
            assert ev.wait(timeout=30)
        assert results == [] and all(t.is_alive() for t in threads)  # nothing could finish
        server.proc.send_signal(signal.SIGTERM)
        ping = httpx.get(f"{server.url}/ping", timeout=2)
        deadline = time.monotonic() + 5  # the signal is handled on the front's loop: a moment later
        while ping.status_code == 200 and time.monotonic() < deadline:
            ping = httpx.get(f"{server.url}/ping", timeout=2)
        assert ping.status_code == 503 and ping.json()["phase"] == "DRAINING", ping.text
        assert ping.json().get("detail") == "4 request(s) in flight", ping.text
        late = httpx.post(f"{server.url}/invocations", json={"prompt": "hi"}, timeout=5)
        assert late.status_code == 503 and "draining" in late.json()["error"]["message"]
        assert results == []  # still in flight when the signal came and after it
    code = server.proc.wait(timeout=30)
    for t in threads:
        t.join(timeout=30)
    assert code == 0
    assert len(results) == 4
    for kind, (status, payload) in results:  # type: ignore[misc]
        assert status == 200, payload
        if kind == "stream":
            assert payload[-1] == "[DONE]"
            text_chunks = [json.loads(e) for e in payload[:-1]]
            assert any(c["choices"] and c["choices"][0]["finish_reason"] == "length" for c in text_chunks)
        else:
            assert payload["usage"]["completion_tokens"] == 300
    with pytest.raises(ProcessLookupError):
        os.kill(server.engine_pid(), 0)
    server.stop()


def _in_flight_answer(url: str, body: dict[str, object], out: dict[str, object]) -> None:
    """One request; records (seconds from the kill, status, the last SSE data line or the JSON body)."""
    try:
        with httpx.stream("POST", f"{url}/invocations", json=body, timeout=30) as r:
            out["headers"] = r.status_code  # a stream's 200 is on the wire before its first token
            lines = [line for line in r.iter_lines() if line.strip()]
        out["status"] = r.status_code
        out["last"] = lines[-1] if lines else ""
    except httpx.TransportError as err:
        out["status"] = -1
        out["last"] = repr(err)
    out["at"] = time.monotonic()


def test_engine_death_under_load_fails_fast_with_json_logs(
    server_pool: ServerPool, tiny_model: Path, tmp_path: Path
) -> None:
    """The engine is SIGKILLed with requests in flight. Lost: exactly those requests, each told so
    with a 5xx (a stream, already 200, gets an in-band error event); nothing else is served later.

    Runs with NEURONSERVE_LOG_FORMAT=json, so the same server also checks that every line of the
    log, the engine's relayed lines and the final error included, is one JSON object.
    """
    env = base_env(tiny_model, tmp_path / "work", SM_VLLM_MAX_MODEL_LEN="256", NEURONSERVE_LOG_FORMAT="json")
    server = server_pool.get("victim", env)
    server_pool.take("victim")
    try:
        assert httpx.get(f"{server.url}/ping").status_code == 200
        answers: list[dict[str, object]] = [{}, {}]
        bodies = [
            {"prompt": "hello", "max_tokens": 200, "ignore_eos": True},
            {"prompt": "hello", "max_tokens": 200, "ignore_eos": True, "stream": True},
        ]
        with frozen(engine_core_pid(server)):  # the requests stay in flight, however fast the machine
            threads = [
                threading.Thread(target=_in_flight_answer, args=(server.url, b, a), daemon=True)
                for b, a in zip(bodies, answers, strict=True)
            ]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 10
            while "neuronserve_in_flight 2.0" not in httpx.get(f"{server.url}/metrics").text:
                assert time.monotonic() < deadline, "the two requests never got in flight"
                time.sleep(0.05)
            # In flight at the front is not yet streaming: the kill must come after the stream's 200,
            # or the stream is (rightly) refused before it started, which is the plain request's case.
            while "headers" not in answers[1]:
                assert time.monotonic() < deadline, "the stream never got its 200"
                time.sleep(0.02)
            os.kill(server.engine_pid(), signal.SIGKILL)  # the API process only, as an OOM kill would
            t0 = time.monotonic()
            status = 200
            while time.monotonic() - t0 < 2.0:
                try:
                    r = httpx.get(f"{server.url}/ping", timeout=1)
                except httpx.TransportError:
                    status = -1  # already gone: also not healthy
                    break
                status = r.status_code
                if status == 503:
                    assert r.json()["phase"] == "FAILED"
                    break
                time.sleep(0.02)
            ping_s = time.monotonic() - t0
            for t in threads:
                t.join(timeout=10)
            code = server.proc.wait(timeout=10)
            exit_s = time.monotonic() - t0
        answers_s = [round(float(a["at"]) - t0, 2) for a in answers]  # type: ignore[arg-type]
        print(f"engine SIGKILL: /ping 503 after {ping_s:.2f} s, answers {answers_s} s, exit {exit_s:.1f} s")
        assert status in (503, -1)
        # bounds: the 1 s / 1 s / 5 s, plus room for a loaded 2-core machine
        assert ping_s < 1.5, f"/ping took {ping_s:.2f} s to turn 503"
        plain, stream = answers
        assert plain["status"] in (502, 503), plain
        assert stream["status"] == 200 and '"code": 502' in str(stream["last"]), stream
        for a in answers:
            assert float(a["at"]) - t0 < 1.5, f"in-flight answer after {float(a['at']) - t0:.2f} s"  # type: ignore[arg-type]
        assert code != 0 and exit_s < 5.0 + 1.0, f"exit {code} after {exit_s:.1f} s"
        records = [json.loads(line) for line in server.log().splitlines() if line.strip()]  # every line
        engine_lines = [r for r in records if r.get("source") == "engine"]
        assert engine_lines and all(isinstance(r["message"], str) for r in engine_lines)
        access = [r for r in records if r.get("logger") == "neuronserve.access"]
        assert access and {"time", "level", "request_id", "route", "status", "latency_ms", "tokens"} <= set(
            access[0]
        )
        statuses = {r["status"] for r in access}
        assert 200 in statuses and any(500 <= st < 600 for st in statuses), statuses
        final = [r for r in records if "the engine exited with code" in str(r.get("message"))]
        assert final and final[-1]["level"] == "ERROR" and final[-1]["engine_last_lines"]
    finally:
        server.stop()


def test_sigterm_while_staging_exits_at_once_and_keeps_the_partial_copy(
    s3_tiny_model: str, s3_server: ServerControl, tiny_model: Path, tmp_path: Path
) -> None:
    """A stop during a long download does not wait for it (SageMaker kills 30 s after SIGTERM), leaves
    no s5cmd behind, and keeps what was fetched for the next start to resume."""
    from neuronserve.stage.paths import JOURNAL_NAME

    held = "/integration-models/tiny/model.safetensors"
    release = threading.Event()
    s3_server.hold[held] = release  # the weights never arrive while this server lives
    work = tmp_path / "work"
    env = base_env(tiny_model, work, SM_VLLM_MAX_MODEL_LEN="256", NEURONSERVE_S3_CONCURRENCY="2")
    env = model_from_s3(env, s3_tiny_model, s3_server)
    server = start_server(env, tmp_path / "staging.log")
    try:
        journal: Path | None = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # STAGING, and the small files already journaled
            partial = list(work.rglob(JOURNAL_NAME))
            if partial and partial[0].read_text().strip():
                journal = partial[0]
                break
            time.sleep(0.1)
        assert journal is not None, server.log()[-3000:]
        assert httpx.get(f"{server.url}/ping", timeout=2).json()["phase"] == "STAGING"
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=10)
        took = time.monotonic() - t0
        assert code == 0
        assert took < 5.0, f"the stop waited {took:.1f} s for the download"
        assert "stopped while staging" in server.log()
        # the s5cmd child died with the server: no process is still writing into the work dir
        time.sleep(0.5)
        writers = [
            p
            for p in os.listdir("/proc")
            if p.isdigit() and str(work) in _cmdline(p) and "s5cmd" in _cmdline(p)
        ]
        assert writers == []
        assert journal.exists()  # kept for the next start to resume from
        assert not (journal.parent.parent / journal.parent.name.removesuffix(".partial")).exists()
    finally:
        release.set()
        s3_server.hold.pop(held, None)
        server.stop()


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
