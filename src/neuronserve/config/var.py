"""One row of the settings table (`Var`) and the names of the conventions rows come from.

Kept apart from the rows themselves (table.py: engine settings; hosttable.py and limitstable.py:
NEURONSERVE_*; runtimetable.py: the Neuron runtime's and SageMaker's; awstable.py: the AWS SDK's) so
every part of the table shares them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neuronserve.config import values as p


@dataclass(frozen=True)
class Var:
    """One configuration variable.

    `key` is the engine setting it feeds (a vLLM flag name without `--`), or a neuronserve setting
    in angle brackets (e.g. `<model>`), or "" for variables read directly by name. `field` is where a
    variable read by name lands: `serve.<attr>` (ServeOptions), `fit.<attr>` (FitOptions),
    `settings.<attr>` (Settings), `dialect.<role>` (what decides the generate dialect), `engine_env`
    (passed to the engine as given), or "" (read elsewhere: the row's help says by what).
    `default` is the typed value an unset or blank variable takes; where the plan decides it (it
    depends on the device or other settings), it is None here and `default_doc` says what the plan does.
    `parse` turns the text as set (never blank) into that type, or raises the ConfigError naming the
    variable (config/values.py).
    """

    name: str
    key: str
    default: Any
    source: str
    help: str
    parse: p.Parser = p.text
    field: str = ""
    default_doc: str = ""

    def read(self, environ: Mapping[str, str]) -> Any:
        """The typed value from `environ`: the default when unset or blank, else the parsed text."""
        raw = environ.get(self.name)
        if raw is None or not raw.strip():
            return self.default
        return self.parse(self, raw)


SM = "SM_VLLM (AWS vLLM DLC)"
NEURON = "Neuron override"
LMI = "LMI (DJL)"
TGI = "TGI / HF"
NS = "neuronserve"
SAGEMAKER = "SageMaker"
NRT = "Neuron runtime"
AWS = "AWS SDK"

SM_PATTERN = "SM_VLLM_<NAME>"  # the row for every SM_VLLM_* variable without a row of its own
OVERRIDE_PATTERN = "SM_NEURON_<KEY>"  # the row for every SM_NEURON_* override key
DEVICES = ("auto", "neuron", "cpu")
DIALECTS = ("tgi", "lmi")
STREAM_FORMATS = ("jsonlines", "sse")
FIT_MODES = ("refuse", "warn", "off")
