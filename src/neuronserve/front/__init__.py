"""The front server on :8080: /ping from an explicit state, /invocations (OpenAI passthrough, TGI/LMI
translation), the engine's OpenAI routes proxied on the same port.

Small modules, one job each: `state` (phases), `errors` (the one error table), `sse` (incremental SSE
parsing), `tgi` (generate-schema translation), `proxy` (streaming passthrough), `gate` (ASGI gate:
draining, concurrency, per-request log line), `app` (routes).
"""
