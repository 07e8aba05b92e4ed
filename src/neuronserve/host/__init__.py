"""Everything that reads the machine or files before the plan: devices, installed versions, the model's
config.json and safetensors headers, LMI's serving.properties, and `resolve` (gather, then plan).

`neuronserve.plan` is pure; this package is the thin shell that feeds it."""
