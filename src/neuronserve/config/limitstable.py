"""Rows of the settings table for the limits neuronserve puts on what one client, one archive or one
failing replica may cost: open connections, header and body time and size, sequences per request, the
concurrency and session caps, the engine pool and metrics scrapes, archive members and bytes, replica
restarts.

Why a table of their own: these are the knobs an operator turns when an endpoint is probed or flooded,
and each default is a documented bound (docs/RELIABILITY.md) rather than a tuning choice; hosttable.py
gathers them with the other `NEURONSERVE_*` rows.
"""

from __future__ import annotations

from neuronserve.config import values as p
from neuronserve.config.var import NS, Var

LIMIT_VARS: tuple[Var, ...] = (
    Var(
        "NEURONSERVE_MAX_CONCURRENCY",
        "",
        256,
        NS,
        "Requests in flight before 429 (0 = unlimited)",
        p.whole_number,
        "serve.max_concurrency",
    ),
    Var(
        "NEURONSERVE_MAX_SEQUENCES_PER_REQUEST",
        "",
        32,
        NS,
        "Sequences one request may ask for (prompts x n or best_of, every dialect); over it: 4xx",
        p.at_least_one,
        "serve.max_sequences_per_request",
    ),
    Var(
        "NEURONSERVE_ENGINE_CONNECTIONS",
        "",
        None,
        NS,
        "Connections to the engine(s) the front keeps at most; waiting for one is not a timeout",
        p.at_least_one,
        "serve.engine_connections",
        "NEURONSERVE_MAX_CONCURRENCY + 32 (at least 64; 1024 when unlimited)",
    ),
    Var(
        "NEURONSERVE_METRICS_CACHE_S",
        "",
        1.0,
        NS,
        "Seconds one scrape of the engine's /metrics is reused by concurrent and later scrapes",
        p.number,
        "serve.metrics_cache_s",
    ),
    Var(
        "NEURONSERVE_MAX_SESSIONS",
        "",
        10000,
        NS,
        "Sticky sessions open at once; NEW_SESSION beyond it gets 429",
        p.at_least_one,
        "serve.max_sessions",
    ),
    Var(
        "NEURONSERVE_ALLOW_PROMPT_EMBEDS",
        "",
        False,
        NS,
        "Forward `prompt_embeds` and `image_embeds` inputs (vLLM advisories GHSA-mrw7-hf4f-83pf, "
        "GHSA-pqhm-4wvf-2jg8); the engine needs its own opt-in flags too",
        p.boolean,
        "serve.allow_prompt_embeds",
    ),
    Var(
        "NEURONSERVE_MAX_RESTARTS",
        "",
        5,
        NS,
        "Restarts of one data-parallel replica allowed within NEURONSERVE_RESTART_WINDOW_S; one more "
        "death there exits the server (0 = never restart)",
        p.whole_number,
        "serve.max_restarts",
    ),
    Var(
        "NEURONSERVE_RESTART_WINDOW_S",
        "",
        600.0,
        NS,
        "Window in seconds over which NEURONSERVE_MAX_RESTARTS counts a replica's deaths",
        p.seconds_above_zero,
        "serve.restart_window_s",
    ),
    Var(
        "NEURONSERVE_HEADER_TIMEOUT_S",
        "",
        10.0,
        NS,
        "Seconds a client has from a request's first byte (a new connection: from the accept) to the end "
        "of its headers; slower, the connection is closed (read by the front server at start)",
        p.seconds_above_zero,
    ),
    Var(
        "NEURONSERVE_BODY_TIMEOUT_S",
        "",
        30.0,
        NS,
        "Seconds a client has to send a request's whole body once its headers arrived; slower, it gets 408 "
        "and the connection is closed. No concurrency slot is taken before the body is in "
        "(read by the front server at start)",
        p.seconds_above_zero,
    ),
    Var(
        "NEURONSERVE_MAX_HEADER_BYTES",
        "",
        65536,
        NS,
        "Bytes of a request line and headers, counted as they arrive; over it, 431 and the connection is "
        "closed (read by the front server at start)",
        p.at_least_one,
    ),
    Var(
        "NEURONSERVE_MAX_CONNECTIONS",
        "",
        1024,
        NS,
        "Open client connections served; 32 more answer only /ping (others 503), beyond that a connection "
        "is closed at accept. The front raises its open-file limit to the hard limit at start and lowers "
        "this to fit it (read by the front server at start)",
        p.at_least_one,
    ),
    Var(
        "NEURONSERVE_ARCHIVE_MAX_MEMBERS",
        "",
        100_000,
        NS,
        "Most members (files and directories) a model.tar.gz may hold; extraction stops past it",
        p.at_least_one,
    ),
    Var(
        "NEURONSERVE_ARCHIVE_MAX_BYTES",
        "",
        None,
        NS,
        "Most bytes a model.tar.gz may expand to (its members' declared sizes, checked before writing)",
        p.at_least_one,
        default_doc="the destination's free space less 5% (at most 1 GiB)",
    ),
)
