"""Assets on this host (used in place, checked first) and the files the plan writes once the assets
are local."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.s3.assetplans import asset_plan
from tests.s3.helpers import put_tree
from tests.s3.stage.test_assets import ADAPTER, staged

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.types import AssetSpec

pytestmark = pytest.mark.s3


@pytest.mark.parametrize(
    ("make", "is_file", "kind", "problem"),
    [
        (None, False, "lora", "does not exist"),
        (None, True, "chat_template", "does not exist"),
        ("dir", True, "chat_template", "is a directory, not a file"),
        ("file", False, "lora", "is a file, not a directory"),
        (None, False, "quantized_checkpoint", "does not exist"),
    ],
)
def test_a_local_asset_that_is_not_there_names_the_setting_and_the_path(
    s3_env: dict[str, str], tmp_path: Path, make: str | None, is_file: bool, kind: str, problem: str
) -> None:
    path = tmp_path / "adapters" / "x"
    if make == "dir":
        path.mkdir(parents=True)
    elif make == "file":
        path.parent.mkdir(parents=True)
        path.write_text("{}")
    asset = AssetSpec(
        kind=kind, source=str(path), local=str(path), fetch="local", is_file=is_file, origin="SM_VLLM_X"
    )  # type: ignore[arg-type]
    with pytest.raises(StageError) as err:
        stage_all(asset_plan(tmp_path, asset), s3_env)
    assert f"{path} (set by SM_VLLM_X) {problem}" in str(err.value)
    assert "fix the path" in str(err.value)


def test_local_assets_are_used_in_place(s3_env: dict[str, str], tmp_path: Path) -> None:
    adapter = tmp_path / "mine" / "sql"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    checkpoint = tmp_path / "q.pt"  # a quantized checkpoint may be one file
    checkpoint.write_bytes(b"\0" * 16)
    plan = asset_plan(
        tmp_path,
        AssetSpec(kind="lora", source=str(adapter), local=str(adapter), fetch="local", name="sql"),
        AssetSpec(
            kind="chat_template", source=str(template), local=str(template), fetch="local", is_file=True
        ),
        AssetSpec(kind="quantized_checkpoint", source=str(checkpoint), local=str(checkpoint), fetch="local"),
    )
    stage_all(plan, s3_env)
    assert sorted(os.listdir(adapter)) == ["adapter_config.json"]  # nothing written into a user's directory
    assert sorted(os.listdir(tmp_path / "mine")) == ["sql"]


def test_plan_files_are_written_exactly_once_the_assets_are_local(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    put_tree(s3, bucket, "sql/", ADAPTER)
    local = str(tmp_path / "work" / "lora" / "sql")
    ckpt = str(tmp_path / "work" / "lora" / "lora_ckpt.json")
    text = json.dumps({"lora-ckpt-dir": {"sql": local}}, indent=2) + "\n"
    plan = asset_plan(
        tmp_path,
        AssetSpec(kind="lora", source=f"s3://{bucket}/sql/", local=local, fetch="s3", name="sql"),
        files={ckpt: text},
    )
    stage_all(plan, s3_env)
    assert Path(ckpt).read_text(encoding="utf-8") == text
    assert staged(local) == ADAPTER
    assert sorted(os.listdir(Path(ckpt).parent)) == ["lora_ckpt.json", "sql", "sql.lock"]  # no temp file left

    Path(ckpt).write_text("stale")  # the plan is the truth: rewritten on every start
    stage_all(plan, s3_env)
    assert Path(ckpt).read_text(encoding="utf-8") == text


def test_plan_files_are_not_written_when_an_asset_fails(s3_env: dict[str, str], tmp_path: Path) -> None:
    ckpt = tmp_path / "lora_ckpt.json"
    plan = asset_plan(
        tmp_path,
        AssetSpec(
            kind="lora", source=str(tmp_path / "absent"), local=str(tmp_path / "absent"), fetch="local"
        ),
        files={str(ckpt): "{}"},
    )
    with pytest.raises(StageError):
        stage_all(plan, s3_env)
    assert not ckpt.exists()


def test_an_unwritable_plan_file_is_a_clear_error(s3_env: dict[str, str], tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory must be")
    plan = asset_plan(tmp_path, files={str(blocker / "lora_ckpt.json"): "{}"})
    with pytest.raises(StageError, match=r"cannot write .*lora_ckpt\.json.*NEURONSERVE_WORK_DIR"):
        stage_all(plan, s3_env)
