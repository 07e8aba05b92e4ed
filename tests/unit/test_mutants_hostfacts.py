"""host/facts.py cases that mutation testing showed unchecked (issue #16, docs/TESTING.md), on real files
in a temporary directory: core lists and their refusals, NEURON_RT_NUM_CORES / NEURON_LOGICAL_NC_CONFIG,
Neuron devices counted through a `neuron-ls` script on PATH, the vLLM launch module found in an installed
package tree, `*.dist-info` versions, safetensors headers (lm_head, parameter count), the weights digest
the cache key is built on, config.json and serving.properties refusals, and which model paths are read.

The only stand-ins are for what a test host cannot have: /dev/neuron* device nodes (glob answers for that
one pattern) and, where named, an installed vLLM (a package tree on sys.path)."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import pytest
from tests.unit.test_plan_hostfacts import write_model

from neuronserve.errors import ConfigError
from neuronserve.host import facts as hostfacts
from neuronserve.host.facts import (
    gather,
    installed_versions,
    model_facts,
    read_serving_properties,
    safetensors_params,
    weights_digest,
)
from neuronserve.plan.facts import API_SERVER_MODULE, parse_core_list

LAUNCHER_MODULE = "vllm.entrypoints.launchers.api_server.entry"


def noise(n: int, seed: str = "") -> bytes:
    """n deterministic bytes that differ at every offset (so every sampled block counts)."""
    blocks = (hashlib.sha256(f"{seed}{i}".encode()).digest() for i in range(n // 32 + 1))
    return b"".join(blocks)[:n]


def write_safetensors(path: Path, tensors: dict[str, list[int]], data: bytes = b"") -> Path:
    """A safetensors file as the format has it: 8-byte little-endian header length, JSON header (with
    __metadata__), then the tensor bytes (BF16: two per element, or `data` when given)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors.items():
        size = 2
        for n in shape:
            size *= n
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + (data or noise(offset, path.name)))
    return path


# ---- parse_core_list ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["a-b", "0,0", "0,3-1", "1_0", "\u0663", "0-1_1"])
def test_core_list_refusal_names_the_variable_exactly(spec: str) -> None:
    """Both refusal paths (not a number; repeated core) name NEURON_RT_VISIBLE_CORES in the message and as
    the variable to fix. "0,3-1" used to be read as [0] (the reversed range silently dropped): one core
    planned while the runtime got a list it cannot use. "1_0" and "\u0663" were read by int() as 10 and 3,
    core ids the runtime (which gets the text) does not read."""
    with pytest.raises(ConfigError) as err:
        parse_core_list(spec)
    assert str(err.value) == f"NEURON_RT_VISIBLE_CORES={spec!r} is not a core list like 0-3 or 0,1"
    assert err.value.variables == ("NEURON_RT_VISIBLE_CORES",)


def test_core_list_accepts_spaces_and_one_core_ranges() -> None:
    """ " 4-5 , 7-7" is what a shell-quoted value looks like: cores 4, 5 and 7."""
    assert parse_core_list(" 4-5 , 7-7") == [4, 5, 7]


# ---- gather: cores ---------------------------------------------------------------------------------------


