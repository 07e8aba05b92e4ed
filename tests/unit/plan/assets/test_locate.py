"""Where one asset is staged and how it is fetched (plan/assets/locate.py), called directly: each source
kind (archive, s3:// prefix or object, a local path used in place, a hub id) and each refusal, word for
word, naming the variable that gave the source."""

from __future__ import annotations

import pytest
from tests.support.builders import facts, raised

from neuronserve.plan.assets.locate import Staged, assets_dir, locate
from neuronserve.plan.facts import ModelFacts
from neuronserve.types import AssetSpec

HOST = facts(
    paths={
        "/adapters/a": ModelFacts(kind="dir"),
        "/t/chat.jinja": ModelFacts(kind="file"),
        "/t/a.tar.gz": ModelFacts(kind="file"),
        "/t/missing": ModelFacts(kind="missing"),
        "adapters/rel": ModelFacts(kind="dir"),
    }
)
STAGED = "/w/assets/lora/a"


def test_assets_sit_next_to_the_model_under_the_work_dir() -> None:
    assert assets_dir("/w/") == "/w/assets" and assets_dir("/w") == "/w/assets"


@pytest.mark.parametrize(
    ("source", "fetch", "local"),
    [
        ("s3://bkt/a/", "s3", STAGED),
        ("s3://bkt/a.tar.gz", "archive", STAGED),
        ("/t/a.tar.gz", "archive", STAGED),
        ("/adapters/a", "local", "/adapters/a"),
        ("org/adapter", "hub", STAGED),
    ],
)
def test_each_source_of_a_directory_asset(source: str, fetch: str, local: str) -> None:
    spec = locate("lora", source, STAGED, "SM_VLLM_LORA_MODULES", HOST, name="a")
    assert spec == AssetSpec("lora", source, local, fetch, "a", "SM_VLLM_LORA_MODULES", False)  # type: ignore[arg-type]


def test_an_s3_file_lands_under_its_own_name() -> None:
    spec = locate(
        "chat_template", "s3://bkt/t/chat.jinja", "/w/assets/chat_template", "X", HOST, is_file=True
    )
    assert spec is not None and spec.local == "/w/assets/chat_template/chat.jinja" and spec.fetch == "s3"


def test_a_hub_id_is_left_to_the_engine_unless_staged() -> None:
    assert locate("draft", "org/draft", "/w/assets/draft", "X", HOST, hub=False) is None


@pytest.mark.parametrize(
    ("source", "is_file", "message"),
    [
        ("/t/b.tar.gz", False, "V=/t/b.tar.gz: no such archive on this host"),
        ("s3:///a/", False, "V=s3:///a/: no bucket name: give s3://bucket/prefix/"),
        ("s3://bkt/t/", True, "V=s3://bkt/t/: name one s3:// object (the chat_template file)"),
        (
            "/t/chat.jinja",
            False,
            "V=/t/chat.jinja: no such directory on this host (a chat_template is an s3:// URI, a local "
            "directory or a .tar.gz)",
        ),
        (
            "/t/missing",
            True,
            "V=/t/missing: no such file on this host (a chat_template is an s3:// URI, a local file)",
        ),
        (
            "adapters/rel",
            False,
            "V=adapters/rel: give the absolute path (the engine runs in NEURONSERVE_WORK_DIR, where a "
            "relative path names something else)",
        ),
        (
            "./rel",
            False,
            "V=./rel: no such directory on this host (a chat_template is an s3:// URI, a local directory "
            "or a .tar.gz)",
        ),
    ],
)
def test_a_source_that_is_not_there_is_refused_naming_its_variable(
    source: str, is_file: bool, message: str
) -> None:
    err = raised(locate, "chat_template", source, "/w/assets/chat_template", "V", HOST, is_file=is_file)
    assert str(err) == message and err.variables == ("V",)


def test_staged_starts_empty_and_each_plan_gets_its_own() -> None:
    first, second = Staged(), Staged()
    first.flags.append("--x")
    assert second.flags == [] and second.assets == [] and second.files == {}
