"""LMI's serving.properties (host/properties.py): key=value lines, comments, and the refusals that name
the file and the line. Edge cases from mutation testing among them (docs/TESTING.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronserve.config.origin import Setting
from neuronserve.errors import ConfigError
from neuronserve.host.properties import holds_model, merge, read_serving_properties, served_model_dir


def test_serving_properties_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    """A Latin-1 serving.properties: refused with its path and the decoder's reason, no variable to set."""
    (tmp_path / "serving.properties").write_bytes(b"option.model_id=caf\xe9\n")
    with pytest.raises(ConfigError) as err:
        read_serving_properties(str(tmp_path))
    assert str(err.value) == (
        f"{tmp_path / 'serving.properties'} is not UTF-8 text ('utf-8' codec can't decode byte 0xe9 in "
        "position 19: invalid continuation byte): write it as key=value lines"
    )
    assert err.value.variables == ()


def test_serving_properties_comments_and_values_with_equals(tmp_path: Path) -> None:
    """Java properties comments start with # or !; a value may itself contain "=" (only the first one
    splits)."""
    (tmp_path / "serving.properties").write_text(
        "! a comment\n# another\n\noption.entryPoint=djl_python.huggingface\noption.extra=a=b\n"
    )
    assert read_serving_properties(str(tmp_path)) == {
        "option.entryPoint": "djl_python.huggingface",
        "option.extra": "a=b",
    }


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("option.rolling_batch", "'option.rolling_batch'"),
        ("= 4", "'= 4'"),
        ("x" * 100, repr("x" * 80)),
    ],
)
def test_a_line_that_is_not_key_value_is_refused_with_its_number(
    tmp_path: Path, line: str, shown: str
) -> None:
    """A line with no "=" or no key: refused with its 1-based line number and the line (first 80
    characters), since skipping it would drop a setting the user believes is applied."""
    (tmp_path / "serving.properties").write_text(f"# header\n{line}\n")
    with pytest.raises(ConfigError) as err:
        read_serving_properties(str(tmp_path))
    assert str(err.value) == (
        f"{tmp_path / 'serving.properties'} line 2: {shown} is not key=value "
        "(e.g. option.tensor_parallel_degree=2)"
    )
    assert err.value.variables == ()


def test_a_directory_with_only_serving_properties_holds_no_model(tmp_path: Path) -> None:
    assert not holds_model(str(tmp_path)) and not holds_model(str(tmp_path / "missing"))
    (tmp_path / "serving.properties").write_text("option.model_id=org/m\n")
    assert not holds_model(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert holds_model(str(tmp_path))


def test_the_served_model_directory_in_choose_models_order(tmp_path: Path) -> None:
    local = tmp_path / "m"
    local.mkdir()
    sm = tmp_path / "sm"
    sm.mkdir()
    assert served_model_dir([Setting(str(local), "SM_VLLM_MODEL")], str(sm)) == str(local)
    assert served_model_dir([Setting(str(local), "SM_VLLM_Model")], str(sm)) == str(local)  # any case
    assert served_model_dir([Setting("org/m", "SM_VLLM_MODEL")], str(sm)) is None  # a hub id
    assert served_model_dir([Setting("s3://b/m/", "SM_VLLM_MODEL")], str(sm)) is None
    assert served_model_dir([Setting(str(local), "HF_MODEL_ID")], str(sm)) == str(local)  # sm holds nothing
    (sm / "config.json").write_text("{}")
    assert served_model_dir([Setting(str(local), "HF_MODEL_ID")], str(sm)) is None  # SM_MODEL_DIR is served
    assert served_model_dir([Setting(str(sm), "SM_VLLM_MODEL")], str(sm)) is None  # the same directory
    assert served_model_dir([], str(sm)) is None


def test_merge_keeps_both_and_names_each_override() -> None:
    values, files, warnings = merge({"a": "1", "b": "2"}, {"b": "3", "c": "4"}, "/m", "/sm")
    assert values == {"a": "1", "b": "3", "c": "4"}
    assert files == {"b": "/m/serving.properties", "c": "/m/serving.properties"}
    assert warnings == [
        "/m/serving.properties b=3 overrides /sm/serving.properties b=2 "
        "(the file beside the served model wins)"
    ]
    assert merge({"b": "3"}, {"b": " 3"}, "/m", "/sm")[2] == []
