"""Stand-ins for the Neuron hardware packages, so that the plugin's and NxD Inference's own Python runs on a
machine without a Neuron device (the pattern of the plugin's test/unit/conftest.py, minus its mocks of NxD
Inference itself: here nothing of the plugin or of NxD Inference is replaced).

Stubbed, as whole package trees: torch_neuronx, neuronx_distributed, torch_xla, libneuronxla, neuronxcc and
nki (the device, its compiler and runtime, and the tracing library), plus ABSENT: third-party modules the
imports reach but the test venv lacks, never called on the configuration path (torchvision: image
preprocessing of NxD Inference's mllama and transformers' Llama 4 processor; PyPI's build is CUDA-only and
scripts/bootstrap removes it; diskcache: vLLM 0.13's structured-output cache).

Any attribute of a stub module is a permissive class (usable as a base class, a decorator, a type
subscript or a call) whose instances carry no state, so NxD Inference's `to_dict` serialises them as {}.
A few names carry the behaviour the configuration code reads from the device stack, set per configuration
by the harness (`DEVICE`):
- torch_neuronx.utils.get_platform_target: the instance family the plan targets (inf2, trn1, trn2): NxD
  Inference derives the logical core size (models/config.py get_platform_lnc) and hardware checks from it;
- neuronx_distributed.utils.utils.hardware: the platform enum NxD Inference compares that target with;
- parallel_state: model parallelism initialised at the plan's TP (as it is when the graph is traced), and
  parallel_layers.utils.divide / pad.get_number_of_extra_heads: exact integer arithmetic;
- trace.model_builder.ModelBuilder: the hand-off to tracing and compiling (application_base.get_builder).
  Building it raises CompileReached: everything before it ran for real, nothing after it can.
"""

from __future__ import annotations

import enum
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

HARDWARE = ("torch_neuronx", "neuronx_distributed", "torch_xla", "libneuronxla", "neuronxcc", "nki")
ABSENT = ("torchvision", "diskcache")
DEVICE: dict[str, Any] = {"target": "inf2", "tp": 1}


class _StubMeta(type):
    """A stub class: its unknown attributes are stub classes too; subscripting or `|` gives itself."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return stub_class(name)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        return iter(())

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], type):
            return args[0]  # used as a decorator: the decorated function stays itself
        return super().__call__(*args, **kwargs)


class StubObject(metaclass=_StubMeta):
    """An instance of a stub class: accepts any arguments, holds nothing, answers any attribute."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return stub_class(name)()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return StubObject()

    def __getitem__(self, item: Any) -> Any:
        return StubObject()

    def __iter__(self) -> Any:
        return iter(())


def stub_class(name: str) -> type:
    return _StubMeta(name, (StubObject,), {})


class StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = stub_class(name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves every module under the stubbed top-level names (a package, so submodules resolve too)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".", maxsplit=1)[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


class CompileReached(Exception):
    """NxD Inference handed the application to neuronx_distributed's ModelBuilder: the trace begins."""

    def __init__(self, app: Any) -> None:
        super().__init__("reached the compile (neuronx_distributed ModelBuilder)")
        self.app = app


class ModelBuilder:
    """NxD Inference builds this with `checkpoint_loader=self.checkpoint_loader_fn` (application_base.py
    get_builder): the bound method names the application being compiled."""

    def __init__(self, *args: Any, checkpoint_loader: Any = None, **kwargs: Any) -> None:
        raise CompileReached(getattr(checkpoint_loader, "__self__", None))


class Hardware(enum.StrEnum):
    TRN1 = "trn1"
    TRN2 = "trn2"
    TRN3 = "trn3"
    INF2 = "inf2"


def _divide(numerator: int, denominator: int) -> int:
    if numerator % denominator:
        raise ValueError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator


def install() -> None:
    """Put the stubs in front of every other importer and give the behaving names their behaviour
    (once per interpreter: tests/contract/boot/sitecustomize.py calls it in every child, vLLM's own
    model-inspection subprocesses included)."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder((*HARDWARE, *ABSENT)))
    values = {
        "torch_neuronx.utils": {"get_platform_target": lambda: DEVICE["target"]},
        "neuronx_distributed.utils.utils": {"hardware": Hardware},
        "neuronx_distributed.utils.model_utils": {"get_platform_lnc": platform_lnc},
        "neuronx_distributed.trace.model_builder": {"ModelBuilder": ModelBuilder},
        "neuronx_distributed.parallel_layers.parallel_state": {
            "model_parallel_is_initialized": lambda: True,
            "get_tensor_model_parallel_size": lambda: DEVICE["tp"],
            "get_world_group": StubObject,
        },
        "neuronx_distributed.parallel_layers.utils": {"divide": _divide},
        "neuronx_distributed.parallel_layers.pad": {"get_number_of_extra_heads": lambda n, tp: (-n) % tp},
    }
    for module_name, names in values.items():
        module = importlib.import_module(module_name)
        for name, value in names.items():
            setattr(module, name, value)


def platform_lnc() -> int:
    """Trn2 and later group two physical cores into one logical core by default."""
    return 2 if DEVICE["target"] in ("trn2", "trn3") else 1
