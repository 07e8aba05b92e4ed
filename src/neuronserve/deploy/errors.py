"""Errors of the deploy tooling that are not configuration mistakes: the CLI prints them as one line."""

from __future__ import annotations

from neuronserve.errors import NeuronServeError


class DeployError(NeuronServeError):
    """AWS answered, and the answer is a failure the user must act on (FailureReason, rollback, timeout)."""
