"""One lane's NxD Inference, asked about every override field the plan accepts:
`python -m tests.contract.fields_child SOURCE RESULT.json` (SOURCE: the reference folder, e.g.
nxdi-0.7.14366), with the lane's NxD Inference first on PYTHONPATH and the hardware stubbed
(tests/contract/boot), as tests/contract/test_override_fields.py starts it.

For each NeuronConfig class the lane defines (after importing every model of its MODEL_TYPES) and each
field plan/lanes/nxdi/fields.py lists for it, it builds the class with that one keyword argument, as the
plugin passes an override key, and records whether NxD Inference logged it among its "Unexpected keyword
arguments" (models/config.py:563 at v0.7.14366). A value is the class's own default for the field where it
has one; a build that raises for every value tried is recorded as not decided (the key was read: only a
read key can raise, but the warning is not reached).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from neuronserve.plan.lanes.nxdi.override_fields import class_fields

UNEXPECTED = "Unexpected keyword arguments"
CANDIDATES: tuple[Any, ...] = (None, False, True, 1, [], {})
MISSPELT = "sequence_paralel_enabled"


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += subclasses(sub)
    return out


def probe(cls: type, key: str, capture: Capture, default: Any, always: dict[str, Any]) -> str:
    """ "read", "unexpected" or "undecided" for one keyword argument, passed beside `always`."""
    for value in (default, *CANDIDATES):
        capture.messages.clear()
        try:
            cls(**{**always, key: value})
        except Exception:  # a value the class refuses: try the next one
            if any(UNEXPECTED in m and repr(key) in m for m in capture.messages):
                return "unexpected"
            continue
        if any(UNEXPECTED in m and repr(key) in m for m in capture.messages):
            return "unexpected"
        return "read"
    return "undecided"


def main(argv: list[str]) -> int:
    source, result = argv
    import torch
    from neuronx_distributed_inference.models.config import NeuronConfig
    from neuronx_distributed_inference.utils import constants  # imports every model of MODEL_TYPES

    assert constants.MODEL_TYPES
    capture = Capture()
    logging.getLogger().addHandler(capture)
    logging.getLogger().setLevel(logging.WARNING)
    # What the plugin always passes (vllm-neuron 0.2.2+lts loader :754-794): overrides_torch_dtype is read
    # only beside torch_dtype (models/config.py:104-110).
    always = {"torch_dtype": torch.bfloat16}
    out: dict[str, Any] = {}
    for cls in subclasses(NeuronConfig):
        try:
            fields = class_fields(source, cls.__name__)
        except KeyError:
            out[cls.__name__] = {"missing": True}
            continue
        try:
            plain = cls(**always)
        except Exception:
            plain = None
        verdicts: dict[str, list[str]] = {"read": [], "unexpected": [], "undecided": []}
        for key in sorted(fields):
            default = getattr(plain, key, None) if plain is not None and key in vars(plain) else None
            verdicts[probe(cls, key, capture, default, always)].append(key)
        verdicts["misspelt"] = [probe(cls, MISSPELT, capture, True, always)]
        out[cls.__name__] = verdicts
    Path(result).write_text(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
