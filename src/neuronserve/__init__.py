"""neuronserve: vLLM + vllm-neuron behind the SageMaker / ECS serving contract."""

__version__ = "0.1.0"
