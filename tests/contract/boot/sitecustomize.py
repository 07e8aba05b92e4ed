"""Loaded by every interpreter started with tests/contract/boot on PYTHONPATH (the lane children and the
model-inspection subprocesses vLLM starts from them): the hardware stubs first (tests/contract/stubs.py)."""

from tests.contract import stubs

stubs.install()
