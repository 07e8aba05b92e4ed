"""Engine processes: one `EngineProcess` per vLLM server, and the data-parallel `ReplicaPool` of them."""

from neuronserve.engine.process import EngineProcess

__all__ = ["EngineProcess"]
