"""What differs between the lanes of the rewritten plugin (vllm-neuron 0.24 in SDK 2.32, 0.29 in SDK 2.33):
one `NativeRules` each, read by the one renderer (engine.py, cache.py) as `Lane.native`, so a lane of
this generation is data here plus its registry entry, never a copy of the renderer.

Lane 2.33's facts, from AWS's docs built from aws-neuron/aws-neuron-sdk at tag v2.33.0
(awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/, cited as page and date; the repository snapshot
reachable here stops at 2.32, so no commit can be given):
- vLLM Neuron 0.29.0.1.2.0 (Beta) in SDK 2.33.0, on Trn2/Trn3 only (release-notes/components/index.html;
  vllm-neuron/docs/getting-started/setup-guide.html: "relevant for: Trn2, Trn3").
- The compile goes through `torch.compile` with the backend VLLM_NEURON_BACKEND names; `neuron_native`
  is the native route, the XLA route is deprecated (SDK 2.33.0 release notes;
  vllm-neuron/docs/design/compilation/index.html at v2.33.0: `torch.compile(backend=
  envs.get_compile_backend_name())`, "How vLLM is integrated with TorchNeuron").
- The precompile cache saves the native route's trace and reuses it at the next start; it is read
  from VLLM_CACHE_ROOT, which "must survive between starts", and TORCH_CACHING_PRECOMPILE=0 turns it
  off (vllm-neuron/docs/guides/how-to-precompile-cache.md). Its default is disputed: the page in the
  v2.34.0 docs (dated 2026-10-01) says on by default on the native route; the page at `latest`
  (2026-10-13) says on only when VLLM_NEURON_BACKEND is `neuron_native` or `neuron`, off when unset.
  The plan therefore sets both explicitly (`engine_env`): the route and the cache are the plan's,
  not a default nobody chose.
- The plugin's own compile cache is still `$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/`
  (compilation_cache.md in the v2.34.0 docs, unchanged from 2.32's page). So the keyed directory of
  lane 2.33 is VLLM_CACHE_ROOT itself (`keyed_subdir` ""): it holds both caches, and a pod that stages
  it starts from both (aws-neuron-sdk#1368: every cold start recompiled; the docs fix names
  VLLM_CACHE_ROOT). Lane 2.32 keeps its compile_cache subdirectory (its entries already in caches).
- additional_config has two namespaces, `neuron_config` and `encoder_neuron_config` (multimodal
  encoder settings) (vllm-neuron/docs/guides/reference-configuration.md at v2.33.0, dated 2026-10-16);
  2.32's `vision_neuron_config` is not among them.
- `neuron_config` fields read there: the bucket lists `num_batched_tokens_buckets`,
  `num_seqs_buckets`, `kv_segment_size_buckets` (the same rules as 2.32: the largest prefill bucket is
  max_num_batched_tokens, the largest decode bucket max_num_seqs). The rest of that page's table
  (sampling, quantization, KV cache, scheduling) was not readable here: FIELDS_0_29 lists only what
  was read, so translate.FIELDS_BY_LANE checks 2.33's keys against 2.32's documented list plus these
  (a key 2.33 dropped is not refused until its page can be read).
- LoRA: multi-LoRA arrives in SDK 2.34.0 (its release notes); 2.33 lists none, so it stays refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BACKEND_VAR = "VLLM_NEURON_BACKEND"
PRECOMPILE_VAR = "TORCH_CACHING_PRECOMPILE"


@dataclass(frozen=True)
class NativeRules:
    """One rewritten-plugin lane's differences. `plugin`: how messages name it ("vllm-neuron 0.24").
    `top_level`: its additional_config keys (its neuron_config fields: translate.FIELDS_BY_LANE).
    `keyed_subdir`: where, under VLLM_CACHE_ROOT, the keyed
    cache entry is ("" = the whole root). `engine_env`: variables the plan always sets for it."""

    lane: str
    plugin: str
    top_level: frozenset[str]
    keyed_subdir: str
    engine_env: dict[str, str] = field(default_factory=dict)


COMPILE_CACHE_SUBDIR = "neuron/compile_cache"  # under VLLM_CACHE_ROOT (compilation_cache.md:31, :149)

V0_24 = NativeRules(
    lane="2.32",
    plugin="vllm-neuron 0.24",
    top_level=frozenset({"neuron_config", "vision_neuron_config", "mm_language_model_only"}),
    keyed_subdir=COMPILE_CACHE_SUBDIR,
)

# The neuron_config fields read on 2.33's reference-configuration.md (see above): a partial list.
FIELDS_0_29 = frozenset({"num_batched_tokens_buckets", "num_seqs_buckets", "kv_segment_size_buckets"})

V0_29 = NativeRules(
    lane="2.33",
    plugin="vllm-neuron 0.29",
    top_level=frozenset({"neuron_config", "encoder_neuron_config"}),
    keyed_subdir="",
    engine_env={BACKEND_VAR: "neuron_native", PRECOMPILE_VAR: "1"},
)
