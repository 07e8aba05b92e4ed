"""front/disconnect.py's Departure and run_cancelling_on_departure: the connection tells the request
that its client left, without a watcher task."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from neuronserve.front.disconnect import Departure, run_cancelling_on_departure

Message = MutableMapping[str, Any]


class _Sent:
    complete = False


def test_callbacks_run_once_when_fired_and_at_once_after() -> None:
    d = Departure()
    seen: list[str] = []
    d.on_gone(lambda: seen.append("a"))
    dropped = lambda: seen.append("dropped")  # noqa: E731
    d.on_gone(dropped)
    d.forget(dropped)
    d.fire()
    d.fire()
    d.on_gone(lambda: seen.append("late"))
    d.forget(dropped)  # forgetting what was already fired or dropped is fine
    assert seen == ["a", "late"]


def test_a_departure_cancels_the_app_and_reports_it() -> None:
    async def main() -> tuple[bool | str, list[Message], int]:
        task = asyncio.current_task()
        assert task is not None
        d = Departure()
        sent = _Sent()

        async def app(scope: Any, receive_: Any, send: Any) -> None:
            received.append(await receive_())
            await asyncio.sleep(10)

        received: list[Message] = []
        tasks_before = len(asyncio.all_tasks())
        asyncio.get_running_loop().call_later(0.05, d.fire)
        gone = await run_cancelling_on_departure(
            app,
            {},
            _never,
            _drop,
            body={"type": "http.request", "body": b"x", "more_body": False},
            sent=sent,
            task=task,
            departure=d,
        )
        return gone, received, len(asyncio.all_tasks()) - tasks_before

    gone, received, extra_tasks = asyncio.run(asyncio.wait_for(main(), 5))
    assert gone is True
    assert received == [{"type": "http.request", "body": b"x", "more_body": False}]
    assert extra_tasks == 0  # no watcher task was made


def test_a_departure_after_the_answer_cancels_nothing() -> None:
    async def main() -> bool:
        task = asyncio.current_task()
        assert task is not None
        d = Departure()
        sent = _Sent()

        async def app(scope: Any, receive_: Any, send: Any) -> None:
            await receive_()
            sent.complete = True
            d.fire()  # the connection closes after the last byte went out
            await asyncio.sleep(0.02)

        gone = await run_cancelling_on_departure(
            app, {}, _never, _drop, body={"type": "http.request"}, sent=sent, task=task, departure=d
        )
        return gone

    assert asyncio.run(main()) is False


def test_a_client_gone_before_the_app_starts_cancels_it_at_once() -> None:
    async def main() -> tuple[bool, bool]:
        task = asyncio.current_task()
        assert task is not None
        d = Departure()
        d.fire()
        ran = False

        async def app(scope: Any, receive_: Any, send: Any) -> None:
            nonlocal ran
            await receive_()
            await asyncio.sleep(0)
            ran = True

        gone = await run_cancelling_on_departure(
            app, {}, _never, _drop, body={"type": "http.request"}, sent=_Sent(), task=task, departure=d
        )
        return gone, ran

    assert asyncio.run(main()) == (True, False)


def test_a_cancel_from_elsewhere_is_not_swallowed() -> None:
    async def main() -> str:
        task = asyncio.current_task()
        assert task is not None
        d = Departure()

        async def app(scope: Any, receive_: Any, send: Any) -> None:
            await asyncio.sleep(10)

        asyncio.get_running_loop().call_later(0.02, task.cancel)
        try:
            await run_cancelling_on_departure(
                app, {}, _never, _drop, body={"type": "http.request"}, sent=_Sent(), task=task, departure=d
            )
        except asyncio.CancelledError:
            task.uncancel()
            return "raised" if not d._callbacks else "leaked"
        return "swallowed"

    assert asyncio.run(main()) == "raised"


async def _never() -> Message:
    await asyncio.sleep(3600)
    return {"type": "http.disconnect"}


async def _drop(message: Message) -> None:
    pass
