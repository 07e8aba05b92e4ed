"""The rewritten plugin's compile cache: the keyed S3 cache of plan/build.py and stage/cache.py, pointed
at the directory vllm-neuron 0.24 (lane 2.32) compiles into, or for lane 2.33 at the whole
VLLM_CACHE_ROOT, which also holds the native route's precompile cache (rules.py says why) (pure).

What the docs say (aws-neuron/aws-neuron-sdk vllm-neuron/docs/ at the 2.32.0 release):
- The local cache is `$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/` (compilation_cache.md:30-33, :149;
  reference-configuration.md:200), on by default, file-locked between ranks (:35-39). So the plan sets
  VLLM_CACHE_ROOT to `<work_dir>/artifacts/<cache_key>` and the artifact spec's local directory is its
  `neuron/compile_cache`: the same key, manifest, fetch before start and publish after READY as lane
  2.27's NEFF directory; only the directory differs (NeuronEngine.artifacts_subdir).
- NEURON_COMPILED_ARTIFACTS is still in reference-configuration.md:192 and features-guide.md:44-56,
  :1043, but the plugin never reads it (vllm-project/vllm-neuron#38; aws-neuron-sdk PR #1371 moved the
  setup pages to VLLM_CACHE_ROOT). The plan does not set it, and a user's local path in it (a directory
  the engine would never look at) is refused naming VLLM_CACHE_ROOT's keyed cache; an s3:// one is
  still the explicit fetch location, staged into the compile-cache directory.
- VLLM_NEURON_DISABLE_WARMUP_COMPILE=1 "treat[s] a local cache miss as a fatal error" and raises
  RuntimeError instead of compiling (compilation_cache.md:153, :215-223; reference-configuration.md:199):
  that is the plugin's own "no compile" switch, so NEURONSERVE_REQUIRE_CACHE_HIT=true sets it. It is
  "incompatible with NEURON_LIBTORCH_DISABLE_COMPILE_CACHE" (:153): the two together are refused.
- NEURON_LIBTORCH_REMOTE_CACHE is an NFS/FSx path shared between nodes, fetched on a local miss
  (compilation_cache.md:41-49, :150; reference-configuration.md:196); S3 only through an FSx for Lustre
  mount (:48-49). A user's value passes to the engine as given; an s3:// value is refused naming
  NEURONSERVE_CACHE_URI (neuronserve's S3 cache).

What the docs do not settle:
- Whether a remote-cache hit counts as a "local cache miss" under DISABLE_WARMUP_COMPILE: :153 says a
  local miss is fatal, yet the consumer workflow of :215-223 sets both and expects remote fetches.
  neuronserve stages the S3 entry into the local directory before the engine starts, so its hits are
  local hits either way.
- Whether the switch covers graphs compiled after warmup (the name says warmup; :153 says any local
  miss). additional-config.md:278-280 allows compiles after warmup for inputs outside the buckets.
- Which files of a `<hash>/` entry must be published: the docs name none; aws-neuron-sdk#1368 shows
  entries ending in a `.compilation_complete` marker and lock files beside them (:38, :98). The stage
  publishes the directory whole, as for lane 2.27 (an entry still compiling at READY is not expected:
  warmup compiles every bucket before the server answers, features-guide.md:34-36).
- Whether the plugin tolerates neuronserve's manifest file beside the `<hash>/` directories: its
  lookups are by hash directory (:56-72), so a top-level file should not be read.
"""

from __future__ import annotations

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.lanes.native.rules import (
    BACKEND_VAR,
    COMPILE_CACHE_SUBDIR,
    PRECOMPILE_VAR,
    V0_24,
    NativeRules,
)
from neuronserve.plan.resolution import Resolution

__all__ = ["COMPILE_CACHE_SUBDIR", "cache_env", "check_artifacts_setting", "compile_env"]
REMOTE_VAR = "NEURON_LIBTORCH_REMOTE_CACHE"
DISABLE_CACHE_VAR = "NEURON_LIBTORCH_DISABLE_COMPILE_CACHE"
NO_COMPILE_VAR = "VLLM_NEURON_DISABLE_WARMUP_COMPILE"


