"""plan.request_support: what requests may ask for, by device and sampling mode
(plan/lanes/nxdi/support.py), both ways: each capability False where vllm-neuron 0.2.2+lts ignores it,
True in the neighbouring mode."""

from __future__ import annotations

from tests.support.builders import LLAMA_ENV, facts, llama_facts, llama_plan, plan

from neuronserve.config.settings import parse_settings
from neuronserve.plan.lanes.nxdi.engine import neuron_engine
from neuronserve.plan.lanes.nxdi.support import CANNOT_PROMPT_LOGPROBS, CANNOT_STRUCTURED, request_support
from neuronserve.plan.lanes.registry import LANE_2_27, LANE_2_28
from neuronserve.plan.resolution import Resolution
from neuronserve.types import Integration, RequestSupport

ON_DEVICE_FIX = (
    "set SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null (CPU sampling; vllm-neuron 0.2.2+lts samples on the "
    "device with temperature, top_k and top_p only)"
)


def test_on_device_sampling_the_default_allows_none_of_them() -> None:
    s = llama_plan({}).request_support
    assert s.as_json() == {
        "logprobs": False,
        "prompt_logprobs": False,
        "penalties": False,
        "structured_outputs": False,
        "lora_adapters": [],
        "adapter_required": False,
        "why": {
            "logprobs": ON_DEVICE_FIX,
            "penalties": ON_DEVICE_FIX,
            "prompt_logprobs": CANNOT_PROMPT_LOGPROBS,
            "structured_outputs": CANNOT_STRUCTURED,
        },
    }


def test_an_explicit_on_device_config_is_on_device_too() -> None:
    s = llama_plan({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"global_topk": 64}'}).request_support
    assert (s.logprobs, s.penalties) == (False, False)


def test_cpu_sampling_allows_logprobs_and_penalties_but_never_prompt_logprobs_or_grammars() -> None:
    s = llama_plan({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"}).request_support
    assert (s.logprobs, s.penalties, s.prompt_logprobs, s.structured_outputs) == (True, True, False, False)
    assert s.why == {"prompt_logprobs": CANNOT_PROMPT_LOGPROBS, "structured_outputs": CANNOT_STRUCTURED}
    assert "prompt_logprobs_dict" in CANNOT_PROMPT_LOGPROBS and "grammar bitmask" in CANNOT_STRUCTURED


def test_the_cpu_device_allows_everything() -> None:
    p = plan({"SM_VLLM_MODEL": "org/m"}, facts(None))
    assert p.device == "cpu" and p.request_support == RequestSupport()


def test_a_multimodal_model_reads_its_sampling_mode_in_text_neuron_config() -> None:
    config = {
        "architectures": ["Llama4ForConditionalGeneration"],
        "text_config": {"num_key_value_heads": 8, "head_dim": 128},
    }
    on_device = llama_plan({}, llama_facts(2, config)).request_support
    assert on_device.why["logprobs"].startswith(
        'set SM_NEURON_OVERRIDE_CONFIG=\'{"text_neuron_config": {"on_device_sampling_config": null}}\''
    )
    cpu = {"SM_NEURON_OVERRIDE_CONFIG": '{"text_neuron_config": {"on_device_sampling_config": null}}'}
    assert llama_plan(cpu, llama_facts(2, config)).request_support.logprobs is True


def test_the_in_tree_integration_is_not_judged_by_the_plugin_source() -> None:
    p = plan({**LLAMA_ENV, "NEURONSERVE_INTEGRATION": "in-tree"}, llama_facts(versions={"vllm": "0.10.2"}))
    assert p.request_support == RequestSupport()


def test_request_support_is_a_pure_function_of_its_inputs() -> None:
    assert request_support("cpu", "cpu", None) == RequestSupport()
    assert request_support("neuron", "plugin", {"on_device_sampling_config": None}).penalties is True
    assert request_support("neuron", "plugin", {}).penalties is False
    assert request_support("neuron", "plugin", None).logprobs is False


def test_the_engine_renders_its_lanes_request_support() -> None:
    """plan/lanes/nxdi/engine.py fills NeuronEngine.support from the override it rendered and the lane's
    profile: CPU sampling allows structured outputs on 2.28 only."""
    settings = parse_settings({**LLAMA_ENV, "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"})
    host = llama_facts()
    for lane, structured in ((LANE_2_27, False), (LANE_2_28, True)):
        engine = neuron_engine(settings, host, "/m", host.paths["/m"], Resolution.of(settings), lane=lane)
        assert engine.support == request_support("neuron", Integration.PLUGIN, engine.override, lane.rules)
        assert engine.support.logprobs and engine.support.structured_outputs is structured
