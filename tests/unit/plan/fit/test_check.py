"""The HBM fit check (plan/fit/check.py) at the edges mutation testing left unchecked: the exact refusal and
warning texts, the 90 % warning boundary, a check skipped with its reason, the speculative draft and the
precision. Plans are built from the environment with the real config.json of public models (the helpers
of test_memory.py, whose comments work out the numbers by hand). The settings a refusal suggests and the
instance facts a plan reports: test_check_suggestions.py.
"""

from __future__ import annotations

import pytest
from tests.support.builders import SIZED_VERSIONS, model_config, sized_plan, sized_refused

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import check as fit
from neuronserve.plan.fit.instances import GIB
from neuronserve.types import LaunchPlan

OVERRIDES = (
    "if the estimate is wrong for your model, set NEURONSERVE_HBM_OVERHEAD_GIB (default 1.5) or "
    "NEURONSERVE_HBM_GIB_PER_CORE, or NEURONSERVE_FIT_CHECK=warn (docs/FIT.md)"
)
ENV = {
    "SM_VLLM_MODEL": "/m",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "4096",
    "SM_VLLM_MAX_NUM_SEQS": "4",
    "NEURONSERVE_DEVICE": "neuron",
    "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge",
}

# vLLM with its in-tree Neuron device (the in-tree integration is refused on the image's 0.11.0).
IN_TREE_VERSIONS = {"vllm": "0.10.2", "neuronx-distributed-inference": "0.7.14366"}


def fixes(message: str) -> str:
    """What a refusal tells the user to change: the text between 'does not fit; ' and the overrides."""
    _, sep, rest = message.partition(": does not fit; ")
    assert sep, message
    suggestion, sep, tail = rest.partition("; " + OVERRIDES)
    assert sep and tail in ("", " (NEURONSERVE_FIT_CHECK=warn: not refused)"), message
    return suggestion


def host(**paths: ModelFacts) -> HostFacts:
    return HostFacts(python="py", versions=dict(SIZED_VERSIONS), paths=paths)


def hbm_warnings(p: LaunchPlan) -> list[str]:
    return [w for w in p.warnings if "HBM" in w]


# --- check_fit: the refusal, its wording and the variables it names ---------------------------------


def test_a_refusal_names_the_instance_the_numbers_every_fix_and_the_overrides() -> None:
    """The whole refusal: "HBM estimate on <instance> (<chip>)", the estimate, each setting that would fit
    alone joined by ", or ", and the overrides; its variables are the three settings and the check.
    Llama-3.1-8B at TP 2 on inf2.xlarge has room for 115,031 tokens of KV (test_memory.py):
    / 64 seqs = 1797 -> 1792 (a multiple of 128); / 3072 = 37 seqs (odd: a search stepping by 2 fails)."""
    with pytest.raises(ConfigError) as err:
        sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 3072, 64)
    assert str(err.value) == (
        "HBM estimate on inf2.xlarge (Inferentia2): 20.98 GiB per NeuronCore (weights 7.48 + KV cache 12.00 "
        "+ overhead 1.50) of 16.00 GiB HBM = 131 %: does not fit; set SM_VLLM_MAX_MODEL_LEN<=1792, or "
        "SM_VLLM_MAX_NUM_SEQS<=37; " + OVERRIDES
    )
    assert err.value.variables == (
        "SM_VLLM_TENSOR_PARALLEL_SIZE",
        "SM_VLLM_MAX_MODEL_LEN",
        "SM_VLLM_MAX_NUM_SEQS",
        "NEURONSERVE_FIT_CHECK",
    )


def test_nothing_fits_says_so_in_those_words() -> None:
    """70B weights alone overflow both cores of inf2.xlarge: no fix to list, the advice is a larger
    instance (exact text)."""
    msg = sized_refused("Llama-3.3-70B-Instruct", "inf2.xlarge", 2, 4096, 1)
    assert fixes(msg) == "no TP, length or batch on this instance fits; pick a larger instance"


def test_warn_mode_keeps_the_whole_message_and_says_it_was_not_refused() -> None:
    """NEURONSERVE_FIT_CHECK=warn: the refusal's text becomes a warning ending with the exact note."""
    p = sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 3072, 64, NEURONSERVE_FIT_CHECK="warn")
    (warning,) = hbm_warnings(p)
    assert warning.endswith("; " + OVERRIDES + " (NEURONSERVE_FIT_CHECK=warn: not refused)")
    assert fixes(warning) == "set SM_VLLM_MAX_MODEL_LEN<=1792, or SM_VLLM_MAX_NUM_SEQS<=37"


