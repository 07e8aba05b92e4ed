"""The front keeps off the engine's pinned CPUs: parsing, the decision, and real processes' affinity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronserve.affinity import (
    engine_pinned_cpus,
    format_cpus,
    front_cpus,
    parse_cpu_list,
)

SRC = str(Path(__file__).resolve().parents[2] / "src")
ALLOWED = os.sched_getaffinity(0)
two_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs at least 2 CPUs to split")


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0", {0}), ("0-3", {0, 1, 2, 3}), ("0-2,5,7-8", {0, 1, 2, 5, 7, 8}), ("\t1,3\n", {1, 3}), ("x", set())],
)
def test_cpu_lists_parse_and_format_like_the_kernel(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == cpus
    if cpus:
        assert parse_cpu_list(format_cpus(cpus)) == cpus
    assert format_cpus({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"


@pytest.mark.parametrize(
    ("allowed", "pinned", "want"),
    [
        ({0, 1}, {0}, {1}),  # vLLM CPU on 2 cores: compute on 0, the front on 1
        ({0, 1, 2, 3}, {0, 1, 2}, {3}),
        ({0, 1}, set(), None),  # the engine pins nothing (Neuron): leave the front alone
        ({0, 1}, {0, 1}, None),  # nothing left free: pinning would only hurt
        ({2, 3}, {0}, None),  # the engine's CPUs are not ours anyway
    ],
)
def test_front_goes_where_the_engine_left_room(
    allowed: set[int], pinned: set[int], want: set[int] | None
) -> None:
    assert front_cpus(allowed, pinned) == want


ENGINE_LIKE = """
import os, threading, time
os.sched_setaffinity(0, {{{cpu}}})  # this (main) thread: a pinned compute thread
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # created after: inherits the pin
print("ready", flush=True)
time.sleep(60)
"""


@two_cpus
def test_pinned_cpus_are_read_from_the_engine_process_group() -> None:
    cpu = min(ALLOWED)
    # own session and group, as EngineProcess starts vLLM; plus an unpinned sibling in the same group
    child = subprocess.Popen(
        [sys.executable, "-c", ENGINE_LIKE.format(cpu=cpu)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert engine_pinned_cpus(child.pid, ALLOWED) == {cpu}
        assert engine_pinned_cpus(os.getpgrp(), ALLOWED) == set()  # ours: nothing pinned
    finally:
        child.kill()
        child.wait()


FRONT_LIKE = """
import json, os, sys, threading, time
sys.path.insert(0, {src!r})
from neuronserve.affinity import pin_this_process, parse_cpu_list
threading.Thread(target=time.sleep, args=(5,), daemon=True).start()   # a thread made before
n = pin_this_process({{{cpu}}})
later = []
t = threading.Thread(target=lambda: later.append(os.sched_getaffinity(0)))
t.start(); t.join()
allowed = []
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{{tid}}/status") as fh:
        line = next(x for x in fh if x.startswith("Cpus_allowed_list:"))
    allowed.append(sorted(parse_cpu_list(line.split(":", 1)[1])))
print(json.dumps({{"pinned": n, "threads": allowed, "later": sorted(later[0])}}))
"""


@two_cpus
def test_every_thread_of_the_front_is_pinned_and_new_threads_inherit_it() -> None:
    cpu = max(ALLOWED)
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", FRONT_LIKE.format(src=SRC, cpu=cpu)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    )
    assert out["pinned"] >= 2  # the main thread and the thread made before
    assert out["threads"] and all(cpus == [cpu] for cpus in out["threads"])
    assert out["later"] == [cpu]


def test_a_command_name_with_spaces_and_parentheses_does_not_confuse_the_group_scan(
    tmp_path: Path,
) -> None:
    """/proc/<pid>/stat's second field is the command name, which may hold ') 7 '."""
    proc = tmp_path / "proc"
    for pid, comm, pgid, allowed in ((100, "vllm) 7 (x", 77, "0"), (101, "python", 5, "0")):
        (proc / str(pid) / "task" / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) S 1 {pgid} {pgid} 0 -1\n")
        (proc / str(pid) / "task" / str(pid) / "status").write_text(
            f"Name:\tx\nCpus_allowed_list:\t{allowed}\n"
        )
    (proc / "self").mkdir()
    assert engine_pinned_cpus(77, {0, 1}, proc=str(proc)) == {0}
    assert engine_pinned_cpus(7, {0, 1}, proc=str(proc)) == set()
