"""scripts/serve-local's look at a Hugging Face hub model before anything starts.

On the CPU a hub id is downloaded by the engine itself (stage/sources.py leaves it to vLLM), so a
model the machine cannot get (no network, a typo, a gated repo) ended in a 40-line vLLM traceback a
minute later. `neuronserve serve` asks the same while staging (stage/hubprobe.py); this asks before
anything starts, so the answer comes in a second: it plans the start as `neuronserve serve --device
cpu` would (same environment, same `-- ...` engine arguments) and, when the model is a hub id the engine
would download, answers in one line: in the local hub cache, fine; else the hub must say the repo is
there. Exit 2 with
`serve-local: error: ...` otherwise; 0 in every other case (a configuration error is left to
`neuronserve serve`, which says it in its own words).

Usage: python scripts/hub_preflight.py [SERVE ARGS...]   (PYTHONPATH holds the checkout's src/)
"""

from __future__ import annotations

import os
import sys

from neuronserve.errors import NeuronServeError
from neuronserve.launchplan import resolve_plan
from neuronserve.stage.hubprobe import hub_problem


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    try:
        plan = resolve_plan(dict(os.environ), device="cpu", extra_args=tuple(extra))
    except NeuronServeError:
        return 0  # `neuronserve serve` refuses it next, with its own message
    model = plan.model
    if model.source != "hub" or model.local_path is not None:
        return 0
    problem = hub_problem(model.uri, model.revision, model.origin)
    if problem:
        print(f"serve-local: error: {problem}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
