"""Stage one model in this process, for a test that runs it as a child: one it SIGKILLs midway
(test_resume_and_errors.py, test_faults.py: an s3:// prefix) or one under resource caps set before exec
(test_archive.py: with `archive`, a model archive at a local path or an s3:// URI).

    python -m tests.s3.stage_child URI DEST [s3|archive]

Exit 0 and print the staged files on success; exit 3 with the StageError on stderr; anything else
(a traceback, a kill by the kernel's caps) is a failure the test reports as such.
"""

from __future__ import annotations

import os
import sys

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.types import ArtifactSpec, LaunchPlan, ModelSpec

STAGE_ERROR_EXIT = 3


def main() -> None:
    uri, dest, *source = sys.argv[1:]
    plan = LaunchPlan(
        device="neuron",
        argv=("python",),
        env={},
        neuron_override=None,
        cache_key=None,
        warnings=(),
        model=ModelSpec(source=source[0] if source else "s3", uri=uri, local_path=dest),  # type: ignore[arg-type]
        artifacts=ArtifactSpec(),
    )
    try:
        stage_all(plan, dict(os.environ))
    except StageError as err:
        print(f"StageError: {err}", file=sys.stderr)
        sys.exit(STAGE_ERROR_EXIT)
    for root, _dirs, files in os.walk(dest):
        for name in files:
            print(os.path.relpath(os.path.join(root, name), dest))


if __name__ == "__main__":
    main()
