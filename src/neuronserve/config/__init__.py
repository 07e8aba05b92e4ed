"""Settings: the environment and the CLI, read once, turned into typed values (first step of the flow)."""
