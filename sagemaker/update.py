"""`python sagemaker/update.py --help`: see docs/DEPLOY.md. The logic lives in neuronserve.deploy."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from neuronserve.deploy.cli import main
except ImportError:  # run from a checkout without installing neuronserve
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from neuronserve.deploy.cli import main

if __name__ == "__main__":
    sys.exit(main("update"))
