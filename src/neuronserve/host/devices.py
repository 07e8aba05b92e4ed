"""NeuronCores this process may use: NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES when set, else the
Neuron devices counted (`neuron-ls` where it answers, two cores per device node where it does not),
divided by NEURON_LOGICAL_NC_CONFIG.

`neuron-ls` runs only where a Neuron device exists and no variable already says.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import NamedTuple

from neuronserve.config.table import VARS
from neuronserve.counts import positive
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import parse_core_list

CORES_PER_CHIP = 2  # inf2 and trn1; trn2 is reported correctly by neuron-ls

# Where the Neuron tools install neuron-ls; containers often lack /opt/aws/neuron/bin on PATH.
NEURON_LS_FALLBACK = "/opt/aws/neuron/bin/neuron-ls"
# A wedged driver can hang neuron-ls; the plan then counts devices instead of waiting.
NEURON_LS_TIMEOUT_S = 10.0


def neuron_ls_cores() -> int | None:
    """NeuronCores by neuron-ls (PATH first, then its install path); None when absent, failing or hung."""
    exe = shutil.which("neuron-ls") or (NEURON_LS_FALLBACK if os.path.exists(NEURON_LS_FALLBACK) else None)
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--json-output"], capture_output=True, timeout=NEURON_LS_TIMEOUT_S, check=True, text=True
        )
        devices = json.loads(out.stdout)
        return sum(int(d.get("nc_count", 0)) for d in devices) or None
    except (OSError, subprocess.SubprocessError, ValueError, TypeError, AttributeError):
        return None


def neuron_devices() -> int:
    """How many /dev/neuron<N> device nodes this host has."""
    return len(glob.glob("/dev/neuron[0-9]*"))


class Cores(NamedTuple):
    visible: int | None  # None: unknown
    source: str  # what said so (a variable, neuron-ls, the device count, or "unknown")
    logical_nc_config: int | None
    physical: int | None  # neuron-ls's count, when it was asked and answered


def visible_cores(environ: Mapping[str, str], devices: int) -> Cores:
    """The cores by the first source that says: the variables, then the devices."""
    lnc = positive(VARS["NEURON_LOGICAL_NC_CONFIG"].read(environ) or "")
    spec = VARS["NEURON_RT_VISIBLE_CORES"].read(environ) or ""
    count = VARS["NEURON_RT_NUM_CORES"].read(environ) or ""
    if spec:
        return Cores(len(parse_core_list(spec)), "NEURON_RT_VISIBLE_CORES", lnc, None)
    if count:
        cores = positive(count)
        if cores is None:
            raise ConfigError(
                f"NEURON_RT_NUM_CORES={count!r} is not a positive integer", ("NEURON_RT_NUM_CORES",)
            )
        return Cores(cores, "NEURON_RT_NUM_CORES", lnc, None)
    if devices:
        physical = neuron_ls_cores()
        source = "neuron-ls" if physical else f"{devices} devices x {CORES_PER_CHIP} cores"
        return Cores((physical or devices * CORES_PER_CHIP) // (lnc or 1), source, lnc, physical)
    return Cores(None, "unknown", lnc, None)
