"""Everything that reads the machine or files before the plan: devices, installed versions, the model's
config.json and safetensors headers, LMI's serving.properties, and an HF_TOKEN held in Secrets Manager.

`neuronserve.plan` is pure; this package is the thin shell that feeds it (`neuronserve.launchplan`
wires settings, these facts and the plan together)."""
