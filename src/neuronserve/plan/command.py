"""The engine's command line around what the lane renders: the model and listen address, the user's
other flags in a fixed order, the arguments after `--` less those the plan decides, and the flags that
must come together (pure).

The argv order is fixed (model, host/port, compiled-graph flags, user flags sorted by name, extra
arguments last, less those the plan decides itself: see engine_tail) so identical configurations give
identical commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neuronserve.config.settings import EXTRA_BOOL, EXTRA_VALUE, Settings, env_name, flag_tokens
from neuronserve.config.table import TOOL_PARSERS
from neuronserve.errors import ConfigError
from neuronserve.plan import flagcheck, replicas
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.flagcheck import OptionTable
from neuronserve.plan.lanes.lane import CONSUMED
from neuronserve.plan.resolution import Resolution
from neuronserve.types import Device, ModelSpec

ENGINE_HOST = "127.0.0.1"
# Settings that exist only for Neuron: the CPU plan drops them, each with a warning.
NEURON_ONLY_FLAGS = frozenset(
    {"tensor-parallel-size", "num-gpu-blocks-override", "device", "override-neuron-config"}
)
# Handled by the plan itself, never passed through as a generic flag.
PLAN_FLAGS = frozenset({"model", "host", "port", "revision", "served-model-name", replicas.DP_KEY})
LISTEN_IGNORED = (
    " ignored: the engine listens on 127.0.0.1:NEURONSERVE_ENGINE_PORT behind the front server, whose port "
    "is SAGEMAKER_BIND_TO_PORT"
)


def model_argv(settings: Settings, facts: HostFacts, model: ModelSpec) -> list[str]:
    """The engine command up to its listen address: the model it reads, its revision when the engine
    fetches it, and the name it serves under (a staged hub model keeps its id as its name)."""
    argv = [facts.python, "-m", facts.vllm_module, "--model", model.local_path or model.uri]
    if model.revision and model.local_path is None:
        argv += ["--revision", model.revision]
    served = settings.engine.get("served-model-name")
    if served is not None and not served.origin.startswith("-- "):
        argv += flag_tokens("served-model-name", served.value)
    elif model.source == "hub" and model.local_path and served is None:
        argv += ["--served-model-name", model.uri]
    return [*argv, "--host", ENGINE_HOST, "--port", str(settings.engine_port)]


def check_flags(settings: Settings, device: Device, table: OptionTable | None) -> None:
    """Before anything else is decided: every setting vLLM gets as it is (user_flags' keys; on Neuron
    the lane renders CONSUMED itself), and the names in the arguments after `--`, against the engine's
    option table (plan/flagcheck.py). First, so a misspelled variable is refused by its own name rather
    than later as the setting it failed to set (`SM_VLLM_MAX_MODLE_LEN` is not "set
    SM_VLLM_MAX_MODEL_LEN")."""
    if device == "neuron":
        refuse_extra_override(settings.extra_args)  # its own message, before "not an option"
    skip = CONSUMED if device == "neuron" else NEURON_ONLY_FLAGS | {"additional-config"}
    keys = [
        key
        for key, s in sorted(settings.engine.items())
        if key not in skip | PLAN_FLAGS | {"host", "port"} and not s.origin.startswith("-- ")
    ]
    flagcheck.check_names(settings.engine, keys, table)
    flagcheck.check_tail(settings.extra_args, table, values=False)


def user_flags(
    settings: Settings,
    skip: frozenset[str],
    device: Device,
    res: Resolution,
    table: OptionTable | None = None,
) -> list[str]:
    """Every other configured engine flag, sorted by name (the AWS DLC's deterministic order), each
    value checked against the engine's option table (plan/flagcheck.py)."""
    out: list[str] = []
    for key in sorted(settings.engine):
        s = settings.engine[key]
        if key in ("host", "port") and not s.origin.startswith("-- "):
            res.warn(s.origin + LISTEN_IGNORED)
            continue
        if key in skip or key in PLAN_FLAGS or s.origin.startswith("-- "):
            continue
        if device == "cpu" and key in NEURON_ONLY_FLAGS:
            res.warn(f"{s.origin} is a Neuron setting: dropped for the CPU engine")
            continue
        if table is not None:
            flagcheck.check_setting(key, s.value, s.origin, table)
        out += flag_tokens(key, s.value)
    return out


def engine_tail(extra: tuple[str, ...], rendered: list[str], res: Resolution) -> tuple[str, ...]:
    """The arguments after `--` less those the plan already put in argv, since vLLM's argparse keeps the
    last of a repeated flag and the tail comes last:
    - `--model`: the plan passes the model it chose (staged to a local directory for s3:// or an
      archive); `-- --model s3://...` made vLLM load the URI, `-- --model a --model b` loaded b while the
      plan said a. The other models are named in choose_model's warning.
    - `--host`/`--port`: the engine must listen where the front proxies to (and each replica on its own
      port): dropped with the warning SM_VLLM_HOST/SM_VLLM_PORT get.
    - a flag the plan reads from after `--` and renders itself (`rendered`, the Neuron engine flags such
      as `--max-num-batched-tokens` or `--tensor-parallel-size`, whose `max` vLLM cannot parse): passed
      once, as the plan resolved it.
    """
    names = {tok[2:].removeprefix("no-") for tok in rendered if tok.startswith("--")}
    bools = names & EXTRA_BOOL
    values = (names & EXTRA_VALUE) | {"model", "host", "port"}
    out: list[str] = []
    skip = False
    for tok in extra:
        if skip:
            skip = False
            continue
        name, eq, _ = tok[2:].partition("=") if tok.startswith("--") else ("", "", "")
        if name in values:
            skip = not eq
            if name in ("host", "port"):
                res.warn(f"-- --{name}" + LISTEN_IGNORED)
        elif name.removeprefix("no-") not in bools:
            out.append(tok)
    return tuple(out)


def refuse_extra_override(extra: tuple[str, ...]) -> None:
    """The plan merges the Neuron override itself; a second one after `--` would silently replace it."""
    for tok in extra:
        for flag, var in (
            ("--additional-config", "SM_VLLM_ADDITIONAL_CONFIG"),
            ("--override-neuron-config", "SM_NEURON_OVERRIDE_CONFIG"),
        ):
            if tok == flag or tok.startswith(flag + "="):
                raise ConfigError(
                    f"{flag} after `--` would replace the plan's Neuron override: set {var} "
                    f"(or SM_NEURON_<KEY>) instead",
                    (flag, var),
                )


def extra_value(extra: Sequence[str], name: str) -> str | None:
    """The value of `--name` among the arguments after `--` (`--name v` or `--name=v`), last one wins
    as in argparse; None when absent."""
    found: str | None = None
    for i, tok in enumerate(extra):
        if tok == f"--{name}" and i + 1 < len(extra):
            found = extra[i + 1]
        elif tok.startswith(f"--{name}="):
            found = tok.split("=", 1)[1]
    return found


def setting_of(settings: Settings, key: str) -> tuple[Any, str]:
    """(value, the variable or `-- --flag` that set it) of an engine flag, after `--` included."""
    value = settings.get(key)
    if value is not None:
        return value, settings.origin(key, env_name(key))
    given = extra_value(settings.extra_args, key)
    return given, f"-- --{key}"


def check_tool_calling(settings: Settings, res: Resolution) -> None:
    """--enable-auto-tool-choice needs --tool-call-parser; a parser alone is passed and said.

    vLLM 0.11.0 refuses auto tool choice without a parser at start (entrypoints/openai/cli_args.py:276-279;
    0.13.0 :292-293), after the model download and, on Neuron, the compile: refused, whatever the dialect
    (SM_VLLM_*, LMI OPTION_*, or `--` arguments). The reverse is no error in vLLM's source: a parser
    without auto tool choice is accepted and never built (0.11.0 serving_chat.py:115-128 builds it only
    with enable_auto_tools), and `tool_choice: auto` requests get a 400 (:205-213), so the plan passes it
    and says it is unused. The parser name itself is not checked: vLLM 0.11.0's CLI lists no choices
    for it (src/neuronserve/data/vllm-0.11.0-cli.json), and --tool-parser-plugin may register more.
    """
    auto = settings.get("enable-auto-tool-choice")
    auto_origin = settings.origin("enable-auto-tool-choice", "-- --enable-auto-tool-choice")
    if auto is None and "--enable-auto-tool-choice" in settings.extra_args:
        auto = True
    parser, parser_origin = setting_of(settings, "tool-call-parser")
    has_parser = parser not in (None, False, True) and str(parser).strip() != ""
    if auto is True and not has_parser:
        raise ConfigError(
            f"{auto_origin}=true needs a tool-call parser (vLLM refuses to start without one): set "
            f"SM_VLLM_TOOL_CALL_PARSER to the model's: {TOOL_PARSERS}",
            (auto_origin, "SM_VLLM_TOOL_CALL_PARSER"),
        )
    if has_parser and auto is not True:
        res.warn(
            f'{parser_origin}={parser} is unused without auto tool choice (vLLM answers tool_choice "auto" '
            "with a 400): set SM_VLLM_ENABLE_AUTO_TOOL_CHOICE=true (or OPTION_ENABLE_AUTO_TOOL_CHOICE=true) "
            "to use it"
        )
