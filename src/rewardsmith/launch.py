"""The `rewardsmith` command's entry point: the thread settings every command runs under, set before torch (and
its OpenMP runtime, which reads them once, when it loads) is imported, then the command line.

OMP_WAIT_POLICY: between two parallel regions an OpenMP thread either spins (ACTIVE) or sleeps (PASSIVE). Spinning
answers the next region sooner: on an idle 2-core machine a short training run took 0.93x the seconds with it
(benchmarks/bench_contention.py, "idle"). Beside other work it is the other way round: spinning threads take the
cores the other work needs, and the same run took 1.36x the seconds of PASSIVE ("beside one
CPU-bound process"). So the command looks before torch loads: ACTIVE when no other task is runnable on the
machine, PASSIVE when one is, and always PASSIVE for `rewardsmith serve`, whose own threads (HTTP, tokenizer) run
beside the model's. A value the user set is kept.

At the end, gc.freeze(): the interpreter's last collections at exit walk every object torch and transformers
left (about 1 s of each command's exit on the 2-core machine, benchmarks/bench_train_process.py) only to find
garbage the process is about to drop anyway. Frozen, they are skipped; the exit handlers and module teardown run as
before, and every file a command writes is closed before it returns, so nothing waits on those collections.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# Commands that run threads of their own beside torch's: spinning OpenMP threads would starve them.
OWN_THREADS = frozenset({"serve"})
LOADAVG = Path("/proc/loadavg")
LOOKS = 5  # samples of the run queue, LOOK_GAP_S apart; busy when most of them show another runnable task
LOOK_GAP_S = 0.01


def others_runnable(loadavg: Path = LOADAVG, looks: int = LOOKS, gap_s: float = LOOK_GAP_S) -> bool | None:
    """Whether another task is runnable on this machine now: /proc/loadavg's fourth field counts the runnable tasks
    (this one included) at the moment it is read; most of `looks` reads showing more than one means other work is
    running. None where the file cannot be read (not Linux)."""
    busy = 0
    for i in range(looks):
        try:
            runnable = int(loadavg.read_text(encoding="ascii").split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        busy += runnable > 1
        if i + 1 < looks:
            time.sleep(gap_s)
    return busy * 2 > looks


def wait_policy(argv: Sequence[str], loadavg: Path = LOADAVG) -> str:
    """OMP_WAIT_POLICY for a command line (module docstring): PASSIVE for a command with threads of its own or on a
    machine with other work (or one that cannot be looked at), ACTIVE on an idle one."""
    command = next((a for a in argv[1:] if not a.startswith("-")), "")
    if command in OWN_THREADS:
        return "PASSIVE"
    return "ACTIVE" if others_runnable(loadavg) is False else "PASSIVE"


def main() -> None:
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = wait_policy(sys.argv)
    from rewardsmith.cli import main as cli_main

    try:
        cli_main()
    finally:
        gc.freeze()