# What a value other than the plan's costs (lane 2.33; how-to-precompile-cache.md).
_WHY_NOT = {
    BACKEND_VAR: "off the native route the precompile cache does not apply, so every start traces again",
    PRECOMPILE_VAR: "the precompile cache is off, so every start traces the model again (the keyed cache "
    "then carries compiled graphs only)",
}


def cache_env(local_dir: str) -> dict[str, str]:
    """The engine environment for the compile-cache directory `local_dir` (the artifact spec's, which
    ends in COMPILE_CACHE_SUBDIR): VLLM_CACHE_ROOT is its root; NEURON_COMPILED_ARTIFACTS is not set."""
    suffix = "/" + COMPILE_CACHE_SUBDIR
    root = local_dir.removesuffix(suffix) if local_dir.endswith(suffix) else local_dir
    return {"VLLM_CACHE_ROOT": root}


def compile_env(settings: Settings, res: Resolution, rules: NativeRules = V0_24) -> dict[str, str]:
    """The engine environment the cache settings decide, besides VLLM_CACHE_ROOT (cache_env): the lane's
    own (rules.engine_env: lane 2.33's native route and precompile cache), then the no-compile switch."""
    env: dict[str, str] = dict(rules.engine_env)
    user = res.user_env
    for var, planned in rules.engine_env.items():  # a user's own value wins, said (rules.py: why set)
        given = user.get(var)
        if given is not None and given.strip() != planned:
            env[var] = given.strip()
            res.warn(f"{var}={given.strip()} given (the plan sets {planned}): {_WHY_NOT[var]}")
    remote = user.get(REMOTE_VAR)
    if remote is not None and remote.strip().lower().startswith("s3://"):
        raise ConfigError(
            f"{REMOTE_VAR}={remote}: the plugin's remote cache is a mounted path (NFS/FSx), not S3: "
            "set NEURONSERVE_CACHE_URI to the s3:// prefix (neuronserve's keyed cache) and unset "
            f"{REMOTE_VAR}, or mount the bucket with FSx for Lustre and give its path",
            (REMOTE_VAR, "NEURONSERVE_CACHE_URI"),
        )
    disabled = (user.get(DISABLE_CACHE_VAR) or "").strip() not in ("", "0")
    if settings.fit.require_cache_hit:
        if disabled:
            raise ConfigError(
                f"NEURONSERVE_REQUIRE_CACHE_HIT=true sets {NO_COMPILE_VAR}=1, which {rules.plugin} "
                f"refuses with {DISABLE_CACHE_VAR} set: unset {DISABLE_CACHE_VAR}",
                ("NEURONSERVE_REQUIRE_CACHE_HIT", DISABLE_CACHE_VAR),
            )
        env[NO_COMPILE_VAR] = "1"
    elif disabled and settings.cache_uri:
        res.warn(
            f"{DISABLE_CACHE_VAR} is set: the engine writes no compile cache, so NEURONSERVE_CACHE_URI "
            "is never filled; unset it to publish compiled graphs"
        )
    return env


def check_artifacts_setting(settings: Settings, rules: NativeRules = V0_24) -> None:
    """A local NEURON_COMPILED_ARTIFACTS (or OPTION_COMPILED_GRAPH_PATH) is a directory vllm-neuron 0.24
    never reads (vllm-project/vllm-neuron#38; 0.29's docs name only VLLM_CACHE_ROOT): refused, naming
    the lane's compile cache."""
    given = settings.artifacts
    if given is None or str(given.value).startswith("s3://"):
        return
    raise ConfigError(
        f"{given.origin}={given.value}: {rules.plugin} does not read it (vllm-project/vllm-neuron#38); "
        f"in lane {rules.lane} compiled graphs live under $VLLM_CACHE_ROOT/{COMPILE_CACHE_SUBDIR}, which the "
        "plan sets: unset it and set NEURONSERVE_CACHE_URI (s3:// keyed cache), or give an s3:// location",
        (given.origin, "NEURONSERVE_CACHE_URI"),
    )
