"""`neuronserve <args>` under cProfile, recording only between two signals (no change to src/).

    python bench/ceiling/profiled_serve.py OUT serve --device neuron

SIGUSR1 starts recording, SIGUSR2 stops it and writes the stats to OUT (pstats format), so start-up and
shutdown stay out of the profile. cProfile records the thread that enabled it: the signal handler runs
on the main thread, which runs the front's event loop (commands/serve.py); the engine-log relay
thread (engine/process.py) is not recorded (py-spy sees every thread: bench_ceiling.py --profile py-spy).
"""

from __future__ import annotations

import cProfile
import signal
import sys


def main() -> int:
    out, args = sys.argv[1], sys.argv[2:]
    prof = cProfile.Profile()

    def start(*_: object) -> None:
        prof.enable()

    def stop(*_: object) -> None:
        prof.disable()
        prof.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    from neuronserve.cli import main as cli  # noqa: PLC0415 (after the handlers: a signal may come early)

    return cli(args)


if __name__ == "__main__":
    sys.exit(main())
