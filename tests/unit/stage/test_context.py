"""stage/context.py: a staging run's context is read once from the environment, through the rows: the
transfer and archive options, s5cmd's environment and endpoint, the hub child's environment and the
secrets to scrub, and one S3 client made on first use. Nothing secret shows in its repr."""

from __future__ import annotations

import pytest

from neuronserve.errors import ConfigError
from neuronserve.stage.archive import ArchiveLimits
from neuronserve.stage.context import StageContext
from neuronserve.stage.progress import MIB
from neuronserve.types import Progress

ENV = {
    "NEURONSERVE_S3_ENGINE": "python",
    "NEURONSERVE_S3_CONCURRENCY": "8",
    "NEURONSERVE_S3_PART_MB": "4",
    "NEURONSERVE_ARCHIVE_MAX_MEMBERS": "50",
    "HF_ENDPOINT": "http://hub.local:8000",
    "HF_TOKEN": "hf_abcdefghijklmnop",
    "HF_HUB_OFFLINE": "1",
    "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-secret",
    "SM_VLLM_MODEL": "s3://b/m/",
}


def test_the_context_is_the_environment_read_through_the_rows() -> None:
    seen: list[Progress] = []
    ctx = StageContext.from_environ(ENV, seen.append)
    assert (ctx.transfer.engine, ctx.transfer.concurrency, ctx.transfer.part_size) == ("python", 8, 4 * MIB)
    assert ctx.archive == ArchiveLimits(max_members=50, max_bytes=None)
    assert ctx.endpoint == "http://127.0.0.1:9"
    assert ctx.progress == seen.append
    assert set(ctx.s5cmd_env) == {
        "AWS_ENDPOINT_URL_S3",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "PATH",
    }
    assert ctx.hub.endpoint == ctx.hub.url == "http://hub.local:8000"
    assert ctx.hub.env["HF_TOKEN"] == "hf_abcdefghijklmnop"
    assert "HF_HUB_OFFLINE" not in ctx.hub.env  # the download the user asked for is not offline
    assert "AWS_SECRET_ACCESS_KEY" not in ctx.hub.env and "SM_VLLM_MODEL" not in ctx.hub.env
    assert set(ctx.hub.secrets) == {"hf_abcdefghijklmnop", "AKIDEXAMPLE", "wJalrXUtnFEMI-secret"}


def test_the_client_is_made_on_first_use_once_with_the_pool_and_endpoint() -> None:
    ctx = StageContext.from_environ(ENV)
    client = ctx.client()
    assert ctx.client() is client
    assert client.meta.endpoint_url == "http://127.0.0.1:9"
    assert client.meta.config.max_pool_connections == 8 + 4


def test_no_secret_shows_in_the_repr() -> None:
    shown = repr(StageContext.from_environ(ENV))
    for secret in ("hf_abcdefghijklmnop", "AKIDEXAMPLE", "wJalrXUtnFEMI-secret"):
        assert secret not in shown


def test_a_malformed_setting_is_the_config_error_naming_it() -> None:
    with pytest.raises(ConfigError) as err:
        StageContext.from_environ({"NEURONSERVE_S3_PART_MB": "0"})
    assert err.value.variables == ("NEURONSERVE_S3_PART_MB",)


def test_unset_the_context_is_the_defaults() -> None:
    ctx = StageContext.from_environ({})
    assert (ctx.transfer.engine, ctx.transfer.numworkers, ctx.endpoint) == ("auto", None, None)
    assert ctx.hub.url == "https://huggingface.co" and ctx.hub.secrets == ()
