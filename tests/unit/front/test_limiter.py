"""front/limiter.py: the concurrency count takes a weight only when it fits and gives back what was taken;
through the gate (front/gate.py, request_cost.Charge) a request's sequences are taken from it and
returned when the request ends, whatever its answer."""

from __future__ import annotations

import asyncio

from tests.support.front_app import running_front

from neuronserve.front.limiter import Limiter


def test_a_weight_is_taken_only_when_it_fits() -> None:
    lim = Limiter(4)
    assert lim.try_acquire(3) and lim.in_flight == 3
    assert not lim.try_acquire(2) and lim.in_flight == 3  # refused: nothing taken
    assert lim.try_acquire(1) and lim.in_flight == 4
    lim.release(3)
    assert lim.in_flight == 1 and lim.try_acquire(3)


def test_no_limit_counts_without_refusing() -> None:
    lim = Limiter(0)
    assert all(lim.try_acquire(1000) for _ in range(5)) and lim.in_flight == 5000


def test_the_gate_takes_a_requests_sequences_from_its_limiter_and_gives_them_back() -> None:
    """n=3 weighs 3 of 4; a second such request does not fit (429); both end with nothing taken."""

    async def run() -> None:
        async with running_front(max_concurrency=4, engine_delay_s=0.3) as front:
            body = {"prompt": "hi", "max_tokens": 1, "n": 3}
            first = asyncio.ensure_future(front.client.post("/v1/completions", json=body))
            while front.gate.limiter.in_flight < 3:
                await asyncio.sleep(0.01)
            second = await front.client.post("/v1/completions", json=body)
            assert second.status_code == 429 and second.headers["retry-after"] == "1"
            assert "only 1 of 4 are free" in second.json()["error"]["message"]
            assert (await first).status_code == 200
            assert front.gate.limiter.in_flight == 0 and front.gate.in_flight == 0

    asyncio.run(run())
