"""The wide set of configurations users arrive with (DLC `SM_VLLM_*`, LMI `OPTION_*`, TGI `HF_*`,
Neuron overrides), and the host facts to plan them on: one table for every test that checks the
planned engine argv (against vLLM 0.11.0's option table in the unit tier, and through the installed
vLLM's own parser in the integration tier)."""

from __future__ import annotations

from neuronserve.host import clitables
from neuronserve.plan.facts import HostFacts, ModelFacts

VERSIONS = {
    "vllm": "0.11.0",
    "vllm-neuron": "0.2.2+lts",
    "neuronx-distributed-inference": "0.7.14366",
    "neuronx-cc": "2.22.12471.0",
}
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096}

CONFIGS: list[dict[str, str]] = [
    {
        "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "SM_VLLM_MAX_MODEL_LEN": "128",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
        "SM_VLLM_BLOCK_SIZE": "32",
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "4096",
        "SM_VLLM_MAX_MODEL_LEN": "2048",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
        "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 8}',
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
    },
    {
        "HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct",
        "HF_NUM_CORES": "2",
        "MAX_BATCH_SIZE": "4",
        "MAX_TOTAL_TOKENS": "4096",
        "HF_MODEL_TRUST_REMOTE_CODE": "true",
    },
    {
        "OPTION_MODEL_ID": "s3://bucket/llama/",
        "OPTION_TENSOR_PARALLEL_DEGREE": "max",
        "OPTION_N_POSITIONS": "1024",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "16",
        "OPTION_DTYPE": "fp16",
        "OPTION_ROLLING_BATCH": "vllm",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_SERVED_MODEL_NAME": '["llama", "l3"]',
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_SEED": "7",
        "SM_VLLM_GENERATION_CONFIG": "vllm",
        "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true",
        "SM_VLLM_TOOL_CALL_PARSER": "llama3_json",
        "SM_VLLM_API_KEY": '["k1", "k2"]',
        "SM_VLLM_UVICORN_LOG_LEVEL": "warning",
        "SM_VLLM_MAX_NUM_SEQS": "2",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_NEURON_OVERRIDE_CONFIG": '{"enable_bucketing": true, "context_encoding_buckets": '
        '[512, 1024], "token_generation_buckets": [1024]}',
        "SM_VLLM_MAX_MODEL_LEN": "1024",
        "SM_VLLM_DTYPE": "float16",
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"top_k": 1, "dynamic": true}',
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/draft", "num_speculative_tokens": 5}',
        "SM_NEURON_QUANTIZED": "true",
        "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/q",
        "NEURONSERVE_CACHE_URI": "s3://c/",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_ADDITIONAL_CONFIG": '{"override_neuron_config": {"skip_warmup": true}}',
        "SM_VLLM_TRUST_REMOTE_CODE": "false",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
        "NEURON_LOGICAL_NC_CONFIG": "2",
        "SM_VLLM_CHAT_TEMPLATE": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_ENABLE_LORA": "true",
        "SM_VLLM_LORA_MODULES": "a=s3://b/a/ c=s3://b/c.tar.gz",
        "SM_VLLM_MAX_LORAS": "1",
        "SM_VLLM_MAX_CPU_LORAS": "2",
        "SM_VLLM_MAX_LORA_RANK": "32",
        "SM_VLLM_CHAT_TEMPLATE": "s3://b/t/chat.jinja",
        "SM_VLLM_MAX_MODEL_LEN": "1024",
    },
    {
        "OPTION_MODEL_ID": "org/model",
        "OPTION_ENABLE_LORA": "true",
        "OPTION_MAX_LORA_RANK": "16",
        "SM_VLLM_LORA_MODULES": '[{"name": "x", "path": "s3://b/x/"}, "y=s3://b/y/"]',
        "OPTION_N_POSITIONS": "512",
    },
]

# Options that exist in the image's vLLM 0.11.0 but not in the test engine's newer vLLM: checked
# against the 0.11.0 option table only.
CONFIGS_0_11_ONLY: list[dict[str, str]] = [
    {"SM_VLLM_MODEL": "/m", "SM_VLLM_DISABLE_LOG_REQUESTS": "true", "SM_VLLM_MAX_MODEL_LEN": "512"},
]


def host_facts(neuron_devices: int = 1) -> HostFacts:
    """An inf2/trn host with 32 visible NeuronCores (or, with 0 devices, a plain CPU host)."""
    return HostFacts(
        python="py",
        neuron_devices=neuron_devices,
        visible_cores=32 if neuron_devices else None,
        cores_source="test",
        versions=VERSIONS,
        paths={"/m": ModelFacts("dir", LLAMA, "x", None), "/draft": ModelFacts("dir", LLAMA, "y", True)},
        option_tables=clitables.load_all(),
    )
