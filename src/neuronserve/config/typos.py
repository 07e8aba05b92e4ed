"""Names that look like a setting this project maps but are none: refused, naming the closest valid one.

A misspelled name is read by nobody, so its value silently takes the default: `OPTION_TENSOR_PARALLEL_DEGRE=4`
used to leave TP at every core, `HF_NUM_CORE` said nothing. Each namespace the project maps is checked
against the settings table itself (config/table.py, so rows added or removed elsewhere count at once):

- `NEURONSERVE_*` is ours: any name without a row is refused (the project's own tooling variables, read
  by scripts/ and the tests and never by the server, pass);
- `OPTION_*` and serving.properties `option.*` within a small edit distance of a mapped LMI option are
  refused; other unknown options keep the warning that lists them (config/compat.py), since LMI has many
  options with no vLLM-on-Neuron meaning;
- `HF_*` and LMI/TGI's unprefixed names (`TENSOR_PARALLEL_DEGREE`, `MAX_BATCH_SIZE`, `QUANTIZE`, ...)
  near a mapped name are refused, unless huggingface_hub reads the name (HUB_VARS), which passes untouched.

Pure: the caller passes the environment and the serving.properties keys.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from neuronserve.config.table import LMI_VARS, TGI_VARS, VARS
from neuronserve.errors import ConfigError

# Read by huggingface_hub 2.4.0 itself (huggingface_hub/constants.py and utils/_auth.py: every "HF_*"
# literal of the package; tests/unit/config/test_typos.py compares this list with the installed
# package's source), plus any HF_HUB_* name. They configure the hub client the stage and vLLM use.
HUB_VARS = frozenset(
    {
        "HF_ASSETS_CACHE",
        "HF_DEBUG",
        "HF_DEVICE_CODE_OAUTH_CLIENT_ID",
        "HF_EDITOR",
        "HF_ENDPOINT",
        "HF_HOME",
        "HF_INFERENCE_ENDPOINT",
        "HF_OIDC_ID_TOKEN",
        "HF_OIDC_RESOURCE",
        "HF_STORED_TOKENS_PATH",
        "HF_TOKEN",
        "HF_TOKEN_PATH",
        "HF_XET_CACHE",
        "HF_XET_HIGH_PERFORMANCE",
    }
)
HUB_PREFIX = "HF_HUB_"
# The project's tooling (scripts/bootstrap, scripts/test, scripts/mutation, the test tiers): never read
# by the server, often exported in a developer's shell.
TOOLING_VARS = frozenset(
    {
        "NEURONSERVE_PYTHON",
        "NEURONSERVE_VENV",
        "NEURONSERVE_REFERENCE_DIR",
        "NEURONSERVE_SKIP_DEPLOY_VENV",
        "NEURONSERVE_SKIP_IMAGE_DEPS",
        "NEURONSERVE_MUTATION_SAMPLE",
        "NEURONSERVE_IMAGE_CPU",
    }
)
OURS = "NEURONSERVE_"
# Settings this project had and removed: a deployment that still sets one keeps running, with a warning
# saying what became of it (refusing it would stop a working endpoint at its next update).
RETIRED = {
    "NEURONSERVE_FAST_PATH": "the fast path was removed (issue 41): every request takes uvicorn's cycle",
    "NEURONSERVE_PROBE_THREAD": "the probe doors were removed (issue 41): /ping and /live are answered by "
    "the serving loop, so a stuck loop fails them",
    "NEURONSERVE_PROBE_DOOR": "the probe doors were removed (issue 41): /ping and /live are answered by "
    "the serving loop, so a stuck loop fails them",
}


def distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions, one each."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def near(name: str, valid: Iterable[str]) -> str | None:
    """The valid name one edit away (two when both names have 12 characters or more), nearest first; None
    when none is that close. Small on purpose: LMI and the hub have many real names a wider net would
    catch (HF_MODEL_DIR is two edits from HF_MODEL_ID)."""
    scored = sorted((distance(name, v), v) for v in valid if v != name)
    close = [v for d, v in scored if d <= (2 if min(len(name), len(v)) >= 12 else 1)]
    return close[0] if close else None


def _mapped_elsewhere() -> list[str]:
    """LMI and TGI names without the OPTION_ prefix: HF_* ones and the bare ones (TENSOR_PARALLEL_DEGREE)."""
    return [n for n in (*LMI_VARS, *TGI_VARS) if not n.startswith("OPTION_")]


def _refuse(origin: str, closest: str, why: str) -> ConfigError:
    return ConfigError(f"{origin}: not a setting {why}: did you mean {closest}?", (origin,))


def check_option(name: str, origin: str) -> None:
    """An unknown LMI option (`OPTION_X`, or serving.properties `option.x` as OPTION_X) near a mapped one
    is refused, in the spelling the user wrote it in."""
    options = [n for n in LMI_VARS if n.startswith("OPTION_")]
    closest = near(name, options)
    if closest is None:
        return
    if origin != name:  # serving.properties: name the key as the file spells it
        closest = "option." + closest.removeprefix("OPTION_").lower()
    raise _refuse(origin, closest, "this image maps (LMI)")


def check_names(environ: Mapping[str, str]) -> list[str]:
    """Refuse an environment name that is a near miss of a mapped one (see the module docstring); return
    a warning for each retired setting still set (RETIRED)."""
    ours = [n for n in VARS if n.startswith(OURS)]
    bare = _mapped_elsewhere()
    warnings: list[str] = []
    for name in sorted(environ):
        if name in VARS or name in LMI_VARS:
            continue
        if name.startswith(OURS):
            if name in TOOLING_VARS:
                continue
            if name in RETIRED:
                warnings.append(f"{name} is ignored: {RETIRED[name]}; unset it")
                continue
            # compared after the prefix, which every candidate shares (NEURONSERVE_FOO is not "close" to
            # NEURONSERVE_HOST because both start with NEURONSERVE_)
            tails = {n.removeprefix(OURS): n for n in ours}
            found = difflib.get_close_matches(name.removeprefix(OURS), tails, n=1, cutoff=0.6)
            hint = (
                f"did you mean {tails[found[0]]}?"
                if found
                else "README.md, 'Configuration', lists every NEURONSERVE_* setting"
            )
            raise ConfigError(f"{name}: not a neuronserve setting: {hint}", (name,))
        if name in HUB_VARS or name.startswith(HUB_PREFIX):
            continue
        closest = near(name, bare)
        if closest is not None:
            source = "TGI / Hugging Face" if closest in TGI_VARS else "LMI"
            raise _refuse(name, closest, f"this image maps ({source})")
    return warnings
