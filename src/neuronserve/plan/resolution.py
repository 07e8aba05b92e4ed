"""One resolution of a launch: where each setting came from, what the plan said, and the values it
parsed once (and `count`, the one reading of a count setting, naming the variable that set it).

Why one object: the rules used to take `(override, origins, warnings)` each, a mutable warnings list
was handed down two dozen times (and de-duplicated at the end), and the speculative config was parsed
again by every rule that needed it. The rules now read the origin of a setting, record a warning and
read the typed values from here; the lanes' engine steps (plan/lanes/nxdi/steps.py) fill in the
resolved numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronserve.config.settings import Settings, env_name
from neuronserve.counts import positive
from neuronserve.errors import ConfigError

# Settings whose origin (the variable or `-- --flag` that set them) a refusal may name.
ORIGIN_KEYS = (
    "block-size",
    "num-gpu-blocks-override",
    "max-model-len",
    "enable-chunked-prefill",
    "enable-lora",
    "task",
    "runner",
    "enable-prefix-caching",
    "max-num-batched-tokens",
    "tensor-parallel-size",
    "max-num-seqs",
    "dtype",
    "speculative-config",
)


@dataclass(frozen=True)
class Speculation:
    """--speculative-config, parsed once. `text` is the setting as given (None unless a string),
    `config` the JSON object (None when unset, not JSON or not an object), `invalid` when not JSON."""

    text: str | None = None
    config: dict[str, Any] | None = None
    invalid: bool = False

    @classmethod
    def parse(cls, value: Any) -> Speculation:
        if not isinstance(value, str):
            return cls()
        try:
            cfg = json.loads(value)
        except ValueError:
            return cls(value, None, invalid=True)
        return cls(value, cfg if isinstance(cfg, dict) else None)

    @property
    def method(self) -> str:
        return str((self.config or {}).get("method", ""))

    @property
    def draft(self) -> str | None:
        """The draft model named (None when none or empty)."""
        model = (self.config or {}).get("model")
        return str(model) if model else None


@dataclass
class Resolution:
    """What the rules share while one plan is built (pure: no I/O, one per build_plan call).

    - `origins`: setting key (or override key) -> the variable that set it; `origin()` names the
      default variable for keys nobody set.
    - `warnings`: recorded once each, in the order first said (`warn`).
    - `override`: override_neuron_config as it will be rendered (the rules complete it in place).
    - `user_env`: the passthrough environment the engine inherits (DISABLE_NEURON_CUSTOM_SCHEDULER...).
    - typed values parsed once: `speculation`, `sampling` (the on-device sampling config once checked)
      and `kv` (the compiled KV layout once chosen).
    """

    origins: dict[str, str] = field(default_factory=dict)
    override: dict[str, Any] = field(default_factory=dict)
    user_env: Mapping[str, str] = field(default_factory=dict)
    speculation: Speculation = field(default_factory=Speculation)
    warnings: list[str] = field(default_factory=list)
    sampling: dict[str, Any] | None = None
    kv: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings) -> Resolution:
        """The resolution of `settings` before any rule ran: origins, override, and the settings' own
        warnings (read by config/) recorded first."""
        origins = {k: settings.origin(k, env_name(k)) for k in ORIGIN_KEYS}
        origins.update({k: s.origin for k, s in settings.override.items()})
        if settings.get("num-gpu-blocks-override") not in (None, False):  # false is unset, as in nxdi/kv.py
            origins["num-gpu-blocks-given"] = "yes"
        res = cls(
            origins=origins,
            override={k: s.value for k, s in settings.override.items()},
            user_env=settings.passthrough_env,
            speculation=Speculation.parse(settings.get("speculative-config")),
        )
        for text in settings.warnings:
            res.warn(text)
        return res

    def warn(self, text: str) -> None:
        """Say `text` in the plan's warnings, once (a second rule saying the same adds nothing)."""
        if text not in self.warnings:
            self.warnings.append(text)

    def origin(self, key: str, default: str | None = None) -> str:
        """The variable that set `key`; unset, `default` (an override key's own SM_NEURON_<KEY>)."""
        return self.origins.get(key, default or "SM_NEURON_" + key.upper())


def count(settings: Settings, key: str, least: int = 0) -> int | None:
    """A count from its setting (None when unset or false), refused unless a whole number >= `least`
    (counts.positive), naming the variable that set it."""
    value = settings.get(key)
    if value is None or value is False:
        return None
    number = positive(str(value), least)
    if number is None:
        var = settings.origin(key, env_name(key))
        raise ConfigError(f"{var}={value!r} must be a positive integer", (var,))
    return number
