"""Request ids: the client's id when it is safe to echo and log, and a unique id per engine call.

Why a character set: the id is echoed in a response header, written into the access log and sent to
the engine. An id with spaces forged `key=value` fields in the text log, and control characters forged
whole lines; `[A-Za-z0-9._:-]{1,128}` covers UUIDs, SageMaker's inference ids and the usual trace ids.
Anything else is replaced by a generated id, with one warning naming why.

Why a suffix for the engine: vLLM 0.11.0 takes `X-Request-Id` as its request id as given, so two
concurrent requests with one client id collide inside the engine. The engine always gets the client's
id plus `-<n>` (unique in this process, and among front workers: each counts from its own range); the
client still sees its own id echoed.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
from collections.abc import MutableMapping
from typing import Any

from neuronserve.logtext import field

log = logging.getLogger("neuronserve.front")

REQUEST_ID_KEY = "neuronserve.request_id"  # the request's id in the ASGI scope: forwarded, echoed, logged
MAX_LEN = 128
SAFE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_ID_HEADERS = (b"x-request-id", b"x-amzn-sagemaker-inference-id")
_engine_calls = itertools.count(1)


def request_id(scope: MutableMapping[str, Any]) -> str:
    """X-Request-Id, else SageMaker's X-Amzn-SageMaker-Inference-Id, else a new id (kept in scope).

    A header outside the safe set is replaced by a new id and logged (escaped by the log formatter,
    cut to 64 characters) so the client can be told why its id was not echoed."""
    rid = scope.get(REQUEST_ID_KEY)
    if rid:
        return str(rid)
    raw = None
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            raw = value
            break
        if name == b"x-amzn-sagemaker-inference-id" and raw is None:
            raw = value
    text = raw.decode("latin-1").strip() if raw is not None else ""
    if text and SAFE.fullmatch(text):
        rid = text
    else:
        rid = new_id()
        if raw is not None:
            log.warning(
                "request id %s (%d chars) is not 1-%d of [A-Za-z0-9._:-]: replaced by %s",
                field(text[:64]),
                len(text),
                MAX_LEN,
                rid,
            )
    scope[REQUEST_ID_KEY] = rid
    return rid


def new_id() -> str:
    """32 random hex digits (a UUID4's length): the random module's generator, not the kernel's.

    Why: a request without an id got uuid4(), one getrandom system call each; an id needs to be unique,
    not secret, and the random module reseeds itself in a forked child (random.py)."""
    return f"{random.getrandbits(128):032x}"


def engine_id(rid: str) -> str:
    """The id one engine call carries: the request's id plus a process-unique suffix."""
    return f"{rid}-{next(_engine_calls):x}"


def number_engine_calls_from(first: int) -> None:
    """Front worker i numbers its engine calls from its own range ((i + 1) << 40, serve/worker.py), so
    two workers never give the engine one id for one client id."""
    global _engine_calls  # noqa: PLW0603 (the process's one counter, replaced once at a worker's start)
    _engine_calls = itertools.count(first)
