"""`make bench`: every benchmark in its own fresh process, one after another, each writing its JSON under
benchmarks/results/ and printing its table. The commands are the ones the results files record.

    .venv/bin/python benchmarks/run_all.py                 # all of them (an hour or more on 2 CPU cores)
    .venv/bin/python benchmarks/run_all.py --only pebs icrm
    .venv/bin/python benchmarks/run_all.py --list

bench_icrm_trainer.py compares against a checkout of an earlier commit and runs only when --previous-src
gives one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHMARKS: dict[str, list[str]] = {
    "train_throughput": ["bench_train_throughput.py"],
    "score": ["bench_score.py"],
    "suites": ["bench_suites.py"],
    "kernels": ["bench_kernels.py"],
    "anchor": ["bench_anchor.py"],
    "icrm": ["bench_icrm.py", "--pairs", "1000", "--demos", "64", "--repeats", "2"],
    "pebs": ["bench_pebs.py"],
    "icrm_trainer": ["bench_icrm_trainer.py"],
    "serve": ["bench_serve.py"],
    "rater_stats": ["bench_rater_stats.py"],
    "bon": ["bench_bon.py"],
    "contention": ["bench_contention.py"],
    "policy_load": ["bench_policy_load.py"],
    "sampling": ["bench_sampling.py"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), help="run only these")
    parser.add_argument("--list", action="store_true", help="print the commands and exit")
    parser.add_argument("--previous-src", type=Path, help="src/ of an earlier commit, for icrm_trainer")
    args = parser.parse_args()
    chosen = args.only or list(BENCHMARKS)
    # The user-facing comparisons (training, scoring) use every core, as a user's run does; the others
    # record one thread in their commands.
    all_cores = {"train_throughput", "score"}
    failed = []
    for name in chosen:
        cmd = [sys.executable, str(HERE / BENCHMARKS[name][0]), *BENCHMARKS[name][1:]]
        if not (HERE / BENCHMARKS[name][0]).exists():
            print(f"== {name}: skipped ({BENCHMARKS[name][0]} is not in this checkout)", flush=True)
            continue
        if name == "icrm_trainer":
            if args.previous_src is None:
                print("== icrm_trainer: skipped (give --previous-src)", flush=True)
                continue
            cmd += ["--previous-src", str(args.previous_src)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        if name not in all_cores:
            env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        if args.list:
            continue
        t0 = time.perf_counter()
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            failed.append(name)
        print(f"== {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
