"""What the fresh-process benchmarks share: running one measured worker process, the rotating order of a round,
the machine they ran on and how a result file is written."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    import torch

    from rewardsmith.io.environment import cpu_facts

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        **cpu_facts(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }


def run_worker(script: str, args: Sequence[str], label: str) -> dict[str, Any]:
    """Runs `python script *args` in a fresh process (offline) and returns the JSON its last stdout line holds,
    plus process_seconds and process_cpu_seconds measured from outside. Exits naming `label` if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{label} failed:\n{done.stderr[-3000:]}")
    record: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {**record, "process_seconds": round(wall, 2), "process_cpu_seconds": round(cpu, 2)}


def rotated(items: Sequence[str], round_index: int) -> list[str]:
    """The round's running order: who goes first rotates, so load drift hits every variant alike."""
    k = round_index % len(items)
    return [*items[k:], *items[:k]]


def spread(values: list[float]) -> dict[str, Any]:
    """Median, range and the per-round values of paired ratios."""
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "per_round": [round(v, 3) for v in values],
    }


def markdown_table(header: Sequence[str], align: str, rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a Markdown table: the header, the alignment row (`align`: one letter a column, l or r), then one
    line a row of cells (each shown as str() shows it)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    return lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows]


def write_results(path: Path, out: dict[str, Any], table: str) -> None:
    """Writes the result JSON (with the machine) and prints the table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**out, "machine": machine()}, indent=1) + "\n")
    print(table)
    print(f"written {path}")
