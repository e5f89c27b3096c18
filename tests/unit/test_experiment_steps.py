"""experiments/steps.py: a long experiment's commands logged with their wall and CPU times, read back with the runs
killed on the way, from logs of either format (this one's, and the two written before it)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """experiments/steps.py, imported as the experiments import it (their own folder first on the path)."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    return importlib.import_module("steps")


def test_a_step_is_logged_with_its_wall_and_cpu_seconds_and_read_back(steps: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "runs" / "commands.txt"
    busy = tmp_path / "busy.py"
    busy.write_text("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n    pass\n")
    steps.run_step(sys.executable, [str(busy)], log, tmp_path)
    start, end = log.read_text().splitlines()
    assert start == f"rewardsmith {busy}"
    assert end.endswith(f": {start}")
    (record,) = steps.step_times(log.read_text())
    assert record["command"] == start and record["killed"] == 0
    assert record["cpu_seconds"] is not None and record["cpu_seconds"] >= 1.0  # the child's 1.2 s, to the second
    assert record["seconds"] is not None and record["seconds"] >= 1.0
    assert float(end.split(", cpu ")[1].split(" s")[0]) == record["cpu_seconds"]
    with pytest.raises(subprocess.CalledProcessError):  # a failing command raises, its exit logged
        steps.run_step(sys.executable, ["-c", "raise SystemExit(2)"], log, tmp_path)
    assert log.read_text().splitlines()[-1].startswith("# exit 2 after ")
    failed = steps.step_times(log.read_text())[1]
    assert (failed["seconds"], failed["failed"], failed["killed"]) == (None, 1, 0)


def test_killed_runs_are_counted_and_the_longest_finished_run_is_kept(steps: ModuleType) -> None:
    root = Path("/work/clone")
    text = "\n".join(
        [
            "rewardsmith sample --out /work/clone/runs/pool",  # killed at a session's end
            "rewardsmith train --out /work/clone/runs/gold -q",
            "# 2817 s: rewardsmith train --out /work/clone/runs/gold -q",  # the format before CPU seconds, quiet
            "rewardsmith sample --out /work/clone/runs/pool",  # killed again
            "rewardsmith train --out /work/clone/runs/gold",
            "# 3 s, cpu 2 s: rewardsmith train --out /work/clone/runs/gold",  # found finished
            "rewardsmith sample --out /work/clone/runs/pool",
            "rewardsmith eval --out /work/clone/runs/agreement",  # side by side: lines interleave
            "# 3300 s, cpu 6100 s: rewardsmith sample --out /work/clone/runs/pool",
            "# 20 s, cpu 35 s: rewardsmith eval --out /work/clone/runs/agreement",
        ]
    )
    records = {r["command"]: r for r in steps.step_times(text, root)}
    assert list(records) == ["rewardsmith sample --out runs/pool", "rewardsmith train --out runs/gold",
                             "rewardsmith eval --out runs/agreement"]  # fmt: skip
    pool, gold, agreement = records.values()
    assert (pool["seconds"], pool["cpu_seconds"], pool["killed"]) == (3300.0, 6100.0, 2)
    assert (gold["seconds"], gold["cpu_seconds"], gold["killed"]) == (2817.0, None, 0)
    assert (agreement["seconds"], agreement["cpu_seconds"], agreement["killed"]) == (20.0, 35.0, 0)


def test_the_oldest_format_ends_the_run_on_the_line_before(steps: ModuleType) -> None:
    text = (
        "rewardsmith train --out runs/harmless\n# 292 s\nrewardsmith sample --out runs/bon\nrewardsmith bon\n# 41 s\n"
    )
    records = steps.step_times(text)
    assert [(r["seconds"], r["killed"]) for r in records] == [(292.0, 0), (None, 1), (41.0, 0)]


def test_the_testbed_cost_block_shows_cpu_minutes_kills_and_the_machines(
    steps: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXPERIMENTS.parent / "tools"))
    blocks = importlib.import_module("blocks_testbed")
    log = "\n".join(
        [
            '## machine: {"cpu": "CPU A", "cpus": 2, "bf16_native": false}',
            "rewardsmith sample --out runs/pool",
            '## machine: {"cpu": "CPU A", "cpus": 2, "bf16_native": false}',
            "rewardsmith sample --out runs/pool",
            "# 3300 s, cpu 6000 s: rewardsmith sample --out runs/pool",
            "rewardsmith label --out runs/labels",
            "# 60 s, cpu 90 s: rewardsmith label --out runs/labels",
        ]
    )
    result = {"seconds": steps.step_times(log), "machines": steps.machines(log), "sampler": {"eval": 2}}
    monkeypatch.setattr(blocks, "load", lambda name: result)
    text = blocks.cost()
    assert "| `rewardsmith sample --out runs/pool` | 55.0 | 100.0 | 1 |" in text
    assert "| `rewardsmith label --out runs/labels` | 1.0 | 1.5 | 0 |" in text
    assert "56 minutes in all, 102 CPU minutes, on CPU A, 2 cores, no native bf16: bf16 runs in fp32." in text
    assert "1 run was killed on the way" in text
