"""Run stage_all for an s3:// model prefix in a separate process (so a test can SIGKILL it midway)."""

from __future__ import annotations

import os
import sys

from neuronserve.stage import stage_all
from neuronserve.types import ArtifactSpec, LaunchPlan, ModelSpec


def main() -> None:
    uri, dest = sys.argv[1], sys.argv[2]
    plan = LaunchPlan(
        device="neuron",
        argv=("python",),
        env={},
        neuron_override=None,
        cache_key=None,
        warnings=(),
        model=ModelSpec(source="s3", uri=uri, local_path=dest),
        artifacts=ArtifactSpec(),
    )
    stage_all(plan, dict(os.environ))


if __name__ == "__main__":
    main()
