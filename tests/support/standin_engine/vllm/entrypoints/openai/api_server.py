"""A stand-in engine executable for the compile-once tests: it "compiles" by writing artifacts slowly.

Put `tests/support/standin_engine` first on PYTHONPATH and `neuronserve serve --device neuron` runs this
instead of vLLM (the plan's argv is `python -m vllm.entrypoints.openai.api_server ...`). Like the
vllm-neuron plugin, it loads the artifacts in NEURON_COMPILED_ARTIFACTS when the directory holds a
compiled model and otherwise compiles into it. Each start and its outcome are appended as JSON lines
to $STANDIN_EVENTS, with the time and whether the completion marker was present, so a test can check
the order of events across replicas. With $STANDIN_FAIL_COMPILES=N the first N compiles (counted in
the events) fail as a compiler error does: a graph half written, an error on stdout, exit 70.

Without NEURON_COMPILED_ARTIFACTS it is the rewritten plugin (lanes 2.32, 2.33): it compiles into one
`<hash>/` entry of `$VLLM_CACHE_ROOT/neuron/compile_cache` (compilation_cache.md), and on the native
route (VLLM_NEURON_BACKEND=neuron_native, TORCH_CACHING_PRECOMPILE not 0: lane 2.33) it also reads, or
else writes, a saved trace under `$VLLM_CACHE_ROOT/precompile` (the precompile cache; its real
directory name is not documented, the stand-in's is its own). VLLM_NEURON_DISABLE_WARMUP_COMPILE=1
makes a miss fatal, as the plugin's switch does: an error, exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MARKER = ".neuronserve-manifest.json"
GRAPHS = 5
WRITE_S = float(os.environ.get("STANDIN_WRITE_S", "0.4"))


def event(**fields: object) -> None:
    fields.update(t=time.time(), pid=os.getpid(), cores=os.environ.get("NEURON_RT_VISIBLE_CORES"))
    with open(os.environ["STANDIN_EVENTS"], "a", encoding="utf-8") as f:
        f.write(json.dumps(fields) + "\n")


def failed_so_far() -> int:
    path = Path(os.environ["STANDIN_EVENTS"])
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(1 for line in lines if json.loads(line)["event"] == "compile_failed")


class Handler(BaseHTTPRequestHandler):
    def _json(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": "standin", "object": "model"}]})
        else:
            self._json({})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if b"standin-hold" in body:  # a request that keeps its slot a while (STANDIN_HOLD_S)
            time.sleep(float(os.environ.get("STANDIN_HOLD_S", "3")))
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        try:
            model = json.loads(body).get("model")
        except (ValueError, AttributeError):
            model = None
        text = str(model) if b"standin-echo-model" in body else "x"  # which model (or adapter) was asked
        answer = {"object": "text_completion", "model": model, "choices": [{"index": 0, "text": text}]}
        self._json({**answer, "usage": usage})

    def log_message(self, *args: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--additional-config", default="{}")
    args, _ = parser.parse_known_args()
    legacy = os.environ.get("NEURON_COMPILED_ARTIFACTS")
    root = Path(legacy or os.environ["VLLM_CACHE_ROOT"])
    art = root if legacy else root / "neuron" / "compile_cache" / "standin-graph-hash"
    art.mkdir(parents=True, exist_ok=True)
    native = (
        not legacy
        and os.environ.get("VLLM_NEURON_BACKEND") == "neuron_native"
        and os.environ.get("TORCH_CACHING_PRECOMPILE", "1") != "0"
    )
    trace = root / "precompile" / "trace.bin"
    # What the plugin would read at start: the LoRA adapter list the override names (None when absent).
    ckpt = json.loads(args.additional_config).get("override_neuron_config", {}).get("lora_ckpt_json")
    lora = Path(ckpt).read_text() if ckpt and Path(ckpt).is_file() else None
    event(
        event="start",
        port=args.port,
        marker=(root / MARKER).exists(),
        files=sorted(os.listdir(art)),
        precompile=("warm" if trace.exists() else "cold") if native else None,
        argv=sys.argv[1:],
        lora_ckpt_json=lora,
    )
    if (art / "model.neff").exists():
        event(event="loaded", port=args.port)
    elif os.environ.get("VLLM_NEURON_DISABLE_WARMUP_COMPILE") == "1":
        event(event="miss_fatal", port=args.port)
        print("stand-in plugin: RuntimeError: compile cache miss with warmup compile disabled", flush=True)
        sys.exit(1)
    elif failed_so_far() < int(os.environ.get("STANDIN_FAIL_COMPILES", "0")):
        (art / "graph0.neff").write_bytes(b"half")
        event(event="compile_failed", port=args.port)
        print(f"stand-in compiler: ERROR: graph0 failed to compile (failure {failed_so_far()})", flush=True)
        sys.exit(70)
    else:
        for i in range(GRAPHS):  # slowly, like a compile: a half-written directory for a while
            (art / f"graph{i}.neff").write_bytes(os.urandom(1024))
            time.sleep(WRITE_S)
        (art / "model.neff").write_bytes(b"compiled")
        if native:
            trace.parent.mkdir(parents=True, exist_ok=True)
            trace.write_bytes(b"traced")
        event(event="compiled", port=args.port)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main()
