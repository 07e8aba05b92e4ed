"""HBM fit per NeuronCore (plan/fit/memory.py), table-tested with the real config.json of six public models
(tests/data/models) on inf2.xlarge, inf2.48xlarge, trn1.32xlarge and trn2.48xlarge. Every expected number
is worked out by hand in the comments (bf16 = 2 bytes, overhead 1.5 GiB = 1,610,612,736 bytes, 16 GiB =
17,179,869,184). The edge cases mutation testing found: test_memory_edges.py.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from tests.support.builders import OVERHEAD, SIZED_VERSIONS, model_config, sized_plan, sized_refused

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.host.facts import model_facts
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import instances, memory

GIB = 1024**3


# The published parameter counts of the six models: the per-core layout is the same formula at TP > 1.
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("Llama-3.2-1B", 1_235_814_400),
        ("Llama-3.1-8B", 8_030_261_248),
        ("Llama-3.3-70B-Instruct", 70_553_706_496),
        ("Qwen2.5-7B", 7_615_616_512),
        ("Qwen3-8B", 8_190_735_360),
        ("Mixtral-8x7B-v0.1", 46_702_792_704),
    ],
)
def test_parameter_counts_match_the_model_cards(name: str, params: int) -> None:
    assert memory.hf_parameter_count(memory.model_shape(model_config(name))) == params


def test_instance_table() -> None:
    # inf2/trn1: 2 cores of 16 GiB and 410 GB/s per chip; trn2 at LNC 2: 4 logical of 24 GiB, 725 GB/s.
    x = instances.instance_facts("ml.inf2.xlarge")
    assert (x.cores, x.hbm_bytes_per_core, x.hbm_bytes_per_s_per_core) == (2, 16 * GIB, 410e9)
    assert instances.instance_facts("inf2.48xlarge").cores == 24
    assert instances.instance_facts("trn1.32xlarge").cores == 32
    t2 = instances.instance_facts("trn2.48xlarge")
    assert (t2.cores, t2.hbm_bytes_per_core, t2.hbm_bytes_per_s_per_core) == (64, 24 * GIB, 725e9)
    t1 = instances.instance_facts("trn2.48xlarge", lnc=1)
    assert (t1.cores, t1.hbm_bytes_per_core) == (128, 12 * GIB)
    assert instances.valid_tp_degrees(instances.instance_facts("inf2.48xlarge")) == [1, 2, 4, 6, 8, 12, 24]
    with pytest.raises(ConfigError, match="NEURONSERVE_INSTANCE_TYPE"):
        instances.instance_facts("g5.xlarge", origin="NEURONSERVE_INSTANCE_TYPE")


@pytest.mark.parametrize(
    ("heads", "kv", "tp", "per_core"),
    [
        (32, 8, 2, 4),  # 8 divisible by 2: 4 per core
        (32, 8, 24, 1),  # 8 < 24 and 24 % 8 == 0: replicated to 24, 1 per core
        (28, 4, 8, 1),  # Qwen2.5-7B at TP 8: replicated
        (32, 8, 12, 3),  # 12 % 8 != 0: converted to MHA, 32 heads padded to 36, 3 per core
        (16, 16, 3, 6),  # MHA: 16 padded to 18, 6 per core
    ],
)
def test_kv_heads_per_core(heads: int, kv: int, tp: int, per_core: int) -> None:
    shape = memory.ModelShape(1000, heads * 64, 1, 1, heads, kv, 64, False)
    assert memory.kv_heads_per_core(shape, tp) == per_core


def test_llama_8b_on_inf2_xlarge_fits() -> None:
    # TP 2: 16 q heads, 4 kv heads per core; attention 4096*2048*2 + 4096*512*2 = 20,971,520 per layer,
    # MLP 3*4096*7168 = 88,080,384; x32 layers = 3,489,660,928. Embedding and lm_head 64128*4096 each
    # = 525,336,576, norms 32*8192 + 4096 = 266,240: 4,015,263,744 elements = 8,030,527,488 bytes.
    # KV: 32 layers * 2 * 4 heads * 128 * (4 * 4096 tokens) * 2 = 1,073,741,824.
    p = sized_plan("Llama-3.1-8B", "ml.inf2.xlarge", 2, 4096, 4)
    assert p.memory == {
        "weights_bytes_per_core": 8_030_527_488,
        "kv_bytes_per_core": 1_073_741_824,
        "overhead_bytes_per_core": OVERHEAD,
        "hbm_bytes_per_core": 16 * GIB,
        "utilization": round(10_714_882_048 / (16 * GIB), 4),  # 0.6237
        "fits": True,
    }
    assert p.instance is not None and p.instance["name"] == "inf2.xlarge"


def test_llama_8b_on_inf2_xlarge_refused_with_the_settings_that_fit() -> None:
    # 32 seqs x 8192 = 262,144 tokens x 65,536 bytes (32*2*4*128*2) = 16 GiB of KV: over.
    # Room for KV: 17,179,869,184 - 8,030,527,488 - 1,610,612,736 = 7,538,728,960 bytes = 115,031 tokens:
    # 115,031 / 32 = 3594 -> 3584 (multiple of 128); 115,031 / 8192 = 14 seqs. No TP above 2 on 2 cores.
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 8192, 32)
    assert "SM_VLLM_MAX_MODEL_LEN<=3584" in msg and "SM_VLLM_MAX_NUM_SEQS<=14" in msg
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE" not in msg
    assert "weights 7.48" in msg and "KV cache 16.00" in msg and "overhead 1.50" in msg
    assert "NEURONSERVE_FIT_CHECK" in msg and "NEURONSERVE_HBM_OVERHEAD_GIB" in msg


def test_llama_1b_derived_length_refused_on_inf2_xlarge() -> None:
    # max_model_len derived from config.json: 131072. TP 1: weights 1,498,482,688 elements (tied lm_head is
    # still its own device tensor) = 2,996,965,376 bytes; KV per token 16*2*8*64*2 = 32,768 bytes,
    # 8 x 131072 tokens = 32 GiB. Room: 17,179,869,184 - 2,996,965,376 - 1,610,612,736 = 12,572,291,072
    # = 383,675 tokens: / 8 = 47,959 -> 47,872; / 131072 = 2 seqs. TP 2 keeps 16 GiB of KV: no fit.
    msg = sized_refused("Llama-3.2-1B", "inf2.xlarge", 1, None, 8)
    assert "SM_VLLM_MAX_MODEL_LEN<=47872" in msg and "SM_VLLM_MAX_NUM_SEQS<=2" in msg
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE" not in msg


def test_llama_70b_on_inf2_48xlarge_fits_at_tp24() -> None:
    # 64 heads padded to 72: 3 per core; 8 kv heads replicated to 24: 1 per core.
    # attention 8192*384*2 + 8192*128*2 = 8,388,608; MLP ceil(28672/24) = 1195: 3*8192*1195 = 29,368,320;
    # x80 = 3,020,554,240. Vocab ceil(128256/24) = 5344: 5344*8192*2 = 87,556,096; norms 80*16384 + 8192
    # = 1,318,912. 3,109,429,248 elements = 6,218,858,496 bytes. KV 80*2*1*128*16384*2 = 671,088,640.
    p = sized_plan("Llama-3.3-70B-Instruct", "inf2.48xlarge", 24, 4096, 4)
    assert p.memory is not None
    assert p.memory["weights_bytes_per_core"] == 6_218_858_496
    assert p.memory["kv_bytes_per_core"] == 671_088_640
    assert p.memory["fits"] is True and p.memory["utilization"] == round(8_500_559_872 / (16 * GIB), 4)


def test_llama_70b_on_inf2_xlarge_fits_nowhere() -> None:
    # 70.5 G params x 2 bytes / 2 cores = ~32.9 GiB of weights per 16 GiB core.
    msg = sized_refused("Llama-3.3-70B-Instruct", "inf2.xlarge", 2, 4096, 1)
    assert "pick a larger instance" in msg


def test_llama_70b_on_inf2_48xlarge_tp8_suggests_tp() -> None:
    # TP 8: weights 141.1 GB / 8 = ~16.4 GiB per core: over. TP 12 (valid: 1,2,4,6,8,12,24) does not fit
    # either: 12 % 8 != 0 converts to MHA, 72 kv heads / 12 = 6 per core: 80*2*6*128*16384*2
    # = 4,026,531,840 bytes of KV on ~11 GiB of weights + 1.5 GiB. TP 24 fits (test above).
    msg = sized_refused("Llama-3.3-70B-Instruct", "inf2.48xlarge", 8, 4096, 4)
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE=24 (of 24 NeuronCores)" in msg


def test_qwen25_7b_on_trn1_32xlarge() -> None:
    # TP 8: 28 q heads padded to 32 (4 per core), 4 kv heads replicated (1 per core), qkv bias.
    # attention 3584*512*2 + 3584*128*2 = 4,587,520; MLP 3*3584*2368 = 25,460,736; x28 = 841,351,168.
    # norms + bias (7168 + 768) * 28 = 222,208; vocab 19008*3584*2 = 136,249,344; final norm 3584.
    # 977,826,304 elements = 1,955,652,608 bytes. KV 28*2*1*128*(8*8192)*2 = 939,524,096.
    p = sized_plan("Qwen2.5-7B", "trn1.32xlarge", 8, 8192, 8)
    assert p.memory is not None
    assert (p.memory["weights_bytes_per_core"], p.memory["kv_bytes_per_core"]) == (1_955_652_608, 939_524_096)


def test_qwen3_8b_on_trn2_48xlarge_warns_above_90_percent() -> None:
    # trn2 logical core: 24 GiB = 25,769,803,776. TP 4: 8 q heads, 2 kv heads per core.
    # attention 4096*1024*2 + 4096*256*2 = 10,485,760; MLP 3*4096*3072 = 37,748,736; x36 = 1,736,441,856.
    # norms incl. q/k norms (8192 + 256) * 36 = 304,128; vocab 37984*4096*2 = 311,164,928; + 4096.
    # 2,047,915,008 elements = 4,095,830,016 bytes. KV 36*2*2*128*(16*32768)*2 = 19,327,352,832.
    # Total 25,033,795,584 = 97.1 %: fits, with a warning.
    p = sized_plan("Qwen3-8B", "trn2.48xlarge", 4, 32768, 16)
    assert p.memory is not None
    assert p.memory["weights_bytes_per_core"] == 4_095_830_016
    assert p.memory["kv_bytes_per_core"] == 19_327_352_832
    assert p.memory["fits"] is True and p.memory["utilization"] == round(25_033_795_584 / (24 * GIB), 4)
    assert any("above 90%" in w and "NEURONSERVE_HBM_OVERHEAD_GIB" in w for w in p.warnings)


def test_mixtral_on_trn1_32xlarge_and_refused_on_inf2_xlarge() -> None:
    # TP 32: 1 q head, 1 kv head per core. attention 4096*128*4 = 2,097,152; 8 experts x 3*4096*448
    # = 44,040,192; x32 = 1,476,395,008. norms + router (8192 + 32768) * 32 = 1,310,720;
    # vocab 1000*4096*2 = 8,192,000; + 4096. 1,485,901,824 elements = 2,971,803,648 bytes.
    # KV 32*2*1*128*(8*4096)*2 = 536,870,912.
    p = sized_plan("Mixtral-8x7B-v0.1", "trn1.32xlarge", 32, 4096, 8)
    assert p.memory is not None
    assert (p.memory["weights_bytes_per_core"], p.memory["kv_bytes_per_core"]) == (2_971_803_648, 536_870_912)
    assert "pick a larger instance" in sized_refused("Mixtral-8x7B-v0.1", "inf2.xlarge", 2, 4096, 1)


def test_prefix_caching_counts_blocks() -> None:
    # Block layout: ceil(4096/32)*4 = 512 blocks + NxD's reserved + the plugin's null block = 514 x 32
    # = 16,448 tokens x 65,536 bytes = 1,077,936,128 (the contiguous cache would hold 16,384 tokens).
    p = sized_plan(
        "Llama-3.1-8B",
        "inf2.xlarge",
        2,
        4096,
        4,
        SM_VLLM_ENABLE_PREFIX_CACHING="true",
        SM_VLLM_BLOCK_SIZE="32",
    )
    assert p.memory is not None and p.memory["kv_bytes_per_core"] == 1_077_936_128


def test_overrides_warn_off_and_numbers() -> None:
    args = ("Llama-3.1-8B", "inf2.xlarge", 2, 8192, 32)
    warned = sized_plan(*args, NEURONSERVE_FIT_CHECK="warn")
    assert warned.memory is not None and warned.memory["fits"] is False
    assert any("not refused" in w for w in warned.warnings)
    assert sized_plan(*args, NEURONSERVE_FIT_CHECK="off").memory is None
    # 32 GiB per core (a user who knows better) makes it fit: 8,030,527,488 + 16 GiB + 1.5 GiB < 32 GiB.
    assert sized_plan(*args, NEURONSERVE_HBM_GIB_PER_CORE="32").memory["fits"] is True  # type: ignore[index]
    # No overhead: 8,030,527,488 + 1 GiB.
    small = sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 4096, 4, NEURONSERVE_HBM_OVERHEAD_GIB="0")
    assert small.memory is not None and small.memory["overhead_bytes_per_core"] == 0
    with pytest.raises(ConfigError, match="NEURONSERVE_FIT_CHECK"):
        sized_plan(*args, NEURONSERVE_FIT_CHECK="maybe")


def test_skipped_with_a_reason_without_instance_facts() -> None:
    p = sized_plan("Llama-3.1-8B", "", 2, 8192, 32)
    assert p.memory is None
    assert any("HBM fit not checked" in w and "NEURONSERVE_INSTANCE_TYPE" in w for w in p.warnings)


def test_declared_instance_must_agree_with_detected_devices() -> None:
    cfg = {"/m": ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64)}
    env = {"SM_VLLM_MODEL": "/m", "SM_VLLM_MAX_MODEL_LEN": "4096", "SM_VLLM_MAX_NUM_SEQS": "4"}
    env |= {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_INSTANCE_TYPE": "ml.inf2.48xlarge"}
    host = HostFacts(
        python="py", neuron_devices=1, physical_cores=2, visible_cores=2, cores_source="neuron-ls", paths=cfg
    )
    with pytest.raises(ConfigError, match="disagrees with this host's devices"):
        build_plan(parse_settings(env), host)
    # Without the declared type the detected device gives the facts (2 cores of 16 GiB).
    env.pop("NEURONSERVE_INSTANCE_TYPE")
    p = build_plan(parse_settings(env), host)
    assert p.memory is not None and p.memory["hbm_bytes_per_core"] == 16 * GIB


def test_safetensors_headers_give_the_parameter_count(tmp_path: Path) -> None:
    # A checkpoint whose headers count half of Llama-3.1-8B's parameters halves the estimate's weights.
    (tmp_path / "config.json").write_text(json.dumps(model_config("Llama-3.1-8B")))
    header = json.dumps({"a": {"dtype": "BF16", "shape": [4_015_130_624], "data_offsets": [0, 0]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    facts = model_facts(str(tmp_path))
    assert facts.checkpoint_params == 4_015_130_624
    host = HostFacts(python="py", paths={str(tmp_path): facts})
    env = {"SM_VLLM_MODEL": str(tmp_path), "SM_VLLM_MAX_MODEL_LEN": "4096", "SM_VLLM_MAX_NUM_SEQS": "4"}
    env |= {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge"}
    env |= {"NEURONSERVE_DEVICE": "neuron"}
    p = build_plan(parse_settings(env), host)
    assert p.memory is not None and p.memory["weights_bytes_per_core"] == 8_030_527_488 // 2


def test_speculative_draft_is_counted() -> None:
    # Llama-3.1-8B target + Llama-3.2-1B draft (a local config.json), TP 2, 4 x 4096 tokens each.
    # Draft at TP 2: 16 q heads and 4 kv heads of 64 per core: attention 2048*1024*2 + 2048*256*2 = 5,242,880,
    # MLP 3*2048*4096 = 25,165,824; x16 = 486,539,264; vocab 64128*2048*2 = 262,668,288; norms 16*4096 + 2048
    # = 67,584: 749,275,136 elements = 1,498,550,272 bytes. Its KV: 16*2*4*64*16384*2 = 268,435,456.
    facts = HostFacts(
        python="py",
        versions=dict(SIZED_VERSIONS),
        paths={
            "/m": ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64),
            "/d": ModelFacts("dir", model_config("Llama-3.2-1B"), "e" * 64, True),
        },
    )
    env = {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "NEURONSERVE_DEVICE": "neuron",
        "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge",
        "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/d", "num_speculative_tokens": 4}',
    }
    p = build_plan(parse_settings(env), facts)
    assert p.memory is not None
    assert p.memory["weights_bytes_per_core"] == 8_030_527_488 + 1_498_550_272
    assert p.memory["kv_bytes_per_core"] == 1_073_741_824 + 268_435_456
    hub = {
        **env,
        "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "org/d", "num_speculative_tokens": 4}',
    }
    # a hub EAGLE head is counted as its target implies (test_check.py has its bytes)
    warnings = build_plan(parse_settings(hub), facts).warnings
    assert any("org/d: no local config.json; counted as the EAGLE head" in w for w in warnings)


@pytest.mark.parametrize(
    ("kv", "tokens"),
    [
        ({"mode": "contiguous", "kv_tokens": 16384}, 16384),
        # prefix caching: pa_num_blocks = 512 + 1 null block, + NxD's reserved block = 514 x 32
        ({"mode": "prefix", "block_size": 32, "num_blocks": 512, "pa_num_blocks": 513}, 16448),
        # chunked prefill (block layout, no prefix caching): no reserved block, 513 x 32
        ({"mode": "block", "block_size": 32, "num_blocks": 512, "pa_num_blocks": 513}, 16416),
        ({"mode": "prefix", "block_size": 32, "num_blocks": 512}, 16448),  # a plan without pa_num_blocks
    ],
)
def test_kv_tokens_by_layout(kv: dict[str, object], tokens: int) -> None:
    assert memory.kv_tokens(kv, 4, 4096) == tokens


def test_live_host_facts() -> None:
    # 16 devices of 8 physical cores = Trainium2: 64 logical cores of 24 GiB at the default LNC 2.
    t2 = instances.facts_for_host(16, 128, None)
    assert t2 is not None and (t2.cores, t2.hbm_bytes_per_core) == (64, 24 * GIB)
    assert instances.facts_for_host(16, 128, 1).cores == 128  # type: ignore[union-attr]
    assert instances.facts_for_host(12, 24, None).hbm_bytes_per_core == 16 * GIB  # type: ignore[union-attr]
    assert instances.facts_for_host(0, None, None) is None
    assert instances.facts_for_host(2, 6, None) is None  # 3 cores per device: no chip we know
    with pytest.raises(ConfigError, match="Trn2 only"):
        instances.instance_facts("inf2.xlarge", lnc=2)


def test_quantized_projections_are_one_byte() -> None:
    # SM_NEURON_QUANTIZED=true: attention + MLP (3,489,660,928 elements at TP 2) at 1 byte, the rest
    # (525,602,816 elements: embedding, lm_head, norms) at 2: 3,489,660,928 + 1,051,205,632 = 4,540,866,560.
    p = sized_plan(
        "Llama-3.1-8B",
        "inf2.xlarge",
        2,
        4096,
        4,
        SM_NEURON_QUANTIZED="true",
        SM_NEURON_QUANTIZED_CHECKPOINTS_PATH="/q",
    )
    assert p.memory is not None and p.memory["weights_bytes_per_core"] == 4_540_866_560


def test_a_shape_number_that_is_a_json_boolean_is_missing() -> None:
    """`"num_hidden_layers": true` is no layer count, although Python counts True as the int 1."""
    good = {"vocab_size": 32000, "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128}
    assert memory.model_shape({**good, "num_attention_heads": 4}).layers == 2
    with pytest.raises(memory.ShapeError, match=r"^config.json has no num_hidden_layers$"):
        memory.model_shape({**good, "num_attention_heads": 4, "num_hidden_layers": True})
