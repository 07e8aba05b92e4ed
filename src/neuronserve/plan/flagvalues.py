"""Whether vLLM's parser would take the values given to one option: their count (`nargs`), their type (the
grammar of the option's argparse `type`, recorded by scripts/vllm_cli_table.py value_type) and its
`choices`. Pure; the option tables are src/neuronserve/data/vllm-<version>-cli.json (plan/flagcheck.py).

Each grammar accepts only text vLLM's own `type` function accepts (vllm/engine/arg_utils.py parse_type,
optional_type, union_dict_and_str; vllm/utils human_readable_int), so a value refused here would be
refused at engine start; it may be narrower (`human_int` takes the suffixes of every lane's vLLM,
k/m/g and K/M/G, not 0.32's t/T). A type the table names `other` (a function the generator does not
know, e.g. a lower-casing lambda) is not checked, nor are its choices (they are compared after it).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_HUMAN_DECIMAL = re.compile(r"([0-9]+(?:\.[0-9]+)?)([kmg])")  # 25.6k = 25600 (vllm/utils human_readable_int)
_HUMAN_BINARY = re.compile(r"([0-9]+)([KMG])")  # 2K = 2048: no fraction with a binary suffix
_OBJECT = re.compile(r"(?s)^\s*{.*}\s*$")  # what union_dict_and_str parses as JSON
_FALSE_WORDS = ("0", "no", "off", "n", "f")


def _int(text: str) -> Any:
    return int(text)  # what vLLM calls: the same acceptance, the same refusal


def _float(text: str) -> Any:
    return float(text)


def _human_int(text: str) -> Any:
    stripped = text.strip()
    decimal = _HUMAN_DECIMAL.fullmatch(stripped)
    if decimal:
        return int(float(decimal.group(1)) * {"k": 10**3, "m": 10**6, "g": 10**9}[decimal.group(2)])
    binary = _HUMAN_BINARY.fullmatch(stripped)
    if binary:
        return int(binary.group(1)) * {"K": 2**10, "M": 2**20, "G": 2**30}[binary.group(2)]
    return int(stripped)


def _human_int_or_auto(text: str) -> Any:
    return -1 if text.strip() in ("-1", "auto", "AUTO", "Auto") else _human_int(text)


def _json(text: str) -> Any:
    return json.loads(text)


def _json_or_str(text: str) -> Any:
    return json.loads(text) if _OBJECT.match(text) else text


def _bool(text: str) -> Any:
    """Python's bool() of the text: true for anything but "". Words that mean false are refused, since
    vLLM would read them as true."""
    if text.strip().lower() in _FALSE_WORDS:
        raise ValueError(text)
    return bool(text)


# type name -> (parse or raise ValueError, what a message says the option takes)
GRAMMARS: dict[str, tuple[Callable[[str], Any], str]] = {
    "str": (str, "text"),
    "int": (_int, "a whole number"),
    "float": (_float, "a number"),
    "human_int": (_human_int, "a whole number (or with a k/m/g or K/M/G suffix, e.g. 32k)"),
    "human_int_or_auto": (_human_int_or_auto, "a whole number (32k style suffixes allowed), -1 or auto"),
    "json": (_json, "JSON"),
    "json_or_str": (_json_or_str, "text, or a JSON object"),
    "bool": (
        _bool,
        "any text, read as true (Python's bool(): false, 0 and no are true too; omit it instead)",
    ),
}


def _count_ok(nargs: Any, n: int) -> bool:
    if nargs is None:
        return n == 1
    if nargs == "?":
        return n <= 1
    if nargs == "+":
        return n >= 1
    if nargs == "*":
        return True
    return bool(n == nargs)


def _typed(type_name: str | None, text: str) -> tuple[bool, Any]:
    """(known, the value as vLLM's type makes it), or ValueError; "X or None" also takes "" and None."""
    name = type_name or "str"
    if name.endswith(" or None"):
        if text in ("", "None"):
            return True, None
        name = name.removesuffix(" or None")
    grammar = GRAMMARS.get(name)
    if grammar is None:
        return False, text
    return True, grammar[0](text)


def describe(type_name: str | None) -> str:
    name = (type_name or "str").removesuffix(" or None")
    said = GRAMMARS[name][1] if name in GRAMMARS else name
    return said + (" (or None)" if (type_name or "").endswith(" or None") else "")


def value_problem(opt: Mapping[str, Any], values: Sequence[str]) -> str | None:
    """What vLLM would refuse in `values` for option `opt` (a table entry), as the end of a sentence
    starting with the option's name; None when it would take them."""
    nargs = opt["nargs"]
    if not _count_ok(nargs, len(values)):
        if not values:
            return "needs a value"
        wanted = "one value" if nargs is None else f"{nargs} values" if isinstance(nargs, int) else "values"
        return f"takes {wanted}, given {len(values)}: {list(values)}"
    choices = opt["choices"]
    for text in values:
        try:
            known, value = _typed(opt.get("type"), text)
        except (ValueError, TypeError):
            return f"takes {describe(opt.get('type'))}, not {text!r}"
        if known and choices and value is not None and value not in choices:
            return f"takes one of {', '.join(str(c) for c in choices)}, not {text!r}{_near(text, choices)}"
    return None


def _near(text: str, choices: Sequence[Any]) -> str:
    """The choice `text` was most likely meant to be: the one it begins, else the nearest spelling."""
    names = [str(c) for c in choices]
    begun = [n for n in names if n.lower().startswith(text.lower())]
    found = begun if len(begun) == 1 else difflib.get_close_matches(text, names, n=1, cutoff=0.6)
    return f" (did you mean {found[0]}?)" if found else ""
