"""config/stage.py: the staging options are typed at settings time, each through its row, so a bad one
is a ConfigError naming it (exit 2 before the front is up), never clamped and never a StageError later."""

from __future__ import annotations

import pytest

from neuronserve.config.settings import parse_settings
from neuronserve.config.stage import StageOptions, parse_stage
from neuronserve.errors import ConfigError


def test_unset_the_options_are_the_rows_defaults() -> None:
    assert parse_stage({}) == StageOptions() == StageOptions("auto", None, 16, 100_000, None, None)


def test_each_option_is_read_through_its_row() -> None:
    options = parse_stage(
        {
            "NEURONSERVE_S3_ENGINE": " Python ",
            "NEURONSERVE_S3_CONCURRENCY": "128",
            "NEURONSERVE_S3_PART_MB": " 64 ",
            "NEURONSERVE_ARCHIVE_MAX_MEMBERS": "10",
            "NEURONSERVE_ARCHIVE_MAX_BYTES": "4096",
            "HF_ENDPOINT": " http://mirror:8000 ",
        }
    )
    assert options == StageOptions("python", 128, 64, 10, 4096, "http://mirror:8000")


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("NEURONSERVE_S3_CONCURRENCY", "-3", "NEURONSERVE_S3_CONCURRENCY='-3' must not be negative"),
        (
            "NEURONSERVE_S3_CONCURRENCY",
            "0",
            "NEURONSERVE_S3_CONCURRENCY=0 is out of range: use a whole number from 1 to 128",
        ),
        ("NEURONSERVE_S3_CONCURRENCY", "129", "NEURONSERVE_S3_CONCURRENCY=129 is out of range"),
        ("NEURONSERVE_S3_CONCURRENCY", "16.5", "NEURONSERVE_S3_CONCURRENCY='16.5' must be a whole number"),
        (
            "NEURONSERVE_S3_PART_MB",
            "0",
            "NEURONSERVE_S3_PART_MB=0 is out of range: use a whole number from 1 to 5120",
        ),
        ("NEURONSERVE_S3_PART_MB", "sixteen", "NEURONSERVE_S3_PART_MB='sixteen' is not a number"),
        (
            "NEURONSERVE_S3_ENGINE",
            "aws-cli",
            "NEURONSERVE_S3_ENGINE='aws-cli' is not one of: auto, s5cmd, python",
        ),
        (
            "NEURONSERVE_ARCHIVE_MAX_MEMBERS",
            "0",
            "NEURONSERVE_ARCHIVE_MAX_MEMBERS='0' must be a whole number >= 1",
        ),
    ],
)
def test_a_bad_option_is_refused_at_settings_time_naming_it(name: str, value: str, says: str) -> None:
    for parse in (parse_stage, parse_settings):
        with pytest.raises(ConfigError) as err:
            parse({name: value})
        assert says in str(err.value) and err.value.variables == (name,)


def test_the_settings_carry_the_options() -> None:
    settings = parse_settings({"NEURONSERVE_S3_ENGINE": "s5cmd", "NEURONSERVE_S3_PART_MB": "8"})
    assert settings.stage == StageOptions(s3_engine="s5cmd", s3_part_mb=8)
