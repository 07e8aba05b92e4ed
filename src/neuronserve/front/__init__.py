"""The front server on :8080: /ping from an explicit state, /invocations (OpenAI passthrough, TGI/LMI
translation), the engine's OpenAI routes proxied on the same port. HTTP only: it imports nothing that
stages models or reads the host, and never runs the server itself (neuronserve.serve does).

Small modules, one job each:
- the HTTP layer: `routes` (the one route table: routes, allowlist, 405s), `app` (the handlers),
  `gate` (pure-ASGI gate: allowlist, phase, concurrency, metrics, the per-request log line),
  `disconnect` (cancel work when the client leaves), `state` (phases), `metrics` (the front's series),
  `request_cost` (a request's sequences: the per-request limit and its weight in the gate);
- errors and protocols: `errors` (typed errors, the one status table, the one shape), `dialect`
  (OpenAI passthrough, TGI, LMI: each request's answer and error shapes), `schema` (which request a
  body is), `genparams` + `checks` (generate parameters -> one engine body), `generate` (the generate
  flow over the engine), `completion_reader` (engine choices -> dialect-neutral sequences and token
  events), `tgi` and `lmi` (their wire shapes), `sse` (incremental SSE / JSON lines parsing);
- the engine side: `proxy` (the one engine client, streaming passthrough), `router`, `sessions` and
  `replica_metrics` (several replicas behind one front).
"""