def devices(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """This host has `count` /dev/neuron* device nodes (only that glob pattern answers differently)."""
    real = glob.glob

    def fake(pattern: str, *args: object, **kwargs: object) -> list[str]:
        if pattern == "/dev/neuron[0-9]*":
            return [f"/dev/neuron{i}" for i in range(count)]
        return real(pattern)

    monkeypatch.setattr(glob, "glob", fake)


def neuron_ls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, json_out: str | None, code: int = 0) -> None:
    """A `neuron-ls` on PATH (the only thing on it): with --json-output it prints `json_out` and exits with
    `code`; without it, the human table (as the real tool does). None: no neuron-ls at all."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if json_out is not None:
        exe = bin_dir / "neuron-ls"
        exe.write_text(
            "#!/bin/sh\n"
            f"if [ \"$1\" = \"--json-output\" ]; then printf '%s\\n' '{json_out}'; exit {code}; fi\n"
            "echo '+--------+--------+ NEURON DEVICE TABLE'\n"
        )
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


def facts(tmp_path: Path, env: dict[str, str] | None = None) -> hostfacts.HostFacts:
    return gather({"SM_MODEL_DIR": str(tmp_path / "no-model"), **(env or {})})


@pytest.mark.parametrize(("lnc", "visible"), [(None, 8), ("2", 4)])
def test_neuron_ls_counts_the_cores(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lnc: str | None, visible: int
) -> None:
    """Two devices and neuron-ls saying 4 NeuronCores each: 8 physical cores, 8 visible (4 with
    NEURON_LOGICAL_NC_CONFIG=2, which pairs them), and the source says neuron-ls."""
    devices(monkeypatch, 2)
    neuron_ls(monkeypatch, tmp_path, '[{"nc_count": 4}, {"nc_count": 4}]')
    f = facts(tmp_path, {"NEURON_LOGICAL_NC_CONFIG": lnc} if lnc else {})
    assert (f.neuron_devices, f.physical_cores, f.visible_cores, f.cores_source) == (
        2,
        8,
        visible,
        "neuron-ls",
    )
    assert (
        type(f.visible_cores) is int
    )  # a count: the plan takes range() of it and prints it ("4", not "4.0")
    assert f.logical_nc_config == (int(lnc) if lnc else None)


def test_a_device_without_nc_count_adds_no_cores(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """neuron-ls output where one device has no nc_count: the others' cores are still counted."""
    devices(monkeypatch, 2)
    neuron_ls(monkeypatch, tmp_path, '[{"nc_count": 2}, {"bdf": "00:1e.0"}]')
    assert facts(tmp_path).physical_cores == 2


@pytest.mark.parametrize(
    ("json_out", "code"),
    [
        (None, 0),  # no neuron-ls installed
        ('[{"nc_count": 4}, {"nc_count": 4}]', 1),  # neuron-ls failed: what it printed is not trusted
        ("[]", 0),  # it saw no devices
    ],
)
def test_without_a_neuron_ls_answer_each_device_counts_two_cores(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, json_out: str | None, code: int
) -> None:
    """3 devices and no usable neuron-ls: 3 x 2 cores (inf2/trn1), said so in the source; halved by
    NEURON_LOGICAL_NC_CONFIG=2; no physical count is claimed."""
    devices(monkeypatch, 3)
    neuron_ls(monkeypatch, tmp_path, json_out, code)
    f = facts(tmp_path)
    assert (f.physical_cores, f.visible_cores, f.cores_source) == (None, 6, "3 devices x 2 cores")
    assert facts(tmp_path, {"NEURON_LOGICAL_NC_CONFIG": "2"}).visible_cores == 3


