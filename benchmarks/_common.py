"""What the fresh-process benchmarks share: the machine they ran on and how a result file is written."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def spread(values: list[float]) -> dict[str, Any]:
    """Median, range and the per-round values of paired ratios."""
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "per_round": [round(v, 3) for v in values]}


def write_results(path: Path, out: dict[str, Any], table: str) -> None:
    """Writes the result JSON (with the machine) and prints the table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**out, "machine": machine()}, indent=1) + "\n")
    print(table)
    print(f"written {path}")
