"""Builders shared by the plan tests, with one set of defaults.

A test that needs another value passes it at the call (e.g. `facts(cores=24)`), so a reader sees every
departure from these defaults where it happens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuronserve.plan.resolution import Resolution, Speculation


def resolution(
    origins: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    warnings: list[str] | None = None,
    *,
    override: dict[str, Any] | None = None,
    spec: Any = None,
) -> Resolution:
    """A Resolution for calling one rule directly: `origins` as the rule reads them, `env` the user's
    passthrough environment, and `warnings` the list the rule's warnings land in (a fresh one unless
    given, so a test can keep asserting on its own list)."""
    return Resolution(
        origins=dict(origins or {}),
        override=override if override is not None else {},
        user_env=dict(env or {}),
        speculation=Speculation.parse(spec),
        warnings=warnings if warnings is not None else [],
    )
