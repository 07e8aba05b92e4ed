"""Engine completion choices -> dialect-neutral sequences and token events. Pure.

TGI (tgi.py) and LMI (lmi.py) format the same facts differently, so the facts are read out of the
engine's OpenAI completion JSON once, here: per-token ids, texts and logprobs, top tokens, prompt
tokens (prefill), the finish reason and, for best_of / n, which sequence is the most likely.

Token texts: when top tokens are asked for, the engine is asked for token ids in place of token
strings (`return_tokens_as_token_ids`: "token_id:N", the only way to learn the ids of the
alternatives in both vLLM 0.11.0 and 0.32.0), and the texts of ids come from `texts` (the engine's
/detokenize, cached: generate.py). TGI clients rebuild the answer by joining token texts, so they
are always made to join to the engine's text (`token_texts`).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from neuronserve.front.genparams import GenRequest

ID_PREFIX = "token_id:"
_FINISH = {"length": "length", "stop": "eos_token", "abort": "length"}


@dataclass
class Tok:
    id: int
    text: str
    logprob: float | None
    special: bool = False


@dataclass
class Seq:
    text: str
    finish_reason: str
    tokens: list[Tok]
    top: list[list[Tok]]
    prefill: list[Tok]
    generated: int
    score: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def token_id(raw: str, texts: dict[int, str]) -> tuple[int | None, str]:
    """A logprobs key/token: "token_id:N" -> (N, its text) when ids were asked for, else (None, raw)."""
    if raw.startswith(ID_PREFIX) and raw[len(ID_PREFIX) :].isdecimal():  # isdigit took "²": int() crashed
        tid = int(raw[len(ID_PREFIX) :])
        return tid, texts.get(tid, "")
    return None, raw


def ids_to_resolve(choice: dict[str, Any], generated: bool = False) -> set[int]:
    """Token ids whose text must be fetched before this choice can be shaped (`generated`: the
    generated tokens' own ids too, when details are served without logprobs)."""
    lp = choice.get("logprobs") or {}
    if not lp and not generated and not choice.get("prompt_logprobs"):
        return set()  # a plain token (every event of a stream without logprobs): nothing to fetch
    out: set[int] = set()
    if generated and not lp.get("tokens"):
        out.update(int(i) for i in choice.get("token_ids") or [] if type(i) is int)
    for raw in itertools.chain(
        lp.get("tokens") or [], *((e or {}).keys() for e in lp.get("top_logprobs") or [])
    ):
        tid, _ = token_id(str(raw), {})
        if tid is not None:
            out.add(tid)
    prompt_ids = choice.get("prompt_token_ids") or []
    if choice.get("prompt_logprobs") and prompt_ids:
        out.add(int(prompt_ids[0]))
    return out


def finish_reason(reason: str | None, stop: list[str], stop_reason: Any) -> str:
    if reason == "stop" and stop_reason is not None and stop_reason in stop:
        return "stop_sequence"
    return _FINISH.get(reason or "", "length")


def token_texts(texts: list[str], text: str, offsets: list[Any] | None) -> list[str]:
    """Per-token texts that join to exactly `text`, the text the engine answered.

    The engine's per-token strings do not always join to its text: a character split over
    byte-level tokens decodes to "" for each partial token, and the whole character (or U+FFFD)
    appears in the text with a later token. The engine's `text_offset`s say where each token
    starts in the text, so when they are consistent the text is cut at them; otherwise everything
    goes to the last token.
    """
    if "".join(texts) == text or not texts:
        return texts
    if offsets and len(offsets) == len(texts) and all(type(o) is int for o in offsets):
        cuts = [o - offsets[0] for o in offsets] + [len(text)]
        if all(0 <= a <= b for a, b in itertools.pairwise(cuts)):
            return [text[a:b] for a, b in itertools.pairwise(cuts)]
    return [""] * (len(texts) - 1) + [text]


def tokens(choice: dict[str, Any], text: str, texts: dict[int, str]) -> list[Tok]:
    """The generated tokens of a choice (or stream chunk), their texts joining to `text`."""
    lp = choice.get("logprobs") or {}
    raw = [str(t) for t in lp.get("tokens") or []]
    pairs = [token_id(t, texts) for t in raw]
    by_id = any(tid is not None for tid, _ in pairs)
    # offsets count characters of the strings the engine returned: meaningless for "token_id:N"
    parts = token_texts([t for _, t in pairs], text, None if by_id else lp.get("text_offset"))
    logprobs = lp.get("token_logprobs") or []
    ids = choice.get("token_ids") or []
    out = []
    for i, part in enumerate(parts):
        tid = pairs[i][0]
        if tid is None:
            tid = int(ids[i]) if i < len(ids) else -1
        lp_i = logprobs[i] if i < len(logprobs) else None
        out.append(Tok(tid, part, lp_i))
    return out


def aligned_texts(parts: list[str], text: str) -> list[str]:
    """Per-token texts joining to `text`, from each token's own decoded text (`parts`).

    A token decoded alone may lose its leading space (SentencePiece's "▁Paris" decodes to "Paris"),
    so each token's text is found in `text` after the previous one's end, and the text between goes
    to it: ["Paris", "is"] in " Paris is" -> [" Paris", " is"]. Anything unmatched: token_texts.
    """
    if "".join(parts) == text or not parts:
        return parts
    ends: list[int] = []
    pos = 0
    for part in parts:
        core = part.strip()
        at = text.find(core, pos) if core else pos
        if at < 0:
            return token_texts(parts, text, None)
        pos = at + len(core)
        ends.append(pos)
    ends[-1] = len(text)
    starts = [0, *ends[:-1]]
    return [text[a:b] for a, b in zip(starts, ends, strict=True)]


def id_tokens(choice: dict[str, Any], text: str, texts: dict[int, str]) -> list[Tok]:
    """The generated tokens from their ids alone (no logprobs from the engine): `logprob` null, as
    TGI's schema allows; texts from the engine's /detokenize (`texts`), joining to `text`."""
    ids = [int(i) for i in choice.get("token_ids") or [] if type(i) is int]
    parts = aligned_texts([texts.get(i, "") for i in ids], text)
    return [Tok(i, part, None) for i, part in zip(ids, parts, strict=True)]


def merged_ids(choice: dict[str, Any]) -> list[int]:
    """The generated ids of a stream chunk that carries several tokens and no logprobs, else [].

    Why a chunk carries several: vLLM merges a request's deltas when its output loop falls behind
    the engine (vllm/v1/engine/output_processor.py, RequestOutputCollector.put: l. 41-50 in 0.11.0,
    l. 69-79 in 0.32.0), so under load one chunk may hold two or more tokens; the TGI and LMI
    streams still owe one event per token, and their count."""
    if choice.get("logprobs"):
        return []
    ids = choice.get("token_ids") or []
    if len(ids) < 2:
        return []
    return [int(i) for i in ids if type(i) is int]


def merged_tokens(choice: dict[str, Any], text: str, texts: dict[int, str], final: bool) -> list[Tok]:
    """One token per id of a merged chunk (merged_ids), texts from the engine's /detokenize (`texts`)
    joining to the chunk's text (id_tokens); at the stream's end (`final`) an empty last token is the
    end-of-sequence token, special, as an empty final chunk of its own is."""
    toks = id_tokens(choice, text, texts)
    if final and toks and not toks[-1].text:
        toks[-1].special = True
    return toks


def top_tokens(choice: dict[str, Any], texts: dict[int, str]) -> list[list[Tok]]:
    out = []
    for entry in (choice.get("logprobs") or {}).get("top_logprobs") or []:
        row = []
        for raw, logprob in (entry or {}).items():
            tid, text = token_id(str(raw), texts)
            row.append(Tok(-1 if tid is None else tid, text, logprob))
        out.append(row)
    return out


def prefill(choice: dict[str, Any], texts: dict[int, str]) -> list[Tok]:
    """Prompt tokens with their logprobs (the first has none), from prompt_logprobs."""
    plp = choice.get("prompt_logprobs")
    if not isinstance(plp, list):
        return []
    ids = choice.get("prompt_token_ids") or []
    out = []
    for i, entry in enumerate(plp):
        if not entry:
            if i < len(ids):
                out.append(Tok(int(ids[i]), texts.get(int(ids[i]), ""), None))
            continue
        want = str(ids[i]) if i < len(ids) else next(iter(entry))
        tid, info = (want, entry[want]) if want in entry else next(iter(entry.items()))
        out.append(Tok(int(tid), str(info.get("decoded_token") or ""), info.get("logprob")))
    return out


def sequences(req: GenRequest, resp: dict[str, Any], texts: dict[int, str]) -> list[Seq]:
    """Every choice as a Seq, the most likely first (best_of / n: by the sum of token logprobs)."""
    out = []
    for choice in resp.get("choices") or [{}]:
        text = choice.get("text") or ""
        toks = tokens(choice, text, texts)
        if not toks and req.details:
            toks = id_tokens(choice, text, texts)
        score = sum(t.logprob for t in toks if t.logprob is not None)
        seq = Seq(
            text=text,
            finish_reason=finish_reason(choice.get("finish_reason"), req.stop, choice.get("stop_reason")),
            tokens=toks,
            top=top_tokens(choice, texts) if req.top_n else [],
            prefill=prefill(choice, texts),
            generated=len(choice.get("token_ids") or []) or len(toks),
            score=score,
        )
        out.append(seq)
    if len(out) == 1:
        out[0].generated = (resp.get("usage") or {}).get("completion_tokens") or out[0].generated
    out.sort(key=lambda s: -s.score)
    return out


@dataclass
class Event:
    """One streamed token; `final` is set on the last one (finish reason, count, full text)."""

    token: Tok
    top: list[Tok]
    final: tuple[str, int, str] | None = None


class StreamReader:
    """Engine completion chunks (SSE data strings) -> Events, one per generated token."""

    def __init__(self, req: GenRequest) -> None:
        self.req = req
        self.text: list[str] = []
        self.count = 0
        self.usage: dict[str, Any] = {}

    def pending(self, data: str) -> tuple[dict[str, Any] | None, set[int]]:
        """Parse one chunk; returns it with the token ids whose texts are needed first."""
        if len(data) < 16 and data.strip() == "[DONE]":  # a chunk is longer: not stripped each time
            return None, set()
        chunk = json.loads(data)
        if not isinstance(chunk, dict):
            return None, set()
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return None, set()
        choice = choices[0]
        needed = ids_to_resolve(choice)
        merged = merged_ids(choice)  # several tokens in one chunk: their texts are needed too
        return choice, needed.union(merged) if merged else needed

    def events(self, choice: dict[str, Any], texts: dict[int, str]) -> list[Event]:
        piece = choice.get("text") or ""
        reason = choice.get("finish_reason")
        if not choice.get("logprobs") and not merged_ids(choice):
            return self._plain(choice, piece, reason)
        return self._general(choice, piece, reason, texts)

    def _general(self, choice: dict[str, Any], piece: str, reason: Any, texts: dict[int, str]) -> list[Event]:
        # One event per token (a token whose bytes do not yet make a character arrives with empty
        # text and still gets its event), their texts joining to the chunk's text.
        toks = tokens(choice, piece, texts)
        if not piece and not toks and reason is None:
            return []
        if not toks and merged_ids(choice):
            toks = merged_tokens(choice, piece, texts, reason is not None)
        if not toks:  # an empty final chunk stands for the end-of-sequence token (special)
            ids = choice.get("token_ids") or []
            toks = [Tok(ids[0] if len(ids) == 1 else -1, piece, None, special=not piece)]
        tops = top_tokens(choice, texts) if self.req.top_n else []
        out = []
        for i, tok in enumerate(toks):
            if not tok.special:
                self.count += 1
                self.text.append(tok.text)
            event = Event(tok, tops[i] if i < len(tops) else [])
            if reason is not None and i == len(toks) - 1:
                why = finish_reason(reason, self.req.stop, choice.get("stop_reason"))
                event.final = (why, self.count, "".join(self.text))
            out.append(event)
        return out

    def _plain(self, choice: dict[str, Any], piece: str, reason: Any) -> list[Event]:
        """`events` of a chunk without logprobs that is not several tokens merged (merged_ids): every
        chunk of most streams, one token, without the general path's per-token alignment."""
        if not piece and reason is None:
            return []
        ids = choice.get("token_ids") or []
        tok = Tok(ids[0] if len(ids) == 1 else -1, piece, None, special=not piece)
        if piece:
            self.count += 1
            self.text.append(piece)
        event = Event(tok, [])
        if reason is not None:
            why = finish_reason(reason, self.req.stop, choice.get("stop_reason"))
            event.final = (why, self.count, "".join(self.text))
        return [event]
