"""stage/transfer.py: the transfer options come from the typed staging options (a bad value is the
ConfigError naming it, never clamped), and the journal a killed run resumes from survives a torn line."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronserve.config.stage import StageOptions
from neuronserve.errors import ConfigError
from neuronserve.stage.paths import JOURNAL_NAME
from neuronserve.stage.progress import MIB
from neuronserve.stage.transfer import Journal, RemoteObject, TransferOptions, options_from, size_of


def test_unset_the_engines_keep_their_own_worker_counts() -> None:
    opts = options_from({})
    assert opts == TransferOptions()
    assert (opts.concurrency, opts.part_size, opts.engine, opts.numworkers) == (16, 16 * MIB, "auto", None)


def test_a_set_concurrency_drives_both_engines() -> None:
    opts = options_from(
        {"NEURONSERVE_S3_CONCURRENCY": "4", "NEURONSERVE_S3_PART_MB": "2", "NEURONSERVE_S3_ENGINE": "python"}
    )
    assert (opts.concurrency, opts.numworkers, opts.part_size, opts.engine) == (4, 4, 2 * MIB, "python")
    assert TransferOptions.from_options(StageOptions(s3_concurrency=128)).numworkers == 128


@pytest.mark.parametrize("value", ["-3", "0", "129", "8.5", "lots"])
def test_a_concurrency_out_of_range_is_refused_not_clamped(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        options_from({"NEURONSERVE_S3_CONCURRENCY": value})
    assert err.value.variables == ("NEURONSERVE_S3_CONCURRENCY",)


def test_the_journal_keeps_finished_files_across_runs_and_skips_a_torn_line(tmp_path: Path) -> None:
    first = Journal(str(tmp_path))
    assert first.load() == {}
    first.record(RemoteObject("p/a.bin", "a.bin", 3, "e1"))
    first.record(RemoteObject("p/d/b.bin", "d/b.bin", 0, "e2"))
    with open(tmp_path / JOURNAL_NAME, "a", encoding="utf-8") as fh:
        fh.write('{"rel": "c.bin", "size": 9')  # the run was killed mid-line
    again = Journal(str(tmp_path))
    assert again.load() == {"a.bin": (3, "e1"), "d/b.bin": (0, "e2")}
    again.record(RemoteObject("p/a.bin", "a.bin", 4, "e3"))  # re-fetched after it changed: the last wins
    assert again.load()["a.bin"] == (4, "e3")


def test_size_of_a_missing_file_is_minus_one(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    assert size_of(str(tmp_path / "f")) == 3
    assert size_of(str(tmp_path / "missing")) == -1
