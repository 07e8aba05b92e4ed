"""The front's HTTP server settings: uvicorn's config, the connection limits, the open-file limit.

Why the open-file limit is raised here: every client connection, every engine connection and every
file the front opens is a descriptor, and a container's soft limit is often 1024 while its hard limit
is far higher. Raising the soft limit to the hard one costs nothing, and the connection bound is then
kept under it (half of it: the other half is for the engine connections and files), so a flood of
clients meets a clear 503 or a closed connection rather than EMFILE in accept().
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Mapping
from typing import Any

import uvicorn

from neuronserve.config.table import VARS
from neuronserve.serve.connections import PING_RESERVE, ConnectionLimits, protocol_class
from neuronserve.types import ServeOptions

log = logging.getLogger("neuronserve.serve")

KEEP_ALIVE_S = 75  # idle keep-alive connections: longer than the ALB's and SageMaker's 60 s
MIN_CONNECTIONS = 16


def connection_limits(environ: Mapping[str, str]) -> ConnectionLimits:
    """The limits from NEURONSERVE_HEADER_TIMEOUT_S / _MAX_HEADER_BYTES / _MAX_CONNECTIONS (their rows)."""
    return ConnectionLimits(
        header_timeout_s=VARS["NEURONSERVE_HEADER_TIMEOUT_S"].read(environ),
        max_header_bytes=VARS["NEURONSERVE_MAX_HEADER_BYTES"].read(environ),
        max_connections=VARS["NEURONSERVE_MAX_CONNECTIONS"].read(environ),
    )


def body_timeout_s(environ: Mapping[str, str]) -> float:
    return float(VARS["NEURONSERVE_BODY_TIMEOUT_S"].read(environ))


def raise_file_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit to its hard limit (logged); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as err:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, err)
        return soft
    log.info("open-file limit raised from %d to %d (the hard limit)", soft, target)
    return target


def fit_to_files(limits: ConnectionLimits, soft_limit: int) -> ConnectionLimits:
    """The limits with max_connections (and its /ping reserve) kept within half the open-file limit."""
    room = soft_limit // 2 - PING_RESERVE
    if limits.max_connections <= room:
        return limits
    fitted = max(MIN_CONNECTIONS, room)
    log.warning(
        "NEURONSERVE_MAX_CONNECTIONS=%d does not fit the open-file limit %d: serving %d connections",
        limits.max_connections,
        soft_limit,
        fitted,
    )
    return ConnectionLimits(limits.header_timeout_s, limits.max_header_bytes, fitted)


def uvicorn_config(app: Any, opts: ServeOptions, limits: ConnectionLimits) -> uvicorn.Config:
    """The server's config: httptools with the connection guards (serve/connections.py), no access log
    of uvicorn's own (the gate writes one line per request), no lifespan.

    No proxy-headers layer: uvicorn wraps the app in ProxyHeadersMiddleware by default
    (uvicorn/config.py, `proxy_headers=True`), which rewrites the scope's `client` and `scheme` from
    X-Forwarded-For/-Proto for peers on 127.0.0.1; nothing in the front reads either (the access line
    has no client address, no route builds a URL), so it was one ASGI layer more per request for
    nothing (docs/PERFORMANCE.md, "Hot-path cuts")."""
    return uvicorn.Config(
        app,
        host=opts.host,
        port=opts.port,
        http=protocol_class(limits),
        lifespan="off",
        access_log=False,
        proxy_headers=False,
        log_config=None,
        backlog=2048,
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=3,
    )
