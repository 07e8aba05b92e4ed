"""One lane's stack, run on the plans of that lane: `python -m tests.contract.child REQUEST.json RESULT.json`.

Runs in its own interpreter because two vLLM versions cannot share one (tests/contract/conftest.py starts
one child per lane with the lane's vLLM, the plugin and NxD Inference first on PYTHONPATH). It imports
once, then for each configuration does what the engine process does with the plan's argv and
environment, up to the compile:

1. vLLM's own server parser, `validate_parsed_serve_args` and `validate_api_server_args`, then
   `EngineArgs.from_cli_args(...).create_engine_config()`, with the plugin's NeuronPlatform as the
   current platform (so `NeuronPlatform.check_and_update_config` runs inside VllmConfig, as in the image);
2. the plugin's model runner, `NeuronxDistributedModelRunner(vllm_config).load_model()`: the LoRA serving
   config, `get_neuron_model`, NxD Inference's NeuronConfig / InferenceConfig / model `__init__` checks,
   until NxD Inference hands the model to the (stubbed) tracer, tests/contract/stubs.py CompileReached;
   a quantized model stops one step earlier, where NxD Inference loads the full-precision weights to
   quantize them (application_base.py save_quantized_state_dict): the test models have no weights;
3. the KV cache manager NxD Inference would build (modules/kvcache/*), by the model class's own
   setup and `init_inference_optimization` (its layers are not built: they hold only weights), on the
   meta device, and NxD Inference's own serialisation of the built configuration (`to_json_string`).

Writes, per configuration, what vLLM decided, the built configuration with local paths removed, the KV
cache shapes, or the exception and the innermost line of the stack it came from.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from tests.contract import stubs

# Keys whose values are local paths (where the test staged things): left out of the compared configuration.
PATH_KEYS = frozenset(
    {
        "_name_or_path",
        "quantized_checkpoints_path",
        "draft_model_path",
        "lora_ckpt_json",
        "lora_ckpt_paths",
        "lora_ckpt_paths_cpu",
        "model_path",
    }
)
# Where a source file sits is said relative to these (the reference tree, the vLLM wheel).
ROOT_MARKERS = ("vllm_neuron/", "neuronx_distributed_inference/", "vllm/")


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    request = json.loads(Path(request_path).read_text())
    started = time.monotonic()
    stubs.install()
    stack = Stack()
    results = {"import_seconds": round(time.monotonic() - started, 2), "cases": {}}
    for case in request["cases"]:
        results["cases"][case["id"]] = stack.run(case)
    results["seconds"] = round(time.monotonic() - started, 2)
    Path(result_path).write_text(json.dumps(results, indent=1, sort_keys=True, default=str))
    return 0


class Stack:
    """The lane's vLLM, plugin and NxD Inference, imported once."""

    def __init__(self) -> None:
        import vllm.platforms
        from vllm_neuron.platform import NeuronPlatform

        # The image's vLLM resolves the plugin's platform (vllm_neuron/__init__.py register, when
        # /dev/neuron* exists): set it before any vLLM module binds `current_platform`.
        platform = object.__new__(NeuronPlatform)
        vllm.platforms._current_platform = platform
        platform.__init__()

        import torch
        import vllm.config.cache
        from vllm.engine.arg_utils import EngineArgs
        from vllm.entrypoints.openai import api_server, cli_args
        from vllm_neuron.worker import neuronx_distributed_model_runner as runner

        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # vLLM 0.11.0 keeps it in vllm.utils
            from vllm.utils import FlexibleArgumentParser
        self.torch = torch
        # vLLM sizes its CPU swap space against the host's memory (config/cache.py): the instance's, not
        # this test machine's.
        vllm.config.cache.get_cpu_memory = lambda: stubs.DEVICE["host_memory"]
        self.engine_args = EngineArgs
        self.cli_args = cli_args
        self.api_server = api_server
        self.parser_cls = FlexibleArgumentParser
        self.runner_cls = runner.NeuronxDistributedModelRunner

    def run(self, case: dict[str, Any]) -> dict[str, Any]:
        saved = dict(os.environ)
        out: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="contract-artifacts-") as artifacts:
            os.environ.update(case["env"])
            os.environ["NEURON_COMPILED_ARTIFACTS"] = artifacts  # empty: nothing to load, so it compiles
            stubs.DEVICE.update(target=case["target"], tp=case["tp"], host_memory=case["host_memory"])
            try:
                out = self._run(case, out)
            except Exception as err:  # the stack refused: what and where
                out["outcome"] = "raised"
                out["error"] = describe(err)
            finally:
                os.environ.clear()
                os.environ.update(saved)
        return out

    def _run(self, case: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
        parser = self.cli_args.make_arg_parser(self.parser_cls())
        args = parser.parse_args(case["argv"])
        self.cli_args.validate_parsed_serve_args(args)
        self.api_server.validate_api_server_args(args)
        config = self.engine_args.from_cli_args(args).create_engine_config()
        out["vllm"] = vllm_decisions(config)
        runner = self.runner_cls(config, self.torch.device("cpu"))
        try:
            runner.load_model()
        except stubs.CompileReached as reached:
            app, out["stopped_at"] = reached.app, "compile"
        except Exception as err:
            app = quantize_stop(err)
            if app is None:
                raise
            out["stopped_at"] = "quantize (reads the full-precision weights)"
        else:
            raise AssertionError("load_model returned without compiling: nothing was stubbed at the compile")
        out["outcome"] = "built"
        out["serialized"] = strip_paths(json.loads(app.config.to_json_string()))
        out["kv"] = kv_caches(app, self.torch)
        return out


def vllm_decisions(config: Any) -> dict[str, Any]:
    """What vLLM (with the plugin's platform hook) decided, for the numbers the plan states."""
    sched, cache, model, par = (
        config.scheduler_config,
        config.cache_config,
        config.model_config,
        config.parallel_config,
    )
    lora = config.lora_config
    spec = config.speculative_config
    return {
        "tensor_parallel_size": par.tensor_parallel_size,
        "max_model_len": model.max_model_len,
        "max_num_seqs": sched.max_num_seqs,
        "max_num_batched_tokens": sched.max_num_batched_tokens,
        "chunked_prefill_enabled": bool(getattr(sched, "chunked_prefill_enabled", False)),
        "enable_prefix_caching": cache.enable_prefix_caching,
        "block_size": cache.block_size,
        "num_gpu_blocks_override": cache.num_gpu_blocks_override,
        "dtype": str(model.dtype).removeprefix("torch."),
        "lora": None if lora is None else {"max_loras": lora.max_loras, "max_lora_rank": lora.max_lora_rank},
        "num_speculative_tokens": None if spec is None else spec.num_speculative_tokens,
    }


def quantize_stop(err: BaseException) -> Any:
    """A quantized model stops where NxD Inference reads the full-precision weights to quantize them
    (the test models have none): the application was built, so return it; None for any other error."""
    frames = traceback.extract_tb(err.__traceback__)
    if not any(f.name == "save_quantized_state_dict" for f in frames):
        return None
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_compile_and_load_model":
            return tb.tb_frame.f_locals["self"].model
        tb = tb.tb_next
    return None


def kv_caches(app: Any, torch: Any) -> dict[str, Any]:
    """The KV cache of the text model (and of the EAGLE draft) as NxD Inference would allocate it."""
    wrapper = next(w for w in app.models if w.tag in ("context_encoding_model", "token_generation_model"))
    model_cls = wrapper.model_cls
    config = wrapper.config
    out: dict[str, Any] = {}
    if model_cls.__name__ == "NeuronFusedSpecModel":
        model_cls = type(app)._model_cls
        draft = config.fused_spec_config.draft_config
        out["draft"] = kv_cache(model_cls, draft, torch)
    out["target"] = kv_cache(model_cls, config, torch)
    return out


def kv_cache(model_cls: type, config: Any, torch: Any) -> dict[str, Any]:
    """The model class's own setup and KV cache manager, without its layers (they hold weights only) and
    without LoRA (wrapped around those layers after the cache is built: model_base.py NeuronBaseModel
    __init__; it does not change the cache)."""

    class ShapeOnly(model_cls):  # type: ignore[misc, valid-type]
        def init_model(self, config: Any) -> None:
            return None

    config = copy.deepcopy(config)
    config.neuron_config.lora_config = None
    with torch.device("meta"):
        model = ShapeOnly(config)
    manager = model.kv_mgr
    tensors = list(manager.past_key_values)
    return {
        "manager": type(manager).__name__,
        "shapes": sorted({str(tuple(t.shape)) for t in tensors}),
        "tensors": len(tensors),
        "bytes_per_core": sum(t.numel() * t.element_size() for t in tensors),
    }


def strip_paths(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_paths(v) for k, v in value.items() if k not in PATH_KEYS}
    if isinstance(value, list):
        return [strip_paths(v) for v in value]
    return value


def describe(err: BaseException) -> dict[str, str]:
    """The exception and the innermost frame in the plugin, NxD Inference or vLLM."""
    where = ""
    for frame in traceback.extract_tb(err.__traceback__):
        for marker in ROOT_MARKERS:
            index = frame.filename.rfind(marker)
            if index >= 0 and "tests/contract" not in frame.filename:
                where = f"{frame.filename[index:]}:{frame.lineno}"
                break
    return {"type": type(err).__name__, "message": str(err)[:2000], "where": where}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