def test_exactly_90_percent_does_not_warn_and_a_byte_more_does() -> None:
    """The warning is for utilization *above* 90 %. Llama-3.1-8B at TP 2, 4 x 4096 tokens: weights + KV
    = 9,104,269,312 bytes; on 20 GiB per core, 18 GiB (exactly 90 %) leaves an overhead of 10,223,083,520
    bytes = 9.520988464355469 GiB (exact in binary)."""
    at = sized_plan(
        "Llama-3.1-8B",
        "inf2.xlarge",
        2,
        4096,
        4,
        NEURONSERVE_HBM_GIB_PER_CORE="20",
        NEURONSERVE_HBM_OVERHEAD_GIB="9.520988464355469",
    )
    assert at.memory is not None and at.memory["overhead_bytes_per_core"] == 10_223_083_520
    assert at.memory["utilization"] == 0.9 and hbm_warnings(at) == []
    above = sized_plan(
        "Llama-3.1-8B",
        "inf2.xlarge",
        2,
        4096,
        4,
        NEURONSERVE_HBM_GIB_PER_CORE="20",
        NEURONSERVE_HBM_OVERHEAD_GIB="9.521",
    )
    (warning,) = hbm_warnings(above)
    assert warning.startswith("HBM estimate on inf2.xlarge (Inferentia2): 18.00 GiB per NeuronCore")
    assert warning.endswith(": above 90%, the load may run out of device memory; " + OVERRIDES)


def test_an_overhead_in_gib_is_multiplied_into_bytes() -> None:
    """NEURONSERVE_HBM_OVERHEAD_GIB=2 is 2 GiB per core (the existing test only used 0)."""
    p = sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 4096, 4, NEURONSERVE_HBM_OVERHEAD_GIB="2")
    assert p.memory is not None and p.memory["overhead_bytes_per_core"] == 2 * GIB


# --- check_fit: skipped with a reason ---------------------------------------------------------------


def test_no_instance_facts_warns_with_the_exact_reason() -> None:
    """No NEURONSERVE_INSTANCE_TYPE and no devices: the check is skipped, saying how to enable it."""
    p = sized_plan("Llama-3.1-8B", "", 2, 4096, 4)
    assert p.memory is None and p.instance is None
    assert hbm_warnings(p) == [
        "HBM fit not checked: no instance facts (no Neuron devices detected): set "
        "NEURONSERVE_INSTANCE_TYPE (e.g. ml.inf2.xlarge) to check it before compiling"
    ]


def test_a_hub_model_is_not_checked_and_the_warning_says_how_to_check_it() -> None:
    """A hub model has no local config.json at plan time: no estimate (not a crash), the instance is still
    reported, and the warning names the command that checks it beforehand."""
    p = build_plan(parse_settings({**ENV, "SM_VLLM_MODEL": "org/m"}), host())
    assert p.memory is None and p.instance is not None and p.instance["name"] == "inf2.xlarge"
    assert hbm_warnings(p) == [
        "HBM fit not checked: the model has no local config.json yet (hub or s3:// model); "
        "run `neuronserve plan --recommend --model-config config.json` to check it beforehand"
    ]


def test_a_config_without_a_shape_field_is_not_checked_and_names_the_field() -> None:
    """A config.json missing num_hidden_layers: the estimate is skipped with the ShapeError's words."""
    cfg = {k: v for k, v in model_config("Llama-3.1-8B").items() if k != "num_hidden_layers"}
    p = build_plan(parse_settings(ENV), host(**{"/m": ModelFacts("dir", cfg, "d" * 64)}))
    assert p.memory is None
    assert hbm_warnings(p) == ["HBM fit not checked: config.json has no num_hidden_layers"]


# --- check_fit: the speculative draft ----------------------------------------------------------------

SPEC = {
    **ENV,
    "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/d", "num_speculative_tokens": 4}',
}


