"""The generate schema ({"inputs", "parameters", "stream"}) served over the engine's /v1/completions.

One flow for every route and dialect: validate (genparams), call the engine once per prompt (a
list of prompts goes concurrently, answered in order), fetch the texts of token ids when top
tokens were asked for, and let the route's dialect (dialect.py) shape the answer, the stream events
and the errors.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from starlette.responses import Response

from neuronserve.front import completion_reader, genparams, proxy, request_cost, schema
from neuronserve.front.adapters import generate_with_adapter
from neuronserve.front.dialect import Framing
from neuronserve.front.enginehttp import EngineResponse
from neuronserve.front.errors import EngineBadAnswer, EngineRefused, FrontError
from neuronserve.front.jsonbits import JsonAnswer
from neuronserve.front.sse import SSEParser
from neuronserve.front.streaming import Stream
from neuronserve.front.support import check_generate
from neuronserve.types import RequestSupport

log = logging.getLogger("neuronserve.front")

TEXT_CACHE_MAX = 262_144  # token id -> text entries (a vocabulary or two)


def _engine_message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
        err = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)
        return str(err)
    except (ValueError, RecursionError):
        return raw.decode("utf-8", "replace")[:500]


class Generator:
    """Holds the engine client and the token-text cache shared by all requests."""

    def __init__(
        self,
        client: proxy.EngineClient,
        model: Callable[[], str | None],
        max_sequences: int = 32,
        support: RequestSupport | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.max_sequences = max_sequences  # NEURONSERVE_MAX_SEQUENCES_PER_REQUEST (request_cost.py)
        self.support = support or RequestSupport()  # what the planned engine serves (front/support.py)
        self.texts: dict[int, str] = {}
        self._detok = asyncio.Semaphore(8)

    async def _text_of(self, tid: int) -> None:
        body = {"tokens": [tid]}
        if self.model():
            body["model"] = self.model()  # type: ignore[assignment]
        async with self._detok:
            try:
                resp = await proxy.send(
                    self.client,
                    "POST",
                    "/detokenize",
                    headers={"content-type": "application/json"},
                    content=json.dumps(body).encode(),
                )
                raw = await proxy.read_body(resp)
                text = json.loads(raw).get("prompt") if resp.status == 200 else None
            except (FrontError, ValueError, AttributeError):
                text = None
        if isinstance(text, str):
            if len(self.texts) >= TEXT_CACHE_MAX:
                self.texts.clear()
            self.texts[tid] = text

    async def resolve(self, ids: set[int]) -> dict[int, str]:
        missing = [i for i in ids if i not in self.texts]
        if missing:
            await asyncio.gather(*(self._text_of(i) for i in missing))
        return self.texts

    async def _call(self, req: genparams.GenRequest, rid: str) -> EngineResponse:
        engine = dict(req.engine)
        if req.top_n:
            engine["return_tokens_as_token_ids"] = True  # ids of the alternatives (completion_reader.py)
        return await proxy.send(
            self.client,
            "POST",
            "/v1/completions",
            headers={"content-type": "application/json", "x-request-id": rid},
            content=json.dumps(engine).encode(),
        )

    async def _one(
        self, req: genparams.GenRequest, rid: str
    ) -> tuple[list[completion_reader.Seq], dict[str, Any]]:
        resp = await self._call(req, rid)
        raw = await proxy.read_body(resp)
        if resp.status != 200:
            raise EngineRefused(resp.status, _engine_message(raw))
        try:
            body = schema.loads(raw)
            choices = list(body.get("choices") or [])
        except (ValueError, AttributeError, TypeError):
            raise EngineBadAnswer("the engine answered something that is not a completion") from None
        ids: set[int] = set()
        by_id = req.details and "logprobs" not in req.engine  # details from the token ids alone
        for choice in choices:
            ids |= completion_reader.ids_to_resolve(choice, generated=by_id)
        texts = await self.resolve(ids) if ids else self.texts
        return completion_reader.sequences(req, body, texts), body.get("usage") or {}

    async def serve(
        self,
        body: dict[str, Any],
        framing: Framing,
        rid: str,
        record: Callable[[dict[str, Any]], None],
        charge: Callable[[int], None] = lambda _: None,
        *,
        adapter: str | None = None,
    ) -> Response:
        """`charge` gets the request's sequences once they are known (the gate's weight, request_cost.py);
        `adapter`: the LoRA adapter SageMaker's header names (front/adapters.py), refused in the dialect."""
        try:
            body = generate_with_adapter(body, adapter, self.support)
            return await self._serve(body, framing, rid, record, charge)
        except FrontError as err:
            resp = framing.dialect.error_response(err)
            if resp.status_code == 429:  # the sequences did not fit in the gate: as its own 429
                resp.headers["retry-after"] = "1"
            return resp

    def _count(self, reqs: list[genparams.GenRequest], charge: Callable[[int], None]) -> None:
        """Prompts x best_of/n against the per-request limit (the dialect's validation error), then
        against the concurrency slots."""
        sequences = sum(r.n for r in reqs)
        refusal = request_cost.over_limit(sequences, self.max_sequences, "inputs x best_of/n")
        if refusal:
            raise genparams.bad(refusal)
        if sequences > 1:
            charge(sequences)

    def _count_listed(self, body: dict[str, Any]) -> None:
        """An `inputs` list longer than the per-request limit is refused naming the variable before
        the dialect's fixed list cap (genparams.MAX_CLIENT_BATCH) speaks: that cap names no setting,
        so a 64-prompt list was refused without saying which variable bounds it."""
        listed = body.get("inputs")
        if isinstance(listed, list):
            refusal = request_cost.over_limit(len(listed), self.max_sequences, "inputs x best_of/n")
            if refusal:
                raise genparams.bad(refusal)

    async def _serve(
        self,
        body: dict[str, Any],
        framing: Framing,
        rid: str,
        record: Callable[[dict[str, Any]], None],
        charge: Callable[[int], None],
    ) -> Response:
        self._count_listed(body)
        inputs = genparams.check_inputs(body)
        if framing.stream is not None:
            body = {**body, "stream": framing.stream}
        model = self.model()
        if isinstance(inputs, list):
            reqs = [self._translate(body, p, model) for p in inputs]
            self._count(reqs, charge)
            if reqs[0].stream:
                raise genparams.bad("a list of 'inputs' cannot be streamed: send one prompt per request")
            done = await asyncio.gather(*(self._one(r, f"{rid}-{i}") for i, r in enumerate(reqs)))
            record(_sum_usage([u for _, u in done]))
            return JsonAnswer(
                [framing.dialect.response(r, seqs) for r, (seqs, _) in zip(reqs, done, strict=True)]
            )
        req = self._translate(body, inputs, model)
        self._count([req], charge)
        if req.stream:
            return await self._stream(req, framing, rid, record)
        seqs, usage = await self._one(req, rid)
        record(usage)
        item = framing.dialect.response(req, seqs)
        return JsonAnswer([item] if framing.listed else item)

    def _translate(self, body: dict[str, Any], prompt: str, model: str | None) -> genparams.GenRequest:
        """Validate, then refuse what the engine cannot serve, before anything reaches it."""
        req = genparams.translate(body, prompt, model, self.support.lora_adapters)
        check_generate(body.get("parameters") or {}, self.support)
        if not self.support.logprobs:
            # `details` stays served without logprobs (TGI's client always sends it): its tokens come
            # from their ids, `logprob` null; asking the engine for logprobs it cannot give is not safe.
            req.engine.pop("logprobs", None)
        return req

    async def _stream(
        self, req: genparams.GenRequest, framing: Framing, rid: str, record: Callable[[dict[str, Any]], None]
    ) -> Response:
        resp = await self._call(req, rid)
        if resp.status != 200:
            raise EngineRefused(resp.status, _engine_message(await proxy.read_body(resp)))
        reader = completion_reader.StreamReader(req)
        frame = framing.event

        async def frames(datas: list[str]) -> bytes:
            """The events of a read's whole engine chunks, framed, in one piece: one send for them all."""
            out: list[bytes] = []
            for data in datas:
                try:
                    choice, ids = reader.pending(data)
                except (ValueError, AttributeError, TypeError):
                    log.warning("skipped a stream chunk from the engine that is not JSON: %.200s", data)
                    continue
                if choice is None:
                    continue
                texts = await self.resolve(ids) if ids else self.texts
                out += [frame(req, e) for e in reader.events(choice, texts)]
            return b"".join(out)

        async def body() -> AsyncGenerator[bytes, None]:
            parser = SSEParser()
            try:
                while chunk := await proxy.next_chunk(resp):
                    out = await frames(parser.feed(chunk))
                    if out:
                        yield out
                out = await frames(parser.close())
                if out:
                    yield out
            except proxy.StreamBroken as err:
                # The 200 is already sent: the stream says in-band why it ends.
                log.warning("generate stream from the engine broke: %s", err.message)
                yield framing.encode(framing.dialect.stream_error(err))
            finally:
                proxy.done(resp)
                record(reader.usage)

        return Stream(body(), media_type=framing.media_type, closing=lambda: proxy.done(resp))


def _sum_usage(usages: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("prompt_tokens", "completion_tokens")
    return {k: sum(int(u.get(k) or 0) for u in usages) for k in keys}
