"""Every row of the settings table, fed every kind of malformed value through the entry points the program
reads it with: a value is either taken or refused with a ConfigError naming the row's variable, never any
other exception (a traceback is what `SAGEMAKER_BIND_TO_PORT=nan neuronserve plan` printed).

The entry points: `parse_settings` (with ServeOptions, FitOptions and StageOptions), the readers the
serve, fit, stage and AWS settings have of their own, the staging context and archive limits built from
them, the log format, the front server's connection limits, and each row's own `Var.read`. A value the
plan goes on to refuse is fine here: this is about reading, not planning.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from neuronserve import logsetup
from neuronserve.config import table
from neuronserve.config.aws import parse_aws
from neuronserve.config.cachehome import cache_home
from neuronserve.config.fit import parse_fit
from neuronserve.config.serve import parse_serve
from neuronserve.config.settings import parse_settings
from neuronserve.config.stage import parse_stage
from neuronserve.config.var import OVERRIDE_PATTERN, SM_PATTERN, Var
from neuronserve.errors import ConfigError
from neuronserve.serve import listener
from neuronserve.stage.archive import ArchiveLimits
from neuronserve.stage.context import StageContext

ROOT = Path(__file__).resolve().parents[3]
BAD_VALUES = (
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e3",
    "1e999",
    "1_0",
    "8080.9",
    "0",
    "-0",
    "-1",
    "-3",
    "+1",
    "0x10",
    "99999999999999999999",
    "9" * 5000,
    "",
    " ",
    "\t\n",
    "x",
    "\x00",
    "x" * 100_000,
    "{",
    "[",
    "{}",
    "[]",
    "null",
    "true",
    "false",
    "None",
    "٣",
    "²",
    "🙂",
    "a=b",
    '{"override_neuron_config": 5}',
)
# A row for a family of names is fed through one name of the family.
CONCRETE = {SM_PATTERN: "SM_VLLM_SEED", OVERRIDE_PATTERN: "SM_NEURON_SKIP_WARMUP"}
ENTRY_POINTS: dict[str, Callable[[Mapping[str, str]], Any]] = {
    "parse_settings": parse_settings,
    "parse_serve": parse_serve,
    "parse_fit": parse_fit,
    "parse_stage": parse_stage,
    "parse_aws": parse_aws,
    "cache_home": cache_home,
    "StageContext": StageContext.from_environ,
    "ArchiveLimits": ArchiveLimits.from_environ,
    "log format": logsetup.parse_format,
    "connection limits": listener.connection_limits,
    "body timeout": listener.body_timeout_s,
}


def _name(row: Var) -> str:
    return CONCRETE.get(row.name, row.name)


def _outcome(call: Callable[[], Any], name: str) -> str | None:
    """None when `call` takes the value or refuses it naming `name`; else what went wrong."""
    try:
        call()
    except ConfigError as err:
        if name not in err.variables or name not in str(err):
            return f"ConfigError not naming {name}: {err.variables} {str(err)[:200]}"
    except Exception as err:  # the failure this test exists for
        return f"{type(err).__name__}: {str(err)[:200]}"
    return None


def _problems(row: Var, value: str) -> list[str]:
    """What goes wrong when the row's variable is `value`, entry point by entry point."""
    name = _name(row)
    env = {name: value}
    readers: dict[str, Callable[[Mapping[str, str]], Any]] = {"Var.read": row.read, **ENTRY_POINTS}
    found = []
    for label, reader in readers.items():
        if (problem := _outcome(lambda reader=reader: reader(env), name)) is not None:
            found.append(f"{label}({name}={value[:20]!r}): {problem}")
    return found


@pytest.mark.parametrize("row", table.VARS.values(), ids=lambda v: v.name)
def test_every_row_takes_or_refuses_every_bad_value_naming_itself(row: Var) -> None:
    assert [problem for value in BAD_VALUES for problem in _problems(row, value)] == []


def test_the_walk_covers_every_table_and_would_see_a_crash() -> None:
    """Every part of the table is walked, and a parser that crashes is reported, not passed."""
    sources = {v.source for v in table.VARS.values()}
    assert {"neuronserve", "SageMaker", "Neuron runtime", "AWS SDK", "LMI (DJL)", "TGI / HF"} <= sources

    def crashes(var: Var, raw: str) -> int:
        return int(float(raw))  # the reading `whole_number` had

    row = Var("X_PORT", "", 8080, "", "", crashes)
    assert _outcome(lambda: row.read({"X_PORT": "nan"}), "X_PORT") == (
        "ValueError: cannot convert float NaN to integer"
    )
    assert _outcome(lambda: row.read({"X_PORT": "8080"}), "X_PORT") is None


@pytest.mark.parametrize("value", ["nan", "inf", "1e3", "1_0", "8080.9", "99999999999999999999"])
def test_a_malformed_port_is_exit_2_naming_the_variable_not_a_traceback(value: str) -> None:
    """`SAGEMAKER_BIND_TO_PORT=nan neuronserve plan` ended in "cannot convert float NaN to integer"."""
    env = {**os.environ, "SAGEMAKER_BIND_TO_PORT": value, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"neuronserve plan: error: SAGEMAKER_BIND_TO_PORT={value}") or (
        proc.stderr.startswith(f"neuronserve plan: error: SAGEMAKER_BIND_TO_PORT='{value}'")
    )
