"""What `python -m vllm.entrypoints.openai.api_server ...` runs with bench/synth_engine first on PYTHONPATH.

The same mechanism as the tests' stand-in engine (tests/support/standin_engine): the real
`neuronserve serve --device neuron` renders the engine argv of its Neuron plan and starts it; the
module it names is this one, which runs the synthetic OpenAI server (synth_openai.py) on the plan's
--host and --port.
"""

from __future__ import annotations

import sys

from synth_openai import main

if __name__ == "__main__":
    main(sys.argv[1:])
