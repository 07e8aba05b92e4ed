"""Several replicas' engine metrics merged into one valid Prometheus exposition."""

from __future__ import annotations


def test_metrics_merge_is_one_valid_exposition_with_replica_labels() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from neuronserve.front.replica_metrics import merge

    one = (
        "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 1.0\n'
        "# HELP vllm:e2e Latency.\n# TYPE vllm:e2e histogram\n"
        'vllm:e2e_bucket{le="1.0",model_name="m"} 2.0\nvllm:e2e_bucket{le="+Inf",model_name="m"} 3.0\n'
        'vllm:e2e_count{model_name="m"} 3.0\nvllm:e2e_sum{model_name="m"} 1.5\n'
    )
    text = merge({0: one, 1: one.replace("} 1.0", "} 4.0")})
    families = {f.name: f for f in text_string_to_metric_families(text)}
    running = families["vllm:num_requests_running"].samples
    assert {(s.labels["replica"], s.value) for s in running} == {("0", 1.0), ("1", 4.0)}
    assert all(s.labels["model_name"] == "m" for s in running)
    assert len(families["vllm:e2e"].samples) == 8
    assert text.count("# TYPE vllm:e2e histogram") == 1
