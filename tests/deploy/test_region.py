"""The region the deploy tools use (deploy/region.py): the AWS CLI's order, the profile's region from the
shared config file, and a refusal instead of a silent default."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronserve.deploy.region import require_region, resolve_region
from neuronserve.errors import ConfigError


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config"
    path.write_text("[default]\nregion = ca-central-1\n[profile other]\nregion = sa-east-1\n[profile bare]\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.mark.parametrize(
    ("flag", "environ", "profile", "region"),
    [
        ("ap-south-1", {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"}, None, "ap-south-1"),
        (None, {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"}, None, "eu-west-1"),
        (None, {"AWS_DEFAULT_REGION": "us-west-2"}, "other", "us-west-2"),
        (None, {}, "other", "sa-east-1"),
        (None, {"AWS_PROFILE": "other"}, None, "sa-east-1"),
        (None, {}, None, "ca-central-1"),
        (None, {}, "bare", None),
    ],
)
def test_the_aws_clis_order(
    config: Path, flag: str | None, environ: dict[str, str], profile: str | None, region: str | None
) -> None:
    assert resolve_region(flag, environ, profile) == region


def test_none_is_refused_with_the_ways_to_name_one(config: Path) -> None:
    with pytest.raises(ConfigError, match=r"no AWS region: pass --region REGION, or set AWS_REGION"):
        require_region(None, {}, "bare")


def test_bad_shapes_and_unknown_profiles(config: Path) -> None:
    with pytest.raises(ConfigError, match="'us-east1' is not an AWS region"):
        resolve_region(None, {"AWS_REGION": "us-east1"})
    with pytest.raises(ConfigError, match="profile 'nope'"):
        resolve_region(None, {}, "nope")
    assert resolve_region("us-gov-west-1", {}) == "us-gov-west-1"
