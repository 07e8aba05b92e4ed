"""scripts/serve-local's look at a Hugging Face hub model before anything starts.

On the CPU a hub id is downloaded by the engine itself (stage/sources.py leaves it to vLLM), so a
model the machine cannot get (no network, a typo, a gated repo) ended in a 40-line vLLM traceback a
minute later. This plans the start as `neuronserve serve --device cpu` would (same environment, same
`-- ...` engine arguments) and, when the model is a hub id the engine would download, answers in one
line: in the local hub cache, fine; else the hub must say the repo is there. Exit 2 with
`serve-local: error: ...` otherwise; 0 in every other case (a configuration error is left to
`neuronserve serve`, which says it in its own words).

Usage: python scripts/hub_preflight.py [SERVE ARGS...]   (PYTHONPATH holds the checkout's src/)
"""

from __future__ import annotations

import os
import sys

from huggingface_hub import HfApi, constants, try_to_load_from_cache
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

from neuronserve.errors import NeuronServeError
from neuronserve.launchplan import resolve_plan

TIMEOUT_S = 10.0


def hub_problem(repo: str, revision: str | None, origin: str) -> str | None:
    """Why the engine could not get `repo`, in one line; None when it can (cached, or on the hub)."""
    named = f"{origin}={repo}" if origin else repo
    if isinstance(try_to_load_from_cache(repo, "config.json", revision=revision), str):
        return None  # the engine starts from the local hub cache
    cache = constants.HF_HUB_CACHE
    if constants.HF_HUB_OFFLINE:
        return (
            f"{named} is not in the local hub cache ({cache}) and HF_HUB_OFFLINE is set: download it "
            f"first (`hf download {repo}`), unset HF_HUB_OFFLINE, or serve a local model directory"
        )
    endpoint = constants.ENDPOINT
    try:
        HfApi(endpoint=endpoint).model_info(repo, revision=revision, timeout=TIMEOUT_S)
    except GatedRepoError:
        return f"{named} is gated: accept its terms at {endpoint}/{repo} and set HF_TOKEN"
    except RevisionNotFoundError:
        return f"{named}: the hub has no revision {revision!r} of it"
    except RepositoryNotFoundError:
        return f"{named}: no such model on {endpoint} (a private one needs HF_TOKEN)"
    except Exception as err:  # any way of not reaching the hub: DNS, refused, TLS, timeout, proxy
        why = (str(err).strip().splitlines() or [""])[0][:160]
        return (
            f"{named} is a Hugging Face hub id, but {endpoint} cannot be reached ({type(err).__name__}: "
            f"{why}) and the model is not in the local hub cache ({cache}): connect this machine to the "
            "hub, or set SM_VLLM_MODEL to a local model directory"
        )
    return None


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