def test_a_draft_without_a_shape_field_is_left_out_with_the_reason() -> None:
    """The target is still estimated alone (8,030,527,488 bytes of weights); the warning names the draft
    and the missing field."""
    draft = {k: v for k, v in model_config("Llama-3.2-1B").items() if k != "hidden_size"}
    facts = host(
        **{
            "/m": ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64),
            "/d": ModelFacts("dir", draft, "e" * 64),
        }
    )
    p = build_plan(parse_settings(SPEC), facts)
    assert p.memory is not None and p.memory["weights_bytes_per_core"] == 8_030_527_488
    assert (
        "speculative draft /d not counted in the HBM estimate: config.json has no hidden_size" in p.warnings
    )


def test_an_eagle_head_with_no_local_config_is_counted_from_its_target() -> None:
    """A hub EAGLE head: one Llama-3.1-8B layer, the 2 x 4096 -> 4096 fc and the 128,256-word embedding
    and lm_head, at TP 2 about 1.30 GB per core on top of the target's 8,030,527,488 bytes (it was not
    counted); a draft that is no EAGLE head is still left out with the reason."""
    facts = host(**{"/m": ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64)})
    hub = '{"method": "eagle", "model": "org/eagle-head", "num_speculative_tokens": 4}'
    p = build_plan(parse_settings({**ENV, "SM_VLLM_SPECULATIVE_CONFIG": hub}), facts)
    assert p.memory is not None
    assert 1.28e9 < p.memory["weights_bytes_per_core"] - 8_030_527_488 < 1.32e9
    assert any("counted as the EAGLE head its target implies" in w for w in p.warnings)
    other = hub.replace('"method": "eagle", ', "")
    q = build_plan(parse_settings({**ENV, "SM_VLLM_SPECULATIVE_CONFIG": other}), facts)
    assert q.memory is not None and q.memory["weights_bytes_per_core"] == 8_030_527_488
    assert (
        "speculative draft org/eagle-head not counted in the HBM estimate: no local config.json" in q.warnings
    )


def test_a_drafts_checkpoint_parameter_count_scales_its_weights() -> None:
    """A draft whose safetensors headers count half of Llama-3.2-1B's 1,235,814,400 parameters adds half of
    its 1,498,550,272 bytes per core (test_speculative_draft_is_counted): 749,275,136."""
    draft = ModelFacts("dir", model_config("Llama-3.2-1B"), "e" * 64, True, 1_235_814_400 // 2)
    facts = host(**{"/m": ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64), "/d": draft})
    p = build_plan(parse_settings(SPEC), facts)
    assert p.memory is not None and p.memory["weights_bytes_per_core"] == 8_030_527_488 + 749_275_136


# --- precision ---------------------------------------------------------------------------------------


def test_float32_weights_are_four_bytes() -> None:
    """SM_VLLM_DTYPE=float32 doubles Llama-3.2-1B's 2,996,965,376 bf16 bytes at TP 1."""
    p = sized_plan("Llama-3.2-1B", "inf2.xlarge", 1, 4096, 4, SM_VLLM_DTYPE="float32")
    assert p.memory is not None and p.memory["weights_bytes_per_core"] == 2 * 2_996_965_376


def test_a_dtype_the_table_does_not_know_is_estimated_at_two_bytes() -> None:
    """A dtype with no size in the table (the plan refuses those before the estimate, rules.check_dtype;
    `plan --recommend` passes its own) counts 2 bytes (the bf16 default) rather than crash or guess;
    case does not matter."""
    settings = parse_settings({})
    assert fit.precision("int8", settings, {}) == fit.memory.Precision(2, 2)
    assert fit.precision("FLOAT32", settings, {}) == fit.memory.Precision(4, 4)
    assert fit.precision("float32", settings, {"quantized": True}) == fit.memory.Precision(4, 1)


def test_sm_vllm_quantization_makes_the_projections_one_byte() -> None:
    """SM_VLLM_QUANTIZATION (not only SM_NEURON_QUANTIZED) counts the projections at 1 byte: the same
    4,540,866,560 bytes as test_quantized_projections_are_one_byte. It is read by vLLM's in-tree Neuron
    support (0.10); the plugin refuses it (plan/lanes/nxdi/guards.py)."""
    in_tree = {"SM_VLLM_QUANTIZATION": "neuron_quant", "NEURONSERVE_INTEGRATION": "in-tree"}
    p = sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 4096, 4, versions=IN_TREE_VERSIONS, **in_tree)
    assert p.memory is not None and p.memory["weights_bytes_per_core"] == 4_540_866_560
