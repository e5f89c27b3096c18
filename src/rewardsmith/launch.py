"""The `rewardsmith` command's entry point: the thread settings every command runs under, set before torch (and
its OpenMP runtime, which reads them once, when it loads) is imported, then the command line.

OMP_WAIT_POLICY=PASSIVE: an OpenMP thread that finishes its share of a parallel region sleeps instead of spinning
for the next one. On a machine with other work running, spinning threads take the cores that work needs and the
other way round (benchmarks/bench_contention.py measures the difference); on an idle machine the two cost the
same. A value the user set is kept.

At the end, gc.freeze(): the interpreter's last collections at exit walk every object torch and transformers
left (about 1 s of each command's exit on the 2-core machine, benchmarks/bench_train_process.py) only to find
garbage the process is about to drop anyway. Frozen, they are skipped; the exit handlers and module teardown run as
before, and every file a command writes is closed before it returns, so nothing waits on those collections.
"""

from __future__ import annotations

import gc
import os


def main() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from rewardsmith.cli import main as cli_main

    try:
        cli_main()
    finally:
        gc.freeze()
