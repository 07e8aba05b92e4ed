"""The front's typed errors, the one table from error to HTTP status, and the one JSON error shape.

Code on the request path raises what went wrong (`Invalid`, `PayloadTooLarge`, `EngineTimeout`...),
never a status: the pure translators (genparams, schema, tgi, lmi, answer) know the protocol, not HTTP.
`STATUS` below is the one place that says which status each error answers, and `STATUSES` the one
table of what each status is called (the one shape's "type", TGI's "error_type", the metrics' reason).

Shape (vLLM's/OpenAI's, so OpenAI clients parse it): {"error": {"message", "type", "code"}}.
Engine errors are passed through with their own status and body, never rewritten.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from neuronserve.front.jsonbits import COMPACT

ACCEPTED_SHAPES = (
    'OpenAI chat {"messages": [...]}, '
    'OpenAI completion {"prompt": "..."}, '
    'TGI/LMI generate {"inputs": "...", "parameters": {...}, "stream": false}'
)


class FrontError(Exception):
    """Anything the front refuses or fails on; the route's dialect turns it into a body, `STATUS` into
    a status. Subclasses say what went wrong and never carry a status of their own."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def status(self) -> int:
        for cls in type(self).__mro__:
            status = STATUS.get(cls)
            if status is not None:
                return status
        return 500


class BadRequest(FrontError):
    """A body that is no request at all: not JSON, not an object, no known shape, a bad route."""


class Invalid(FrontError):
    """A request of a known shape whose fields the protocol refuses (TGI's and LMI's validation)."""


class NotFound(FrontError):
    """A path outside the allowlist."""


class MethodNotAllowed(FrontError):
    """A route the front answers itself, called with another method."""


class PayloadTooLarge(FrontError):
    """A body over SAGEMAKER_MAX_PAYLOAD_IN_MB."""


class UnsupportedMediaType(FrontError):
    """A body that is not JSON by its content type."""


class Overloaded(FrontError):
    """More requests in flight than the concurrency limit."""


class NotReady(FrontError):
    """The server is not READY (staging, loading, draining), or no replica can take the request."""


class EngineFailure(FrontError):
    """The engine could not serve the request: unreachable, too slow, or a broken answer."""


class EngineUnreachable(EngineFailure):
    """No connection to the engine, or it broke before the answer was read."""


class EngineTimeout(EngineFailure):
    """The engine stayed silent longer than SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS."""


class EngineBadAnswer(EngineFailure):
    """The engine answered 200 with something that is not what the protocol needs."""


class EngineRefused(FrontError):
    """The engine answered an error of its own: its status is kept as it is."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.engine_status = status

    @property
    def status(self) -> int:
        return self.engine_status


# error -> HTTP status: the one place. A subclass answers its nearest listed ancestor's status.
STATUS: dict[type[FrontError], int] = {
    BadRequest: 400,
    NotFound: 404,
    MethodNotAllowed: 405,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    Invalid: 422,
    Overloaded: 429,
    EngineBadAnswer: 502,
    NotReady: 503,
    EngineUnreachable: 503,
    EngineTimeout: 504,
}


class Names(NamedTuple):
    """What one status is called: the one shape's "type", TGI's "error_type" (None: TGI's fallback by
    status class), and the reason a handler's refusal with it is counted under in
    neuronserve_rejected_total (None: not counted; the gate counts its own refusals by name)."""

    front: str | None
    tgi: str | None = None
    rejected: str | None = None


STATUSES: dict[int, Names] = {
    400: Names("BadRequestError", rejected="bad_request"),
    404: Names("NotFoundError", rejected="not_found"),
    405: Names("MethodNotAllowedError"),
    408: Names("RequestTimeoutError"),
    413: Names("PayloadTooLargeError", rejected="payload"),
    415: Names("UnsupportedMediaTypeError", rejected="bad_request"),
    422: Names("ValidationError", "validation", "bad_request"),  # TGI: its OpenAPI ErrorResponse examples
    424: Names(None, "generation"),
    429: Names("TooManyRequestsError", "overloaded"),
    431: Names("RequestHeaderFieldsTooLargeError"),
    502: Names("BadGatewayError"),
    503: Names("ServiceUnavailableError", "unhealthy"),
    504: Names("GatewayTimeoutError"),
}

# The views of STATUSES each reader needs (built once, from the one table).
ERROR_TYPES: dict[int, str] = {s: n.front for s, n in STATUSES.items() if n.front is not None}
TGI_ERROR_TYPES: dict[int, str] = {s: n.tgi for s, n in STATUSES.items() if n.tgi is not None}
REJECTED_REASONS: dict[int, str] = {s: n.rejected for s, n in STATUSES.items() if n.rejected is not None}


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "Error"), "code": status}}


def error_bytes(status: int, message: str) -> bytes:
    """The error body the gate and the sessions write themselves, byte-equal to the JSONResponse every
    other error is (starlette/responses.py `JSONResponse.render`: compact, UTF-8), so a client sees one
    shape whichever part refused it."""
    return COMPACT(error_body(status, message)).encode()
