"""Can the engine get a hub model it downloads itself? Asked before it starts, in one line.

On the CPU device a hub id is left to vLLM (stage/sources.py): it downloads the repo when it loads.
A repo the machine cannot get (no network, a typo, a gated repo, HF_HUB_OFFLINE with nothing cached)
then ended in vLLM's traceback after the engine had started. This asks first, as vLLM would: the repo's
config.json in the local hub cache is enough (vLLM 0.11.0's vllm/transformers_utils/config.py:342-359,
`file_or_path_exists`, looks there first with `try_to_load_from_cache`, and :111 goes offline with
HF_HUB_OFFLINE); otherwise the hub must say the repo and revision are there (huggingface_hub's
`model_info`).

Why a child process (`python -m neuronserve.stage.hubprobe`): huggingface_hub reads HF_HUB_OFFLINE,
HF_HOME, HF_HUB_CACHE and HF_ENDPOINT into module constants when first imported. The child gets the
environment the engine gets, so it sees the cache and the switches the engine will see, whatever this
process imported before. It reads {"repo", "revision", "origin"} as JSON on stdin and writes
{"problem": <one line, or null>}. The token stays in its environment (never argv).

A failure of the probe itself (the child dies, huggingface_hub is missing) is no verdict: the start
goes on and the engine decides, as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

TIMEOUT_S = 10.0  # the hub's answer; the child as a whole gets 3x that (an import of huggingface_hub)


def hub_problem(repo: str, revision: str | None, origin: str) -> str | None:
    """Why the engine could not get `repo`, in one line naming the setting it came from (`origin`);
    None when it can. Runs in the process whose huggingface_hub constants describe the engine's
    environment."""
    named = f"{origin}={repo}" if origin else repo
    from huggingface_hub import HfApi, constants, try_to_load_from_cache  # noqa: PLC0415
    from huggingface_hub.errors import (  # noqa: PLC0415
        GatedRepoError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

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
            "hub, or set it to a local model directory"
        )
    return None


def probe(repo: str, revision: str | None, origin: str, env: Mapping[str, str]) -> str | None:
    """`hub_problem` asked in a child with the engine's environment `env`; None also when the child
    could not answer (the engine decides then, as before)."""
    request = json.dumps({"repo": repo, "revision": revision, "origin": origin})
    try:
        done = subprocess.run(
            [sys.executable, "-P", "-m", "neuronserve.stage.hubprobe"],
            input=request,
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=3 * TIMEOUT_S,
            check=False,
        )
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    problem = answer.get("problem") if isinstance(answer, dict) else None
    return problem if isinstance(problem, str) else None


def main() -> int:
    ask = json.loads(sys.stdin.read())
    problem = hub_problem(str(ask["repo"]), ask.get("revision"), str(ask["origin"]))
    sys.stdout.write(json.dumps({"problem": problem}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
