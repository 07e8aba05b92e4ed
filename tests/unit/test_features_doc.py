"""docs/FEATURES.md stays true against the code.

The feature table is only worth reading while it matches what the plan and the front do, so each row is
checked from outside: every variable it names is one the settings table reads (or a vLLM 0.11.0 flag the
generic `SM_VLLM_<NAME>` row passes through), every test it names exists, and every line of the plugin's
source it cites is cited by the code too, so a rule and its row cannot point at different lines. Each row
also names the contract test (tests/contract) that runs it through the real stack, and the configurations
it runs: both must exist. The feature-pair table below the rows is checked against a contract run in
tests/contract/test_features_table.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.contract.known import KNOWN

from neuronserve.config import table

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "FEATURES.md"
SRC = ROOT / "src" / "neuronserve"
CLI = json.loads((SRC / "data" / "vllm-0.11.0-cli.json").read_text())["options"]

# The rows the seed's 0.2.2+lts table and its known issues owe (their first cell, lower case).
REQUIRED_ROWS = (
    "continuous batching",
    "prefix caching",
    "multi-lora",
    "speculative decoding",
    "quantization",
    "dynamic sampling",
    "tool calling",
    "cpu sampling",
    "chunked prefill",
    "multimodal",
    "num_gpu_blocks_override floor",
    "tie_word_embeddings with hub ids",
    "neuron_compiled_artifacts",
    "chat template caching",
    "in-tree backends",
)
COLUMNS = (
    "feature",
    "turned on by",
    "what the plan checks",
    "proved by",
    "checked against the stack by",
    "what the plugin does not do",
)
VAR = re.compile(r"`((?:SM_VLLM|SM_NEURON|OPTION|HF|NEURONSERVE|NEURON|VLLM|SAGEMAKER|MAX)_[A-Z0-9_]+)")
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)")
CITE = re.compile(r"`((?:worker/|core/)?[\w]+\.py):(\d+)(?:-(\d+))?`")
CONTRACT_REF = re.compile(r"`(tests/contract/[\w/]+\.py)::(\w+)`")
CASE_REF = re.compile(r"`((?:2\.2[78]|golden)/[^`]+)`")
NO_CONTRACT = "none: vLLM 0.10 and older are no lane the tier runs"  # the in-tree row only


def _rows() -> list[dict[str, str]]:
    text = DOC.read_text().split("<!-- feature pairs")[0]  # the pair table has columns of its own
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    header = [c.strip().lower() for c in lines[0].strip("|").split("|")]
    assert tuple(header) == COLUMNS, header
    rows = []
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == len(COLUMNS):
            rows.append(dict(zip(COLUMNS, cells, strict=True)))
    return rows


ROWS = _rows()
SOURCES = [p.read_text() for p in SRC.rglob("*.py")]


def _cited(file: str, lines: str) -> bool:
    """A module cites `file:lines` when it names the lines and the file (written out in full, or by its
    last word, e.g. `loader.py` or `runner :971-977` after the full name was given once)."""
    short = file.rsplit("_", 1)[-1].removesuffix(".py")
    return any(f":{lines}" in text and (file in text or short in text) for text in SOURCES)


def _ids() -> list[str]:
    return [r["feature"].replace("`", "").split("(")[0].strip().lower() for r in ROWS]


def test_every_feature_of_the_seed_has_a_row() -> None:
    names = _ids()
    missing = [want for want in REQUIRED_ROWS if not any(n.startswith(want) for n in names)]
    assert not missing, f"docs/FEATURES.md lacks rows for {missing}"


@pytest.mark.parametrize("row", ROWS, ids=_ids())
def test_every_variable_a_row_names_is_read(row: dict[str, str]) -> None:
    for name in VAR.findall(row["turned on by"] + row["what the plan checks"]):
        if name in table.VARS:
            continue
        if name.startswith("SM_NEURON_"):
            continue  # the SM_NEURON_<KEY> row: any override key
        if name.startswith("SM_VLLM_"):
            flag = "--" + name.removeprefix("SM_VLLM_").lower().replace("_", "-")
            assert flag in CLI, f"{name}: no row and no vLLM 0.11.0 flag {flag}"
            continue
        pytest.fail(f"{row['feature']}: {name} is not a variable neuronserve reads")


@pytest.mark.parametrize("row", ROWS, ids=_ids())
def test_every_row_is_proved_by_a_test_that_exists(row: dict[str, str]) -> None:
    refs = TEST_REF.findall(row["proved by"])
    assert refs, f"{row['feature']}: no test named"
    for path, name in refs:
        text = (ROOT / path).read_text()
        assert re.search(rf"def {name}\b", text), f"{path} has no {name}"


@pytest.mark.parametrize("row", ROWS, ids=_ids())
def test_the_plugin_lines_a_row_cites_are_cited_by_the_code(row: dict[str, str]) -> None:
    for file, start, end in CITE.findall(row["what the plan checks"]):
        lines = start + (f"-{end}" if end else "")
        assert _cited(file, lines), f"{row['feature']}: no rule in src/ cites {file}:{lines}"


@pytest.mark.parametrize("row", ROWS, ids=_ids())
def test_every_row_names_its_contract_test_and_configurations_that_exist(row: dict[str, str]) -> None:
    from tests.contract.cases import all_cases

    cell = row["checked against the stack by"]
    if cell == NO_CONTRACT:
        assert row["feature"] == "In-tree backends"
        return
    refs = CONTRACT_REF.findall(cell)
    assert refs, f"{row['feature']}: no contract test named"
    for path, name in refs:
        assert re.search(rf"def {name}\b", (ROOT / path).read_text()), f"{path} has no {name}"
    known = {case.id for case in all_cases()}
    missing = [case for case in CASE_REF.findall(cell) if case not in known]
    assert not missing, f"{row['feature']}: tests/contract/cases.py has no {missing}"


def test_an_item_said_to_be_under_way_is_one_the_contract_tier_still_lists() -> None:
    """ "Issue 25 item N: to be refused" (or "being fixed") stays in the doc only while
    tests/contract/known.py still lists item N as a disagreement under way. The bug: the silent-behaviour
    list said LoRA on a multimodal model was "to be refused" after the plan had refused it."""
    open_items = {item for item, _, _ in KNOWN}
    said = re.findall(r"[Ii]ssue 25 item (\d+):? (?:to be refused|being fixed|to be fixed)", DOC.read_text())
    assert [int(n) for n in said if int(n) not in open_items] == []
