"""Rules on override_neuron_config itself: keys that shadow the launch, and nested configs NxD Inference
reads key by key (sampling, chunked prefill, LoRA).

The plugin merges the override over its defaults with a plain dict.update (vllm-neuron 0.2.2+lts
worker/neuronx_distributed_model_loader.py:873-880), one level deep. So a top-level key replaces the launch's
own number, and a nested object replaces the plugin's whole default object; NxD Inference then pops the keys
it knows from the nested object and silently drops the rest (nxdi config.py:931-959). Each rule here turns one
of those silent outcomes into a refusal (or a rewrite the plan says out loud).
"""

from __future__ import annotations

from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import json_int
from neuronserve.plan.lanes.nxdi import derive
from neuronserve.plan.lanes.nxdi.profiles import V0_2, PluginRules, plugin_at_least
from neuronserve.plan.lanes.sampling import sampling_config
from neuronserve.plan.resolution import Resolution


def check_launch_duplicates(launch: dict[str, tuple[Any, str]], res: Resolution) -> None:
    """Launch duplicates: an override key that duplicates a launch setting must agree with it.

    `launch` maps neuron_config keys to (the value the plugin derives from the vLLM flags, the setting
    that decides it), as in vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:754-794
    (tp_degree <- tensor_parallel_size, batch_size <- max_num_seqs or 1 with chunked prefill, seq_len <-
    max_model_len, torch_dtype <- dtype, speculation keys <- speculative_config). Because :880 applies the
    override after those defaults, a disagreeing key would compile the override's number while vLLM schedules
    for the flag's, and every later rule would check the wrong number. Agreement passes (it changes nothing).
    """
    override = res.override
    for key, (expected, setting) in launch.items():
        if key not in override:
            continue
        given = override[key]
        same = _norm_dtype(given) == _norm_dtype(expected) if key == "torch_dtype" else given == expected
        if not same:
            var = res.origin(key)
            raise ConfigError(
                f"{var} sets {key}={json_text(given)} but the launch gives {key}={json_text(expected)} "
                f"({setting}); the plugin merges the override over its own value (vllm-neuron 0.2.2+lts "
                f"worker/neuronx_distributed_model_loader.py:880), so the compiled graph and vLLM would "
                f"disagree: remove {var}, or change {setting.split('=')[0]} instead",
                (var, setting.split("=")[0]),
            )


