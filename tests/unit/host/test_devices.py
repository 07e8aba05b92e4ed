"""NeuronCores this process may use (host/devices.py), read through gather on a host without devices:
NEURON_RT_VISIBLE_CORES core lists and their refusals, NEURON_RT_NUM_CORES, NEURON_LOGICAL_NC_CONFIG, and
Neuron devices counted through a `neuron-ls` script on PATH (or at its install path, or hung).

The only stand-in is for what a test host cannot have: /dev/neuron* device nodes (glob answers for that
one pattern). Many edge cases here came from mutation testing (docs/TESTING.md)."""

from __future__ import annotations

import glob
import time
from pathlib import Path

import pytest
from tests.support.host_files import gathered

from neuronserve.errors import ConfigError
from neuronserve.host import devices as host_devices
from neuronserve.host.facts import gather
from neuronserve.plan.facts import parse_core_list


@pytest.mark.parametrize(
    ("spec", "cores"),
    [("0-3", [0, 1, 2, 3]), ("0,1", [0, 1]), ("4-5,8", [4, 5, 8]), ("7", [7])],
)
def test_core_list(spec: str, cores: list[int]) -> None:
    assert parse_core_list(spec) == cores


@pytest.mark.parametrize("spec", ["a-b", "3-1", "0,0", "", "-1"])
def test_core_list_refused(spec: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_core_list(spec)
    assert "NEURON_RT_VISIBLE_CORES" in str(err.value)


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


def test_gather_visible_cores_from_env(tmp_path: Path) -> None:
    f = gather({"NEURON_RT_VISIBLE_CORES": "0-5", "SM_MODEL_DIR": str(tmp_path / "none")})
    assert f.visible_cores == 6 and f.cores_source == "NEURON_RT_VISIBLE_CORES"
    assert f.python and f.sagemaker_model_dir_nonempty is False
    assert set(f.versions) == {"vllm", "vllm-neuron", "neuronx-distributed-inference", "neuronx-cc"}


def test_gather_visible_cores_from_count(tmp_path: Path) -> None:
    f = gather({"NEURON_RT_NUM_CORES": "4", "SM_MODEL_DIR": str(tmp_path)})
    assert f.visible_cores == 4 and f.cores_source == "NEURON_RT_NUM_CORES"
    with pytest.raises(ConfigError):
        gather({"NEURON_RT_NUM_CORES": "four"})


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


@pytest.mark.parametrize(("lnc", "visible"), [(None, 8), ("2", 4)])
def test_neuron_ls_counts_the_cores(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lnc: str | None, visible: int
) -> None:
    """Two devices and neuron-ls saying 4 NeuronCores each: 8 physical cores, 8 visible (4 with
    NEURON_LOGICAL_NC_CONFIG=2, which pairs them), and the source says neuron-ls."""
    devices(monkeypatch, 2)
    neuron_ls(monkeypatch, tmp_path, '[{"nc_count": 4}, {"nc_count": 4}]')
    f = gathered(tmp_path, {"NEURON_LOGICAL_NC_CONFIG": lnc} if lnc else {})
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
    assert gathered(tmp_path).physical_cores == 2


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
    f = gathered(tmp_path)
    assert (f.physical_cores, f.visible_cores, f.cores_source) == (None, 6, "3 devices x 2 cores")
    assert gathered(tmp_path, {"NEURON_LOGICAL_NC_CONFIG": "2"}).visible_cores == 3


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
    monkeypatch.setattr(host_devices, "NEURON_LS_FALLBACK", str(installed))
    assert gathered(tmp_path).cores_source == "neuron-ls"
    assert gathered(tmp_path).physical_cores == 8
    monkeypatch.setattr(host_devices, "NEURON_LS_FALLBACK", str(tmp_path / "nowhere" / "neuron-ls"))
    assert gathered(tmp_path).cores_source == "2 devices x 2 cores"


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
    monkeypatch.setattr(host_devices, "NEURON_LS_TIMEOUT_S", 0.5)
    t0 = time.monotonic()
    assert gathered(tmp_path).cores_source == "2 devices x 2 cores"
    assert time.monotonic() - t0 < 15, "waited for the hung neuron-ls (it sleeps 30 s)"


def test_no_devices_and_no_variables_means_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A CPU host: no cores, no physical count, source "unknown" (the plan's messages print it)."""
    devices(monkeypatch, 0)
    f = gathered(tmp_path)
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
    assert gathered(tmp_path, {"NEURON_LOGICAL_NC_CONFIG": raw}).logical_nc_config == want


def test_num_cores_of_one_is_accepted(tmp_path: Path) -> None:
    """NEURON_RT_NUM_CORES=1 is the smallest valid count."""
    f = gathered(tmp_path, {"NEURON_RT_NUM_CORES": "1"})
    assert (f.visible_cores, f.cores_source) == (1, "NEURON_RT_NUM_CORES")


@pytest.mark.parametrize("count", ["0", "-2", "²"])
def test_num_cores_refusal(tmp_path: Path, count: str) -> None:
    """The refusal quotes the value and names NEURON_RT_NUM_CORES. "²" used to crash with a ValueError."""
    with pytest.raises(ConfigError) as err:
        gathered(tmp_path, {"NEURON_RT_NUM_CORES": count})
    assert str(err.value) == f"NEURON_RT_NUM_CORES={count!r} is not a positive integer"
    assert err.value.variables == ("NEURON_RT_NUM_CORES",)
