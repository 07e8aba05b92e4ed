"""What one request asks of the engine: its sequences, limited per request and counted in the gate.

Why count sequences, not requests: one OpenAI body with 64 prompts and `n=8` is 512 generations, and
one TGI `inputs` list of 32 prompts with `best_of=8` is 256, each of which the engine schedules like
a request of its own. Counting such a request as one concurrency slot let nine of them exhaust the
engine's connection pool. So:

- `NEURONSERVE_MAX_SEQUENCES_PER_REQUEST` bounds one request (prompts x max(n, best_of)), refused in
  the route's dialect (OpenAI 400, TGI 422, LMI 424) naming the variable;
- the gate admits a request with weight 1 (its body read, not parsed yet), and `Charge` raises that weight
  to the request's sequences once the handler has parsed the body; more than the slots left is 429,
  as the gate answers at its limit. A request heavier than the whole limit weighs the whole limit
  (it runs alone rather than never).

Counting happens where the body is already parsed (app.py for OpenAI bodies, generate.py for the
generate schema): no second parse on the hot path.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any, Protocol

from neuronserve.front import advisories
from neuronserve.front.errors import BadRequest, Overloaded
from neuronserve.front.limiter import Limiter

CHARGE_KEY = "neuronserve.charge"  # the gate puts the request's Charge here
LIMIT_VAR = "NEURONSERVE_MAX_SEQUENCES_PER_REQUEST"
_LISTED_INPUTS = {"/v1/completions": "prompt", "/v1/embeddings": "input"}
_WHOLE_TEXT = re.compile(r"[+-]?[0-9][0-9_]*(?:\.0*)?")  # what pydantic's lax int accepts from a string


class Counted(Protocol):
    """What a Charge needs of the gate: the limit, its count (front/limiter.py), the metrics' refusal
    counter."""

    max_concurrency: int

    @property
    def limiter(self) -> Limiter: ...

    def refused_over_limit(self) -> None: ...


class Charge:
    """One request's weight in the gate's count: 1 at admission, its sequences once known.

    The gate gives back `weight` (not 1) when the request ends, whatever happened in between."""

    def __init__(self, gate: Counted) -> None:
        self.gate = gate
        self.weight = 1

    def __call__(self, sequences: int) -> None:
        gate = self.gate
        limit = gate.max_concurrency
        want = min(sequences, limit) if limit else sequences
        extra = want - self.weight
        if extra <= 0:
            return
        limiter = self.gate.limiter
        if not limiter.try_acquire(extra):
            self.gate.refused_over_limit()
            raise Overloaded(
                f"the request asks for {sequences} sequences and only "
                f"{max(limit - limiter.in_flight + self.weight, 0)} of {limit} are free "
                "(NEURONSERVE_MAX_CONCURRENCY counts sequences); retry later"
            )
        self.weight = want


def charge(scope: MutableMapping[str, Any], sequences: int) -> None:
    """Raise the request's weight in the gate to `sequences` (Overloaded when the slots are taken).
    Outside the gate (tests driving the app alone) there is nothing to count."""
    found = scope.get(CHARGE_KEY)
    if found is not None:
        found(sequences)


def _count(value: Any) -> int:
    """n / best_of as the engine reads them. vLLM's request models are pydantic in lax mode: 4.0,
    "4", " 4 ", "4.0" and "1_000" are all whole numbers to it, so counting only JSON integers let
    `"n": "64"` through as one sequence. Anything it cannot read as one is its to refuse (1 here);
    a number of more than 18 digits counts as too many."""
    if type(value) is str:
        text = value.strip()
        if not _WHOLE_TEXT.fullmatch(text):
            return 1
        digits = text.split(".")[0].replace("_", "").lstrip("+")
        value = int(digits) if len(digits) <= 18 else 10**18
    elif type(value) is float:
        value = int(value) if value.is_integer() else 1  # inf and nan are not integers
    return value if type(value) is int and value > 1 else 1


def _prompts(value: Any) -> int:
    """A string or a list of token ids is one prompt; a list of strings or of id lists is several."""
    if not isinstance(value, list) or not value or all(type(x) is int for x in value):
        return 1
    return len(value)


def openai_sequences(path: str, body: dict[str, Any]) -> int:
    """Prompts x max(n, best_of) of an OpenAI body bound for `path` (a chat is one prompt)."""
    field = _LISTED_INPUTS.get(path)
    prompts = _prompts(body.get(field)) if field else 1
    return prompts * max(_count(body.get("n")), _count(body.get("best_of")))


def over_limit(sequences: int, limit: int, what: str) -> str | None:
    """The refusal text when `sequences` is over `limit`, else None (the dialect picks the error)."""
    if sequences <= limit:
        return None
    return (
        f"the request asks for {sequences} sequences ({what}); at most {limit} in one request "
        f"({LIMIT_VAR}): split it into several requests"
    )


def check_openai(
    scope: MutableMapping[str, Any],
    path: str,
    body: dict[str, Any],
    limit: int,
    allow_embeds: bool,
) -> None:
    """Every check of a parsed OpenAI-shaped body before it is forwarded: the engine's advisories,
    the per-request limit (400), then its weight in the gate (429)."""
    advisories.check(body, allow_embeds)
    sequences = openai_sequences(path, body)
    refusal = over_limit(sequences, limit, "prompts x max(n, best_of)")
    if refusal:
        raise BadRequest(refusal)
    if sequences > 1:
        charge(scope, sequences)
