"""config/typos.py: the list of huggingface_hub's own variables is the installed package's, the valid
NEURONSERVE_* names are the settings table's rows (so a row added or removed elsewhere counts at once),
and the edit distance is Levenshtein's."""

from __future__ import annotations

import re
from pathlib import Path

import huggingface_hub
import pytest

from neuronserve.config import table, typos
from neuronserve.errors import ConfigError


def test_hub_vars_are_every_hf_name_huggingface_hub_reads() -> None:
    """Every "HF_*" literal in the installed huggingface_hub (constants.py, utils/_auth.py, ...), less the
    HF_HUB_* prefix the check lets through whole: a newer hub's variable must be added here, not refused."""
    package = Path(huggingface_hub.__file__).parent
    found = set()
    for source in package.rglob("*.py"):
        found |= set(re.findall(r"[\"'](HF_[A-Z0-9_]+)[\"']", source.read_text(encoding="utf-8")))
    read = {n for n in found if not n.startswith(typos.HUB_PREFIX) and not n.endswith("_")}
    assert read - typos.HUB_VARS == set()
    assert {"HF_HOME", "HF_TOKEN", "HF_ENDPOINT"} <= typos.HUB_VARS


def test_neuronserve_names_are_the_table_rows() -> None:
    """Each row is accepted; a name that is no row is refused, naming the row it is closest to."""
    ours = [n for n in table.VARS if n.startswith("NEURONSERVE_")]
    assert len(ours) > 20
    typos.check_names({n: "x" for n in ours})
    for name in ours[:5]:
        with pytest.raises(ConfigError, match=f"did you mean {name}"):
            typos.check_names({name + "X": "1"})


def test_hub_and_tooling_names_pass() -> None:
    typos.check_names({n: "1" for n in (*typos.HUB_VARS, *typos.TOOLING_VARS, "HF_HUB_NEWLY_ADDED")})


@pytest.mark.parametrize(
    ("a", "b", "d"),
    [("", "abc", 3), ("kitten", "sitting", 3), ("HF_NUM_CORE", "HF_NUM_CORES", 1), ("ab", "ba", 2)],
)
def test_distance_is_levenshtein(a: str, b: str, d: int) -> None:
    assert typos.distance(a, b) == typos.distance(b, a) == d


def test_near_allows_two_edits_only_between_long_names() -> None:
    assert typos.near("HF_MODEL_DIR", ["HF_MODEL_ID"]) is None  # 2 edits, an 11-character name
    assert typos.near("HF_MODEL_I", ["HF_MODEL_ID"]) == "HF_MODEL_ID"
    assert typos.near("OPTION_N_POSITONS", ["OPTION_N_POSITIONS"]) == "OPTION_N_POSITIONS"
    assert typos.near("OPTION_N_PSITONS", ["OPTION_N_POSITIONS"]) == "OPTION_N_POSITIONS"
    assert typos.near("OPTION_N_PSTONS", ["OPTION_N_POSITIONS"]) is None
