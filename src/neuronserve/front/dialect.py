"""The dialects a request is answered in, chosen once per request at its route.

A dialect owns everything a client of that protocol parses: the error body (and its status), the
answer, each stream event and the in-band error that ends a broken stream. The generate flow
(generate.py) and the routes (app.py) call the dialect they were given and never ask which one it is.

- OpenAI passthrough: the engine's own answers and streams; the front's refusals in the one shape
  (errors.py).
- TGI (tgi.py): on TGI's own routes its ErrorResponse {"error", "error_type"}; on /invocations the
  one shape, as before the TGI routes existed.
- LMI (lmi.py): {"error", "code"}, validation errors answered 424 as LMI does; a broken stream ends
  with LMI's error token line.

`Framing` is what the route adds on top: a list or one object, forced streaming, JSON lines or SSE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from neuronserve.front import lmi, tgi
from neuronserve.front.completion_reader import Event, Seq
from neuronserve.front.errors import FrontError, error_body
from neuronserve.front.genparams import GenRequest
from neuronserve.front.proxy import StreamBroken


class Dialect:
    """The OpenAI passthrough, and the base of the generate dialects: the one error shape."""

    name = "openai"

    def error_body(self, status: int, message: str) -> tuple[int, dict[str, Any]]:
        return status, error_body(status, message)

    def error_response(self, err: FrontError) -> JSONResponse:
        status, body = self.error_body(err.status, err.message)
        return JSONResponse(body, status_code=status)

    def response(self, req: GenRequest, seqs: list[Seq]) -> dict[str, Any]:
        raise NotImplementedError(f"the {self.name} dialect answers with the engine's own body")

    def stream_event(self, req: GenRequest, event: Event) -> dict[str, Any]:
        raise NotImplementedError(f"the {self.name} dialect streams the engine's own events")

    def stream_bytes(self, req: GenRequest, event: Event, jsonlines: bool) -> bytes:
        """One stream event on the wire: the dialects write it from fixed byte templates."""
        return tgi.encode_event(self.stream_event(req, event), jsonlines)

    def stream_error(self, err: StreamBroken) -> dict[str, Any]:
        return error_body(err.status, err.message)


class Tgi(Dialect):
    """TGI's answers; its own error body on its own routes, the one shape on /invocations."""

    name = "tgi"

    def __init__(self, *, own_errors: bool) -> None:
        self.own_errors = own_errors

    def error_body(self, status: int, message: str) -> tuple[int, dict[str, Any]]:
        if self.own_errors:
            return status, tgi.error_body(status, message)
        return super().error_body(status, message)

    def response(self, req: GenRequest, seqs: list[Seq]) -> dict[str, Any]:
        return tgi.response(req, seqs)

    def stream_event(self, req: GenRequest, event: Event) -> dict[str, Any]:
        return tgi.stream_event(req, event)

    def stream_bytes(self, req: GenRequest, event: Event, jsonlines: bool) -> bytes:
        return tgi.stream_bytes(req, event, jsonlines)

    def stream_error(self, err: StreamBroken) -> dict[str, Any]:
        error_type = "overloaded" if err.status == 503 else "incomplete_generation"
        return {"error": err.message, "error_type": error_type}


class Lmi(Dialect):
    """LMI's rolling-batch answers and errors."""

    name = "lmi"

    def error_body(self, status: int, message: str) -> tuple[int, dict[str, Any]]:
        status = 424 if status == 422 else status  # LMI answers validation errors with 424
        return status, lmi.error_body(status, message)

    def response(self, req: GenRequest, seqs: list[Seq]) -> dict[str, Any]:
        return lmi.response(req, seqs)

    def stream_event(self, req: GenRequest, event: Event) -> dict[str, Any]:
        return lmi.stream_event(req, event)

    def stream_bytes(self, req: GenRequest, event: Event, jsonlines: bool) -> bytes:
        return lmi.stream_bytes(req, event, jsonlines)

    def stream_error(self, err: StreamBroken) -> dict[str, Any]:
        return lmi.stream_error_event()


OPENAI = Dialect()
TGI = Tgi(own_errors=True)  # TGI's own routes
TGI_INVOCATIONS = Tgi(own_errors=False)  # /invocations in the TGI dialect
LMI = Lmi()


@dataclass(frozen=True)
class Framing:
    """How one route frames a generate answer, on top of its dialect."""

    dialect: Dialect
    listed: bool  # non-streamed answers are a list (TGI compat, /invocations) or one object
    stream: bool | None = None  # force streaming on/off (/generate_stream, /generate); None: the body
    jsonlines: bool = False  # stream events as JSON lines, else SSE `data:` events

    @property
    def media_type(self) -> str:
        return "application/jsonlines" if self.jsonlines else "text/event-stream"

    def encode(self, event: dict[str, Any]) -> bytes:
        """One stream event (or the in-band error that ends a stream), framed for the wire."""
        return tgi.encode_event(event, self.jsonlines)

    def event(self, req: GenRequest, event: Event) -> bytes:
        """encode(dialect.stream_event(req, event)), from the dialect's byte templates."""
        return self.dialect.stream_bytes(req, event, self.jsonlines)
