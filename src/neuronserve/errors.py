"""The project's error types. Each carries a message meant for the person who configured the container.

The CLI turns these into a one-line message on stderr and a non-zero exit (never a stack trace):
ConfigError exits 2 (nothing was started), StageError and EngineError exit 1.
"""

from __future__ import annotations


class NeuronServeError(Exception):
    """Base class: `str(err)` is the whole user-facing message, including the fix."""

    exit_code = 1


class ConfigError(NeuronServeError):
    """The configuration is invalid or contradictory; raised before any side effect.

    `variables` names the settings (env vars / flags) involved, so tools and tests can check them.
    """

    exit_code = 2

    def __init__(self, message: str, variables: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.variables = variables


class StageError(NeuronServeError):
    """Fetching the model or compiled artifacts failed; the message names the URI and the likely fix."""


class EngineError(NeuronServeError):
    """The engine process failed to start or died."""
