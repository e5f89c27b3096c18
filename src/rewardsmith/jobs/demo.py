"""`rewardsmith demo` (what `make demo` runs): the main job on the embedded defaults, offline.

Weak-to-strong under preference shift on the built-in synthetic suite: a weak teacher (a frozen 1-layer MiniLM
probe) labels pairs for a MiniLM student trained with each method; every model is evaluated on the source's
held-out pairs and on target domains where the source's length / stock-phrase artifacts are uninformative or
reversed. The config ships inside the package (rewardsmith/resources/demo-shift.yaml).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rewardsmith.config import from_dict
from rewardsmith.jobs.common import JobResult
from rewardsmith.jobs.shift import run_shift_job
from rewardsmith.w2s.config import ShiftConfig


def demo_config() -> ShiftConfig:
    import yaml

    text = resources.files("rewardsmith.resources").joinpath("demo-shift.yaml").read_text(encoding="utf-8")
    return from_dict(ShiftConfig, yaml.safe_load(text))


def run_demo(out: str | Path, progress: bool = True, overwrite: bool = False, quick: bool = False) -> JobResult:
    """Runs the demo into the run folder `out` (resuming an interrupted demo); quick: the config's quick sizes,
    a run of about a minute (for smoke tests)."""
    return run_shift_job(demo_config(), out, quick=quick, progress=progress, overwrite=overwrite,
                         title="rewardsmith demo: weak-to-strong under shift on the synthetic suite")