def test_neuron_ls_off_path_is_found_where_the_neuron_tools_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No neuron-ls on PATH (as in many containers) but one at its install path: its answer counts.
    The install path is pointed at a script in tmp_path (the real one is /opt/aws/neuron/bin)."""
    devices(monkeypatch, 2)
    neuron_ls(monkeypatch, tmp_path, '[{"nc_count": 4}, {"nc_count": 4}]')
    installed = tmp_path / "opt-bin" / "neuron-ls"
    installed.parent.mkdir()
    (tmp_path / "bin" / "neuron-ls").rename(installed)
    monkeypatch.setattr(hostfacts, "NEURON_LS_FALLBACK", str(installed))
    assert facts(tmp_path).cores_source == "neuron-ls"
    assert facts(tmp_path).physical_cores == 8
    monkeypatch.setattr(hostfacts, "NEURON_LS_FALLBACK", str(tmp_path / "nowhere" / "neuron-ls"))
    assert facts(tmp_path).cores_source == "2 devices x 2 cores"


def test_a_hung_neuron_ls_is_given_up_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A neuron-ls that never answers (a wedged driver) must not hang the plan: after its timeout the
    devices are counted instead. The timeout is shortened to keep the test quick."""
    devices(monkeypatch, 2)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "neuron-ls"
    exe.write_text("#!/bin/sh\nexec sleep 30\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(hostfacts, "NEURON_LS_TIMEOUT_S", 0.5)
    t0 = time.monotonic()
    assert facts(tmp_path).cores_source == "2 devices x 2 cores"
    assert time.monotonic() - t0 < 15, "waited for the hung neuron-ls (it sleeps 30 s)"


def test_no_devices_and_no_variables_means_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A CPU host: no cores, no physical count, source "unknown" (the plan's messages print it)."""
    devices(monkeypatch, 0)
    f = facts(tmp_path)
    assert (f.neuron_devices, f.visible_cores, f.physical_cores, f.cores_source) == (0, None, None, "unknown")
    assert f.logical_nc_config is None


@pytest.mark.parametrize(
    ("raw", "want"), [("1", 1), ("2", 2), (" 2 ", 2), ("0", None), ("x", None), ("²", None)]
)
def test_logical_nc_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, raw: str, want: int | None
) -> None:
    """NEURON_LOGICAL_NC_CONFIG is read when it is a positive whole number, ignored otherwise. "²" passes
    str.isdigit() but not int(): it used to crash gather with a bare ValueError."""
    devices(monkeypatch, 0)
    assert facts(tmp_path, {"NEURON_LOGICAL_NC_CONFIG": raw}).logical_nc_config == want


def test_num_cores_of_one_is_accepted(tmp_path: Path) -> None:
    """NEURON_RT_NUM_CORES=1 is the smallest valid count."""
    f = facts(tmp_path, {"NEURON_RT_NUM_CORES": "1"})
    assert (f.visible_cores, f.cores_source) == (1, "NEURON_RT_NUM_CORES")


@pytest.mark.parametrize("count", ["0", "-2", "²"])
def test_num_cores_refusal(tmp_path: Path, count: str) -> None:
    """The refusal quotes the value and names NEURON_RT_NUM_CORES. "²" used to crash with a ValueError."""
    with pytest.raises(ConfigError) as err:
        facts(tmp_path, {"NEURON_RT_NUM_CORES": count})
    assert str(err.value) == f"NEURON_RT_NUM_CORES={count!r} is not a positive integer"
    assert err.value.variables == ("NEURON_RT_NUM_CORES",)


# ---- gather: the rest ------------------------------------------------------------------------------------


def test_sagemaker_model_dir_defaults_to_opt_ml_model(tmp_path: Path) -> None:
    """SM_MODEL_DIR unset or blank: SageMaker's /opt/ml/model."""
    for env in ({}, {"SM_MODEL_DIR": "  "}):
        assert gather(env).sagemaker_model_dir == "/opt/ml/model"


def test_model_paths_read_are_the_local_ones(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Read: a path with a separator (a hub id "org/name" too: it is reported missing) and a bare name that
    exists here. Not read: s3:// URIs, empty entries, a bare hub name like "gpt2" that is no local path, and
    an empty or missing SM_MODEL_DIR."""
    monkeypatch.chdir(tmp_path)
    write_model(tmp_path / "local", {"model_type": "llama"})
    (tmp_path / "empty").mkdir()
    f = gather(
        {"SM_MODEL_DIR": str(tmp_path / "empty")},
        ["s3://bucket/model", "", "gpt2", "org/name", "local"],
    )
    assert sorted(f.paths) == ["local", "org/name"]
    assert f.paths["org/name"].kind == "missing" and f.paths["local"].config == {"model_type": "llama"}
    assert f.sagemaker_model_dir_nonempty is False


def test_a_nonempty_sagemaker_dir_is_read(tmp_path: Path) -> None:
    """A model in SM_MODEL_DIR (SageMaker's model data) is read like any local model."""
    model = write_model(tmp_path / "opt-ml-model", {"model_type": "qwen2"})
    f = gather({"SM_MODEL_DIR": str(model)})
    assert f.sagemaker_model_dir_nonempty is True and f.paths[str(model)].config == {"model_type": "qwen2"}


def test_python_and_cpus_are_this_process(tmp_path: Path) -> None:
    """The engine is started with this Python, and CPU replicas are bound to the CPUs this process may
    use (its own affinity, not another process's): checked by narrowing the affinity to one CPU."""
    assert facts(tmp_path).python == sys.executable
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs two CPUs to narrow the affinity")
    os.sched_setaffinity(0, {max(before)})
    try:
        f = facts(tmp_path)
    finally:
        os.sched_setaffinity(0, before)
    assert f.cpus == (max(before),)


def test_python_falls_back_to_python3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An embedded interpreter has no sys.executable: the plan runs `python3`."""
    monkeypatch.setattr(sys, "executable", "")
    assert facts(tmp_path).python == "python3"


# ---- the vLLM launch module ------------------------------------------------------------------------------


def fake_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *files: str) -> None:
    """An installed vLLM package tree with these files (the module is never imported, only found)."""
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for rel in files:
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text("")
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


@pytest.mark.parametrize(
    ("files", "module"),
    [
        (["entrypoints/openai/api_server.py"], API_SERVER_MODULE),
        (
            ["entrypoints/openai/api_server.py", "entrypoints/launchers/api_server/entry.py"],
            API_SERVER_MODULE,
        ),
        # a vLLM whose openai package no longer has api_server.py but has the launcher
        (["entrypoints/openai/protocol.py", "entrypoints/launchers/api_server/entry.py"], LAUNCHER_MODULE),
        (["entrypoints/__init__.py"], API_SERVER_MODULE),  # neither: the documented default
        # a launcher package without entry.py is not the launcher
        (["entrypoints/launchers/api_server/__init__.py"], API_SERVER_MODULE),
    ],
)
def test_vllm_module_follows_the_installed_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: list[str], module: str
) -> None:
    """The engine is launched as the module the installed vLLM has: the OpenAI server when it exists,
    else the launcher entry point; found from the files, without importing vLLM."""
    fake_vllm(monkeypatch, tmp_path, *files)
    assert facts(tmp_path).vllm_module == module


def test_vllm_module_without_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No vLLM installed (sys.modules["vllm"] = None is how Python marks a module as absent): the plan
    still names the OpenAI server module instead of crashing."""
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert facts(tmp_path).vllm_module == API_SERVER_MODULE


# ---- installed versions ----------------------------------------------------------------------------------


def test_installed_versions_search_order_and_spellings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """sys.path is searched in order (the first hit wins, as for imports), a missing entry is skipped, ""
    is the current directory, names compare as PEP 503 normalises them (case, "-", "_", "."), and only
    *.dist-info directories count (an old *.egg-info does not)."""
    first, second, cwd = tmp_path / "first", tmp_path / "second", tmp_path / "cwd"
    for d in (first, second, cwd):
        d.mkdir()
    (first / "vllm-0.11.0.egg-info").mkdir()
    (second / "vllm-0.12.0.dist-info").mkdir()
    (second / "VLLM_Neuron-0.2.2+lts.dist-info").mkdir()
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "vllm-0.1.0.dist-info").mkdir()
    (cwd / "Neuronx.Distributed_Inference-0.6.0.dist-info").mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(
        sys, "path", [str(tmp_path / "missing"), str(first), str(second), "", str(tmp_path / "later")]
    )
    assert installed_versions() == {
        "vllm": "0.12.0",
        "vllm-neuron": "0.2.2+lts",
        "neuronx-distributed-inference": "0.6.0",
        "neuronx-cc": None,
    }


# ---- safetensors headers ---------------------------------------------------------------------------------


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


# ---- weights digest (the cache key) ----------------------------------------------------------------------


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


# ---- model_facts, config.json, serving.properties ---------------------------------------------------------


def test_model_facts_of_a_file_and_of_a_dir_without_config(tmp_path: Path) -> None:
    """A single file (a GGUF, an archive) is kind "file"; a directory without config.json has no config
    and no config digest (not the digest of nothing)."""
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    assert model_facts(str(tmp_path / "model.gguf")).kind == "file"
    (tmp_path / "d").mkdir()
    d = model_facts(str(tmp_path / "d"))
    assert (d.kind, d.config, d.config_sha256) == ("dir", None, None)


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
