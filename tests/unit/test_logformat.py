"""logformat: the text and JSON formats' timestamps, made once per second, are the ones logging and
datetime write. The formats' whole lines: test_logsetup.py and test_infoline.py."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime

from neuronserve.logformat import TextFormatter, iso


def test_the_cached_timestamps_are_the_ones_logging_and_datetime_write() -> None:
    """The text format's asctime and the JSON format's time are made once per second and finished
    per record: the same text as logging.Formatter.formatTime and datetime.isoformat, to the
    millisecond (rounding included), over random instants."""
    rng = random.Random(7)
    ours, theirs = TextFormatter("%(asctime)s %(message)s"), logging.Formatter("%(asctime)s %(message)s")
    for i in range(20_000):
        whole = rng.randrange(0, 2_000_000_000) if i % 2 else 1_700_000_000 + i // 1000
        created = whole + rng.choice([rng.random(), 0.9999995, 0.0000005, 0.9995, 0.4789996])
        expected = (
            datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
        assert iso(created) == expected, created
        record = logging.LogRecord("x", logging.INFO, "", 0, "m", None, None)
        record.created, record.msecs = created, (created - int(created)) * 1000 // 1
        assert ours.formatTime(record) == theirs.formatTime(record), created
