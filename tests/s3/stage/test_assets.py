"""Every asset the engine reads besides the model, staged for real from the moto server (or local disk)
by the model's stager: manifests, resume, safety checks, then the plan's files."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.s3.assetplans import asset_plan
from tests.s3.conftest import ServerControl
from tests.s3.helpers import put_tree, read_tree
from tests.s3.killed import fetched_again, kill_when
from tests.support.trees import tar_bytes

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.stage.paths import JOURNAL_NAME, MANIFEST_NAME
from neuronserve.types import AssetSpec, ModelSpec, Progress

pytestmark = pytest.mark.s3

ADAPTER = {
    "adapter_config.json": b'{"r": 8, "target_modules": ["q_proj", "v_proj"]}',
    "adapter_model.safetensors": os.urandom(1_500_000),  # two 1 MiB parts in the tests' settings
    "nested/README.md": b"# adapter",
}


def staged(dest: str) -> dict[str, bytes]:
    got = read_tree(dest)
    assert got.pop(MANIFEST_NAME)
    return got


@pytest.mark.parametrize(
    ("kind", "origin", "word"),
    [
        ("lora", "SM_VLLM_LORA_MODULES", "LoRA adapter"),
        ("draft", "SM_VLLM_SPECULATIVE_CONFIG", "draft model"),
        ("quantized_checkpoint", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH", "quantized checkpoint"),
    ],
)
def test_each_directory_kind_is_copied_from_an_s3_prefix(
    s3: Any,
    bucket: str,
    s3_env: dict[str, str],
    tmp_path: Path,
    engine: str,
    kind: str,
    origin: str,
    word: str,
) -> None:
    put_tree(s3, bucket, f"{kind}/a/", ADAPTER)
    put_tree(s3, bucket, f"{kind}/a2/", {"neighbour.bin": b"not ours"})  # a sibling prefix must not leak in
    local = str(tmp_path / "assets" / kind)
    asset = AssetSpec(kind=kind, source=f"s3://{bucket}/{kind}/a", local=local, fetch="s3", origin=origin)  # type: ignore[arg-type]
    seen: list[Progress] = []
    result = stage_all(asset_plan(tmp_path, asset), {**s3_env, "NEURONSERVE_S3_ENGINE": engine}, seen.append)
    assert result.model_dir == str(tmp_path / "model")  # the model's own path is unchanged
    assert staged(local) == ADAPTER
    assert not os.path.exists(local + ".partial")
    mine = [p for p in seen if p.what.startswith(word)]
    assert mine, [p.what for p in seen]
    assert mine[-1].done_bytes == mine[-1].total_bytes == sum(len(v) for v in ADAPTER.values())


def test_a_complete_asset_is_checked_with_one_listing_and_not_fetched_again(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    put_tree(s3, bucket, "l/", ADAPTER)
    asset = AssetSpec(
        kind="lora", source=f"s3://{bucket}/l/", local=str(tmp_path / "l"), fetch="s3", name="sql"
    )
    plan = asset_plan(tmp_path, asset)
    stage_all(plan, s3_env)
    gets = s3_server.object_gets(bucket)
    assert set(gets) == {f"l/{rel}" for rel in ADAPTER}
    before = len(s3_server.all_requests(bucket))
    stage_all(plan, s3_env)
    assert s3_server.object_gets(bucket) == gets
    assert len(s3_server.all_requests(bucket)) == before + 1  # one listing: still what S3 holds?


def test_a_chat_template_is_one_object_at_a_file_path(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, engine: str
) -> None:
    env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    template = b"{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    s3.put_object(Bucket=bucket, Key="t/chat.jinja", Body=template)
    s3.put_object(Bucket=bucket, Key="t/chat.jinja.old", Body=b"a neighbour key")
    local = str(tmp_path / "assets" / "chat_template.jinja")
    asset = AssetSpec(
        kind="chat_template",
        source=f"s3://{bucket}/t/chat.jinja",
        local=local,
        fetch="s3",
        is_file=True,
        origin="SM_VLLM_CHAT_TEMPLATE",
    )
    plan = asset_plan(tmp_path, asset)
    stage_all(plan, env)
    assert Path(local).read_bytes() == template
    assert os.path.isfile(local) and not os.path.islink(local)
    assert s3_server.object_gets(bucket) == {"t/chat.jinja": 1}

    before = len(s3_server.all_requests(bucket))
    stage_all(plan, env)  # complete: one HEAD, no GET
    assert s3_server.object_gets(bucket) == {"t/chat.jinja": 1}
    assert [r[0] for r in s3_server.all_requests(bucket)[before:]] == ["HEAD"]

    s3.put_object(Bucket=bucket, Key="t/chat.jinja", Body=b"{{ messages }}")  # rewritten in place
    stage_all(plan, env)
    assert Path(local).read_bytes() == b"{{ messages }}"
    assert sorted(os.listdir(tmp_path / "assets")) == [  # the file, its staged copy and the copy's lock
        "chat_template.jinja",
        "chat_template.jinja.staged",
        "chat_template.jinja.staged.lock",
    ]


def test_a_file_asset_named_by_a_prefix_is_refused(
    s3_env: dict[str, str], tmp_path: Path, bucket: str
) -> None:
    asset = AssetSpec(
        kind="chat_template",
        source=f"s3://{bucket}/t/",
        local=str(tmp_path / "t.jinja"),
        fetch="s3",
        is_file=True,
        origin="SM_VLLM_CHAT_TEMPLATE",
    )
    with pytest.raises(StageError, match=r"names a prefix.*full key.*SM_VLLM_CHAT_TEMPLATE"):
        stage_all(asset_plan(tmp_path, asset), s3_env)


def test_an_archive_asset_on_s3_and_on_local_disk_is_extracted(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path, engine: str
) -> None:
    env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    blob = tar_bytes(ADAPTER)
    s3.put_object(Bucket=bucket, Key="pkg/adapter.tar.gz", Body=blob)
    from_s3 = str(tmp_path / "from-s3")
    (tmp_path / "adapter.tar.gz").write_bytes(blob)
    from_disk = str(tmp_path / "from-disk")
    plan = asset_plan(
        tmp_path,
        AssetSpec(
            kind="lora", source=f"s3://{bucket}/pkg/adapter.tar.gz", local=from_s3, fetch="archive", name="a"
        ),
        AssetSpec(kind="draft", source=str(tmp_path / "adapter.tar.gz"), local=from_disk, fetch="archive"),
    )
    stage_all(plan, env)
    assert staged(from_s3) == ADAPTER
    assert staged(from_disk) == ADAPTER
    assert not os.path.exists(from_s3 + ".download")


def test_an_unsafe_archive_asset_is_refused_and_leaves_nothing(
    s3_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "evil.tar.gz").write_bytes(tar_bytes({"ok.txt": b"x", "../escape.txt": b"y"}))
    local = str(tmp_path / "lora")
    asset = AssetSpec(
        kind="lora",
        source=str(tmp_path / "evil.tar.gz"),
        local=local,
        fetch="archive",
        origin="SM_VLLM_LORA_MODULES",
    )
    with pytest.raises(StageError, match=r"\.\..*SM_VLLM_LORA_MODULES"):
        stage_all(asset_plan(tmp_path, asset), s3_env)
    assert not os.path.exists(local)
    assert not (tmp_path / "escape.txt").exists()


def test_a_killed_asset_copy_resumes_without_refetching(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, engine: str
) -> None:
    files = {**ADAPTER, "zz-slow.bin": os.urandom(200_000)}
    put_tree(s3, bucket, "ad/", files)
    release = threading.Event()
    s3_server.hold[f"/{bucket}/ad/zz-slow.bin"] = release
    local = str(tmp_path / "lora")
    doc = {"kind": "lora", "source": f"s3://{bucket}/ad/", "local": local, "fetch": "s3", "name": "sql"}
    journal = Path(local + ".partial") / JOURNAL_NAME
    finished = lambda: journal.exists() and len(journal.read_text().splitlines()) == len(files) - 1  # noqa: E731
    try:
        kill_when(
            ["tests.s3.assetplans", str(tmp_path), json.dumps(doc)],
            {**s3_env, "NEURONSERVE_S3_ENGINE": engine, "NEURONSERVE_S3_CONCURRENCY": "2"},
            finished,
            30,
        )
    finally:
        release.set()
        del s3_server.hold[f"/{bucket}/ad/zz-slow.bin"]
    assert not os.path.exists(local)  # nothing visible at the path the engine reads
    before = s3_server.object_gets(bucket)
    stage_all(asset_plan(tmp_path, AssetSpec(**doc)), {**s3_env, "NEURONSERVE_S3_ENGINE": engine})  # type: ignore[arg-type]
    after = s3_server.object_gets(bucket)
    assert fetched_again(before, after) == {"ad/zz-slow.bin": 1}
    assert staged(local) == files


def test_traversal_keys_under_an_asset_prefix_are_refused(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    put_tree(s3, bucket, "bad/", {"ok.json": b"{}", "sub/../../../escape": b"x"})
    local = str(tmp_path / "deep" / "lora")
    asset = AssetSpec(
        kind="lora", source=f"s3://{bucket}/bad/", local=local, fetch="s3", origin="SM_VLLM_LORA_MODULES"
    )
    with pytest.raises(StageError, match=r"refusing S3 key.*SM_VLLM_LORA_MODULES"):
        stage_all(asset_plan(tmp_path, asset), {**s3_env, "NEURONSERVE_S3_ENGINE": "python"})
    assert not os.path.exists(local)
    assert not (tmp_path / "escape").exists()


def test_s3_errors_name_the_uri_the_fix_and_the_setting(
    s3_env: dict[str, str], tmp_path: Path, bucket: str
) -> None:
    asset = AssetSpec(
        kind="lora",
        source=f"s3://{bucket}/nothing-here/",
        local=str(tmp_path / "l"),
        fetch="s3",
        origin="OPTION_X",
    )
    with pytest.raises(StageError) as err:
        stage_all(asset_plan(tmp_path, asset), s3_env)
    assert f"s3://{bucket}/nothing-here/" in str(err.value)
    assert "aws s3 ls" in str(err.value)
    assert "named by OPTION_X" in str(err.value)


def test_the_model_entry_of_plan_assets_keeps_the_models_own_path(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    """plan.assets lists the model first; stage_model copies it, and it is not copied a second time."""
    put_tree(s3, bucket, "m/", {"config.json": b"{}", "w.bin": os.urandom(50_000)})
    put_tree(s3, bucket, "a/", ADAPTER)
    model_dir = str(tmp_path / "model")
    plan = asset_plan(
        tmp_path,
        AssetSpec(
            kind="model", source=f"s3://{bucket}/m/", local=model_dir, fetch="s3", origin="SM_VLLM_MODEL"
        ),
        AssetSpec(kind="lora", source=f"s3://{bucket}/a/", local=str(tmp_path / "a"), fetch="s3", name="a"),
        model=ModelSpec(source="s3", uri=f"s3://{bucket}/m/", local_path=model_dir, origin="SM_VLLM_MODEL"),
    )
    assert stage_all(plan, s3_env).model_dir == model_dir
    assert s3_server.object_gets(bucket) == {
        "m/config.json": 1,
        "m/w.bin": 1,
        **{f"a/{k}": 1 for k in ADAPTER},
    }
