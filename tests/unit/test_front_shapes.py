"""Two wire shapes clients parse field by field, pinned whole (added where mutation testing showed no
unit test read them): TGI's GET /info (text-generation-inference's OpenAPI components.schemas.Info)
and the LMI streaming error event."""

from __future__ import annotations

from neuronserve.front import lmi, tgi


def test_tgi_info() -> None:
    got = tgi.info("org/m", "bfloat16", "neuron", 2048, 6, "0.1.0", {"best_of": 2, "stop": 4, "batch": 8})
    assert got == {
        "model_id": "org/m",
        "model_sha": None,
        "model_dtype": "bfloat16",
        "model_device_type": "neuron",
        "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": 6,
        "max_best_of": 2,
        "max_stop_sequences": 4,
        "max_input_tokens": 2047,
        "max_total_tokens": 2048,
        "validation_workers": 1,
        "max_client_batch_size": 8,
        "router": "neuronserve",
        "version": "0.1.0",
        "sha": None,
        "docker_label": None,
    }


def test_tgi_info_without_a_known_length_or_model() -> None:
    got = tgi.info(None, "auto", "cpu", None, 0, "0.1.0", {"best_of": 1, "stop": 1, "batch": 1})
    assert (got["model_id"], got["max_input_tokens"], got["max_total_tokens"]) == ("", 0, 0)


def test_lmi_stream_error_event() -> None:
    assert lmi.stream_error_event() == {
        "token": {"id": -1, "text": "", "log_prob": -1, "special_token": True},
        "generated_text": "",
        "details": {"finish_reason": "error", "generated_tokens": None, "inputs": None},
    }
