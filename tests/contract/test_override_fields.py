"""Issue 42 item 3, run against the stack: every override field the plan accepts on lanes 2.27 and 2.28
(plan/lanes/nxdi/fields.py, generated from the lane's NxD Inference source) is read by that NxD
Inference's NeuronConfig class (no "Unexpected keyword arguments", models/config.py:563 at v0.7.14366), and
a misspelt key is not (so the plan's refusal of it is right). tests/contract/fields_child.py asks each
lane's NxD Inference, one child per lane, with the hardware stubbed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.contract import sources
from tests.contract.session import CHILD_ENV

from neuronserve.plan.lanes.nxdi.fields import CONFIG_CLASS
from neuronserve.plan.lanes.nxdi.override_fields import class_fields
from neuronserve.plan.lanes.nxdi.profiles import V0_2, V0_4

if (REASON := sources.missing()) is not None:
    pytest.skip(REASON, allow_module_level=True)

# Read although logged: GptOssNeuronConfig pops it after NeuronConfig.__init__ has logged the keys left
# (models/gpt_oss/modeling_gpt_oss.py:452-457, both lanes); the plan accepts it, as NxD Inference uses it.
READ_AFTER_THE_LOG = {("GptOssNeuronConfig", "sliding_window_attention_dp_degree")}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, list[str]]]]:
    root = tmp_path_factory.mktemp("fields")
    reference = sources.reference_dir()
    assert reference is not None
    unpacked = sources.manifest()
    procs = {}
    for lane in sources.LANES:
        path = [*sources.python_path(lane, reference, unpacked), str(sources.ROOT / "src")]
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEURON", "SM_", "VLLM_"))},
            **CHILD_ENV,
            "PYTHONPATH": os.pathsep.join(path),
        }
        result = root / f"{lane.nxdi}.json"
        cmd = [sys.executable, "-m", "tests.contract.fields_child", lane.nxdi, str(result)]
        procs[lane.nxdi] = (
            subprocess.Popen(cmd, env=env, cwd=root, stderr=subprocess.PIPE, text=True),
            result,
        )
    out = {}
    for source, (proc, result) in procs.items():
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-4000:]
        out[source] = json.loads(Path(result).read_text())
    return out


@pytest.mark.parametrize("rules", [V0_2, V0_4], ids=["2.27", "2.28"])
def test_every_accepted_field_is_read_by_the_lane_s_nxd_inference(
    verdicts: dict[str, dict[str, dict[str, list[str]]]], rules: object
) -> None:
    source = rules.nxdi_source  # type: ignore[attr-defined]
    built = verdicts[source]
    classes = {"NeuronConfig", *CONFIG_CLASS[source].values()}
    for name in sorted(classes):
        assert name in built and not built[name].get("missing"), f"{source}: {name} was not probed"
        got = built[name]
        unread = [k for k in got["unexpected"] if (name, k) not in READ_AFTER_THE_LOG]
        assert not unread, f"{source} {name}: the plan accepts {unread}, NxD Inference does not read them"
        assert not got["undecided"], f"{source} {name}: no value built for {got['undecided']}"
        assert set(got["read"]) | set(got["unexpected"]) == set(class_fields(source, name))
        assert got["misspelt"] == ["unexpected"], f"{source} {name}: a misspelt key was not logged"
