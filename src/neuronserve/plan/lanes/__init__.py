"""Stack lanes: the Neuron SDK / vllm-neuron / vLLM generations the plan is written for, one registry.

- `lane.py`: a `Lane` (its pins, its rules, its engine renderer) and what a renderer returns.
- `registry.py`: every lane by id, the default, and the choice of a lane (installed plugin or
  NEURONSERVE_STACK) and of the instances it runs (its ids alone: neuronserve/lane_ids.py, for config/).
- `nxdi/`: the NxD Inference generation (vllm-neuron 0.2.x / 0.4.x): steps, rules, render, and one
  plugin profile per version (`nxdi/profiles.py`).
- `native/`: the rewritten plugin (vllm-neuron 0.24 in lane 2.32, 0.29 in lane 2.33): translate, engine,
  compile cache, and one `NativeRules` per lane (`native/rules.py`: what differs between them).

Adding a lane is a folder here (when its engine is new) or a rules entry in its generation's folder,
one entry in `registry.py` and its id in neuronserve/lane_ids.py (docs/DESIGN.md).
"""
