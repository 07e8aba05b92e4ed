"""The one error table and the one JSON error shape for everything the front itself answers.

Shape (vLLM's/OpenAI's, so OpenAI clients parse it): {"error": {"message", "type", "code"}}.
Engine errors are passed through with their own status and body, never rewritten.
"""

from __future__ import annotations

import json
from typing import Any

# status -> error type. One place; handlers name a status, never build a body themselves.
ERROR_TYPES: dict[int, str] = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    413: "PayloadTooLargeError",
    415: "UnsupportedMediaTypeError",
    422: "ValidationError",
    429: "TooManyRequestsError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
}

ACCEPTED_SHAPES = (
    'OpenAI chat {"messages": [...]}, '
    'OpenAI completion {"prompt": "..."}, '
    'TGI/LMI generate {"inputs": "...", "parameters": {...}, "stream": false}'
)


class FrontError(Exception):
    """Raised anywhere on the request path; the app turns it into `error_body(status, message)`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "Error"), "code": status}}


def error_bytes(status: int, message: str) -> bytes:
    return json.dumps(error_body(status, message)).encode()