def _norm_dtype(value: Any) -> str:
    text = str(value).removeprefix("torch.")
    return {"half": "float16", "float": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(text, text)


def json_text(value: Any) -> str:
    return "true" if value is True else "false" if value is False else "null" if value is None else str(value)


def check_sampling(res: Resolution) -> None:
    """On-device sampling as the plugin and NxD Inference run it.

    - NEURON_ON_DEVICE_SAMPLING_DISABLED is read as bool(int(value))
      (worker/neuronx_distributed_model_loader.py:67-68) and, when true, the model calls `Sampler()`
      (:70), but `Sampler` is vLLM's sampler module (`from vllm.v1.sample import sampler as Sampler`,
      :47; 0.4.1 :54 and :81 the same): TypeError ('module' object is not callable) when the engine
      loads the model. A non-zero integer is refused saying so, 0 is harmless and passes, a non-integer
      raises ValueError in int() and is refused as no integer.
    - A partial on_device_sampling_config replaces the plugin's default OnDeviceSamplingConfig(dynamic=
      True, deterministic=False) whole (worker/neuronx_distributed_model_loader.py:734-735, 880), and
      NxD Inference defaults dynamic to False (nxdi config.py:937): every request would be sampled with
      the config's fixed parameters, i.e. greedily by default. The plan fills in the plugin's
      dynamic/deterministic defaults for keys the user left out, and says so.
    - global_topk above 256: the runner logs a warning and caps it at 256
      (worker/neuronx_distributed_model_runner.py:259-267, 1245-1251): no failure, so it is planned
      and said (the larger graph buys nothing); below 1 or no integer is refused. Requests' top_k
      above min(global_topk, 256) are clamped by the runner (:1257-1260): said with the number.
    - Unknown keys are dropped by OnDeviceSamplingConfig (nxdi config.py:931-941): refused.
    The config as checked (completed) is res.sampling.
    """
    override = res.override
    raw = res.user_env.get("NEURON_ON_DEVICE_SAMPLING_DISABLED")
    if raw is not None:
        text = raw.strip() or "0"
        if not text.removeprefix("-").isdecimal():  # "--0" and "²" crashed int()
            raise ConfigError(
                f"NEURON_ON_DEVICE_SAMPLING_DISABLED={raw} is no integer (vllm-neuron reads it with int() "
                "and fails at load): unset it (or set 0) and set SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null "
                "for CPU sampling",
                ("NEURON_ON_DEVICE_SAMPLING_DISABLED",),
            )
        if int(text) != 0:
            raise ConfigError(
                f"NEURON_ON_DEVICE_SAMPLING_DISABLED={raw} fails the engine at load: vllm-neuron imports "
                "vLLM's sampler module as Sampler and calls it (TypeError: 'module' object is not "
                "callable): unset it (or set 0) and set SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null for CPU "
                "sampling (needed for logprobs)",
                ("NEURON_ON_DEVICE_SAMPLING_DISABLED",),
            )
    cfg = override.get("on_device_sampling_config")
    var = res.origin("on_device_sampling_config")
    if cfg is None:
        return
    cfg = sampling_config(cfg, var, derive.SAMPLING_KEYS, _unknown_sampling_keys)
    topk = cfg.get("global_topk", derive.MAX_DEVICE_TOPK)
    most = derive.MAX_DEVICE_TOPK
    if not json_int(topk) or topk < 1:
        raise ConfigError(
            f"{var}: global_topk={topk} must be a positive integer (the plugin samples at most {most} on "
            f"device): set global_topk <= {most}",
            (var,),
        )
    if topk > most:
        res.warn(
            f"{var}: global_topk={topk} is above {most}: the plugin samples at most {most} on device (it "
            f"caps requests' top_k there), so a top-k of {topk} is compiled for nothing: set global_topk "
            f"<= {most}"
        )
        topk = most
    missing = {k: v for k, v in derive.PLUGIN_SAMPLING_DEFAULT.items() if k not in cfg}
    if missing:
        cfg = override["on_device_sampling_config"] = {**cfg, **missing}
        res.warn(
            f"{var}: added the plugin's defaults {missing} (a partial config replaces them, and "
            "NxD Inference's own default dynamic=false samples every request greedily)"
        )
    elif cfg.get("dynamic") is False:
        res.warn(f"{var}: dynamic=false ignores each request's temperature/top_k/top_p")
    res.sampling = cfg
    res.warn(f"on-device sampling: requests' top_k above {topk} are clamped to {topk} by the plugin")


def _unknown_sampling_keys(keys: str, allowed: str) -> str:
    return f"unknown key(s) {keys} (NxD Inference drops them silently): use only {allowed}"


def check_chunked_config(seqs: int, res: Resolution) -> None:
    """The chunked-prefill config: chunked_prefill_config keys as NxD Inference reads them.

    ChunkedPrefillConfig (nxdi config.py:944-959) pops max_num_seqs, tkg_model_enabled,
    kernel_q_tile_size and kernel_kv_tile_size and ignores anything else; max_num_seqs defaults to 0,
    which makes the chunked-prefill kernel's tile count 0 (autobucketing.py:123-124). So unknown keys
    (a misspelt max_num_seq) are refused, and a missing max_num_seqs is set to vLLM's max_num_seqs.
    """
    override = res.override
    cfg = override.get("chunked_prefill_config")
    if not isinstance(cfg, dict):
        return
    var = res.origin("chunked_prefill_config")
    unknown = sorted(set(cfg) - derive.CHUNKED_KEYS)
    if unknown:
        raise ConfigError(
            f"{var}: unknown key(s) {', '.join(unknown)} (NxD Inference ignores them and uses its "
            f"defaults, max_num_seqs=0): use only {', '.join(sorted(derive.CHUNKED_KEYS))}, e.g. "
            f'{{"max_num_seqs": {seqs}}}',
            (var,),
        )
    value = cfg.get("max_num_seqs")
    if value is None:
        override["chunked_prefill_config"] = {**cfg, "max_num_seqs": seqs}
        res.warn(f"{var}: max_num_seqs set to max_num_seqs {seqs} (NxD Inference's default is 0)")
    elif not json_int(value) or value < 1:
        raise ConfigError(f"{var}: max_num_seqs must be a positive integer, e.g. {seqs}", (var,))


LORA_KEYS = ("lora_ckpt_json", "target_modules", "lora_modules")
LORA_FROM = (0, 2, 2)  # the first vllm-neuron that builds LoRA


def check_lora(lora: bool, plugin_version: str | None, res: Resolution, rules: PluginRules = V0_2) -> None:
    """LoRA by plugin version, read from the plugin's source.

    - vllm-neuron 0.2.0 raises NotImplementedError for any LoRA config (loader.py:681-683,
      runner.py:152-154 and 178-181): refused before 0.2.2.
    - 0.2.2+lts builds NxD Inference's LoraServingConfig in `_get_nxdi_lora_config`
      (worker/neuronx_distributed_model_runner.py:155-192): it pops `target_modules` and
      `lora_ckpt_json` from override_neuron_config (:175-177) and takes max_loras / max_lora_rank /
      max_cpu_loras from vLLM (:178-187). An unknown version is taken as the image's 0.2.2+lts.
    - The adapters must be in the `lora_ckpt_json` list: NxD Inference compiles and loads only those,
      and the runner maps a request's adapter name to their index (:975-976). The plan writes that list
      from SM_VLLM_LORA_MODULES (plan/assets/lora.py) and puts its path in the override before this rule runs;
      a user's own SM_NEURON_LORA_CKPT_JSON (without SM_VLLM_LORA_MODULES) is still honoured as given.
      LoRA on with neither is refused.
    - LoRA keys with LoRA off are refused: `_get_nxdi_lora_config` runs only with a LoRA config
      (:217-220), so the keys would stay in the override and reach NxD Inference as unknown keys.
    - Lane 2.28 (vllm-neuron 0.4.1, `rules.adapters_at_start` False): the list is optional (0.4.1
      runner :485 pops it with a None default) and the model's own adapter manager (:538-539) takes
      adapters at run time (dynamic multi-LoRA, :487-490; worker add_lora, 0.4.1 neuron_worker.py:204-205),
      so LoRA without named adapters is planned, with a warning saying how adapters then arrive. Whether
      NxD Inference of SDK 2.28 compiles with no adapter list was not read (its source is not at hand).
    """
    override = res.override
    var = res.origins["enable-lora"]
    keys = [k for k in LORA_KEYS if k in override]
    if not lora:
        if keys:
            key_var = res.origin(keys[0])
            raise ConfigError(
                f"{key_var} sets {keys[0]} but LoRA is off: set SM_VLLM_ENABLE_LORA=true, or remove it",
                (key_var, var),
            )
        return
    if not plugin_at_least(plugin_version, LORA_FROM):
        raise ConfigError(
            f"{var}: LoRA raises NotImplementedError in vllm-neuron {plugin_version} (0.2.2+lts adds it): "
            f"unset {var}, or use the image's vllm-neuron 0.2.2+lts",
            (var,),
        )
    if not isinstance(override.get("lora_ckpt_json"), str) and not rules.adapters_at_start:
        _check_target_modules(var, res, rules)
        res.warn(
            f"{var}=true with no adapters named: {rules.plugin} loads them at run time "
            "(VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 and the engine's /v1/load_lora_adapter, which the front "
            "forwards only with NEURONSERVE_EXPOSE_ENGINE_ROUTES=true); name them in SM_VLLM_LORA_MODULES "
            "to have them staged and compiled at start"
        )
    elif not isinstance(override.get("lora_ckpt_json"), str):
        raise ConfigError(
            f"{var}=true on vllm-neuron 0.2.2 needs its adapters named: set "
            'SM_VLLM_LORA_MODULES="name=s3://bucket/adapter/ other=/local/dir" (staged, and the plan '
            "writes the plugin's lora_ckpt_json from them)",
            (var, "SM_VLLM_LORA_MODULES"),
        )


def _check_target_modules(var: str, res: Resolution, rules: PluginRules) -> None:
    """LoRA with no adapter at start needs the target modules said: NxD Inference's LoraServingConfig
    sets target_modules to the union of the start adapters' (none: []) unless the given ones cover them
    (modules/lora_serving/config.py:58-67, NxD Inference 2.28.0; building it shows []), and injection
    then matches no module and raises "Target modules [] not found in the base model"
    (modules/lora_serving/lora_model.py:57-74) when the model is built. The runner pops
    `target_modules` from the override (0.4.1 runner :483): SM_NEURON_TARGET_MODULES, a JSON list of
    module names or a regular expression (lora_model.py:108-116)."""
    given = res.override.get("target_modules")
    named = isinstance(given, str) and given.strip()
    listed = isinstance(given, list) and given and all(isinstance(m, str) and m.strip() for m in given)
    if named or listed:
        return
    t_var = res.origin("target_modules")
    raise ConfigError(
        f"{var}=true with no adapters named: {rules.plugin} gives NxD Inference no target modules to inject "
        'LoRA into (it reads them from the adapters named at start), and the build fails with "Target '
        f'modules [] not found in the base model": set {t_var}=\'["q_proj", "v_proj"]\' (the modules your '
        "adapters train), or name the adapters in SM_VLLM_LORA_MODULES",
        (t_var, "SM_VLLM_LORA_MODULES"),
    )


def check_lora_rank(rank: int | None, var: str, rules: PluginRules) -> None:
    """--max-lora-rank as the lane's vLLM accepts it: vLLM 0.11.0's LoRAConfig refuses any rank outside
    8..512 (config/lora.py:104-109, no 1) at engine start, 0.13.0's allows 1 (config/lora.py:25):
    PluginRules.lora_ranks. (plan/assets/lora.py checks the union on every device.)"""
    if rank is not None and rank not in rules.lora_ranks:
        raise ConfigError(
            f"{var}={rank}: {rules.vllm} accepts a max LoRA rank of {', '.join(map(str, rules.lora_ranks))}: "
            "set the smallest one at least your adapters' rank `r`",
            (var,),
        )


def check_lora_modules(modules_var: str, res: Resolution) -> None:
    """SM_VLLM_LORA_MODULES and a user's own lora_ckpt_json name the adapters twice: the plan writes the
    plugin's list from the staged adapters (plan/assets/lora.py), and a second list could name other adapters
    or paths the engine cannot read, so the two together are refused."""
    if "lora_ckpt_json" in res.override:
        key_var = res.origin("lora_ckpt_json")
        raise ConfigError(
            f"{modules_var} and {key_var} both name the LoRA adapters: keep {modules_var} (the plan "
            f"stages them and writes lora_ckpt_json itself) and remove {key_var}",
            (modules_var, key_var),
        )
