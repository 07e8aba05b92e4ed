"""stage/events.py: cache events reach every subscriber in order, an unsubscribed one hears nothing
more, and a subscriber that raises never breaks staging nor the subscribers after it."""

from __future__ import annotations

import logging

import pytest

from neuronserve.stage import events


def test_every_subscriber_hears_each_event_until_it_unsubscribes() -> None:
    first: list[str] = []
    second: list[str] = []
    stop_first = events.subscribe(first.append)
    stop_second = events.subscribe(second.append)
    try:
        events.emit("miss")
        stop_first()
        events.emit("publish_ok")
    finally:
        stop_first()  # twice is harmless
        stop_second()
    events.emit("corrupt")  # nobody listens any more
    assert first == ["miss"]
    assert second == ["miss", "publish_ok"]


def test_a_failing_subscriber_is_logged_and_the_others_still_hear(caplog: pytest.LogCaptureFixture) -> None:
    heard: list[str] = []

    def broken(event: str) -> None:
        raise RuntimeError(f"counter broke on {event}")

    stops = [events.subscribe(broken), events.subscribe(heard.append)]
    try:
        with caplog.at_level(logging.ERROR, logger="neuronserve.stage"):
            events.emit("publish_failed")
    finally:
        for stop in stops:
            stop()
    assert heard == ["publish_failed"]
    assert "cache event listener failed" in caplog.text
