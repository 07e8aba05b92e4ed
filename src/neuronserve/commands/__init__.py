"""The CLI's subcommands, one module each, imported lazily by `neuronserve.cli`."""
