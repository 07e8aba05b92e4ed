"""A local model directory's facts (host/modelfiles.py) on real files: config.json (parsed, digested,
refused when damaged), safetensors headers (lm_head, parameter count) and the weights digest the compile
cache key is built on. Edge cases from mutation testing among them (docs/TESTING.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.host_files import noise, write_model, write_safetensors

from neuronserve.errors import ConfigError
from neuronserve.host.modelfiles import model_facts, safetensors_params, weights_digest


def test_model_facts(tmp_path: Path) -> None:
    m = model_facts(str(write_model(tmp_path / "m", {"model_type": "llama"}, {"lm_head.weight": "a"})))
    assert m.kind == "dir" and m.config == {"model_type": "llama"} and m.has_lm_head is True
    assert m.config_sha256 is not None and len(m.config_sha256) == 64
    d = model_facts(str(write_model(tmp_path / "d", {"model_type": "llama"}, {"fc.weight": "a"})))
    assert d.has_lm_head is False
    assert model_facts(str(tmp_path / "missing")).kind == "missing"


def test_model_facts_of_a_file_and_of_a_dir_without_config(tmp_path: Path) -> None:
    """A single file (a GGUF, an archive) is kind "file"; a directory without config.json has no config
    and no config digest (not the digest of nothing)."""
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    assert model_facts(str(tmp_path / "model.gguf")).kind == "file"
    (tmp_path / "d").mkdir()
    d = model_facts(str(tmp_path / "d"))
    assert (d.kind, d.config, d.config_sha256) == ("dir", None, None)


def test_an_adapter_directory_is_digested_by_its_adapter_config(tmp_path: Path) -> None:
    """A local LoRA adapter (adapter_config.json, no config.json): its config digest follows the
    adapter's config, so the cache key changes when the adapter at that path is replaced."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "adapter_config.json").write_text('{"r": 8, "target_modules": ["q_proj"]}')
    first = model_facts(str(tmp_path / "a"))
    assert first.config is None and first.config_sha256 is not None
    (tmp_path / "a" / "adapter_config.json").write_text('{"r": 16, "target_modules": ["q_proj"]}')
    assert model_facts(str(tmp_path / "a")).config_sha256 not in (None, first.config_sha256)


def test_a_damaged_config_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    """An empty config.json fails the engine minutes later with a bare JSON traceback: refused at plan time
    with the file's path, the parser's reason and what to do."""
    (tmp_path / "config.json").write_text("")
    with pytest.raises(ConfigError) as err:
        model_facts(str(tmp_path))
    assert str(err.value) == (
        f"{tmp_path / 'config.json'} is not valid JSON (Expecting value: line 1 column 1 (char 0)): "
        "the model directory is damaged or incomplete; copy the model again "
        "(a Hugging Face model's config.json is a JSON object)"
    )
    assert err.value.variables == ("SM_VLLM_MODEL",)


def test_lm_head_in_a_single_safetensors_file(tmp_path: Path) -> None:
    """A model with one model.safetensors (no index): lm_head is looked up in its header, which is followed
    by the tensor bytes as in any real file."""
    with_head = tmp_path / "with"
    with_head.mkdir()
    write_safetensors(with_head / "model.safetensors", {"lm_head.weight": [8, 4], "fc.weight": [4, 4]})
    without = tmp_path / "without"
    without.mkdir()
    write_safetensors(without / "model.safetensors", {"fc.weight": [4, 4]})
    assert model_facts(str(with_head)).has_lm_head is True
    assert model_facts(str(without)).has_lm_head is False


def test_lm_head_unknown_or_absent(tmp_path: Path) -> None:
    """An index without a weight_map has no lm_head; a damaged index or a damaged header is unknown (None);
    no weights at all is unknown."""
    no_map = write_model(tmp_path / "no-map", {})
    (no_map / "model.safetensors.index.json").write_text('{"metadata": {}}')
    broken = write_model(tmp_path / "broken", {})
    (broken / "model.safetensors.index.json").write_text("{")
    cut = write_model(tmp_path / "cut", {})
    (cut / "model.safetensors").write_bytes((500).to_bytes(8, "little") + b'{"lm_head.weight"')
    none = write_model(tmp_path / "none", {})
    got = [model_facts(str(p)).has_lm_head for p in (no_map, broken, cut, none)]
    assert got == [False, None, None, None]


def test_safetensors_params_counts_every_shard_and_no_metadata(tmp_path: Path) -> None:
    """Two shards (and their index, which is no safetensors file): 2 x 32 x 16 + 16 = 1040 parameters, the
    __metadata__ entry not counted. This count sizes the HBM estimate."""
    write_safetensors(
        tmp_path / "model-00001-of-00002.safetensors",
        {"model.embed_tokens.weight": [32, 16], "lm_head.weight": [32, 16]},
    )
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"model.norm.weight": [16]})
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    assert safetensors_params(str(tmp_path)) == 1040
    assert model_facts(str(tmp_path)).checkpoint_params == 1040


def test_safetensors_params_none_without_weights_or_with_a_damaged_header(tmp_path: Path) -> None:
    """No count (not 0) when there is nothing to count or a header cannot be read: the HBM estimate then
    falls back to the config instead of using a wrong number."""
    assert safetensors_params(str(tmp_path)) is None
    (tmp_path / "model.safetensors").write_bytes((100).to_bytes(8, "little") + b"{not json")
    assert safetensors_params(str(tmp_path)) is None


def checkpoint(path: Path) -> Path:
    """A fine-tune's directory: a 1.1 MB shard (more than 16 samples of 64 KiB), a small shard, the index,
    training_args.bin (sorts after the index), and files that are no weights."""
    path.mkdir()
    write_safetensors(path / "model-00001-of-00002.safetensors", {"w": [550_000]})
    write_safetensors(path / "model-00002-of-00002.safetensors", {"b": [100]})
    (path / "model.safetensors.index.json").write_text(
        '{"weight_map": {"w": "model-00001-of-00002.safetensors"}}'
    )
    (path / "training_args.bin").write_bytes(noise(700, "args"))
    (path / "config.json").write_text("{}")
    (path / "tokenizer.json").write_text("{}")
    return path


GOLDEN_DIGEST = "ff02517362037090003cd6b7955d98aca507c28ffdca17abe6b54cdaebaf7d9d"


def test_weights_digest_is_stable_across_releases(tmp_path: Path) -> None:
    """The digest is part of every compiled-artifact cache key (S3): a change in how it is computed (which
    files, which blocks, how many bytes) silently recompiles every model, for hours. This pins its value
    for a fixed checkpoint; files that are no weights (config.json, tokenizer.json) do not change it."""
    path = checkpoint(tmp_path / "m")
    assert weights_digest(str(path)) == GOLDEN_DIGEST
    (path / "tokenizer.json").write_text('{"changed": true}')
    assert weights_digest(str(path)) == GOLDEN_DIGEST
    assert model_facts(str(path)).weights_digest == GOLDEN_DIGEST


def test_weights_digest_none_without_weight_files(tmp_path: Path) -> None:
    """A directory with only config.json has no weights digest (the key then rests on the config)."""
    model = write_model(tmp_path / "m", {"model_type": "llama"})
    assert weights_digest(str(model)) is None and model_facts(str(model)).weights_digest is None
