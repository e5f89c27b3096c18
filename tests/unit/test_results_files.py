"""Committed metrics files (rewardsmith.report.results): the bulky parts dropped at every depth, the command kept
first, the run's environment kept, a run without a readable metrics.json refused in one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardsmith.errors import DataError
from rewardsmith.report.results import save_results, slim


def test_slim_drops_the_bulky_keys_at_every_depth() -> None:
    metrics = {"a": 1, "curve": [1, 2], "b": {"tables": {}, "c": [{"reliability": 0, "d": 2}]}}
    assert slim(metrics) == {"a": 1, "b": {"c": [{"d": 2}]}}


def test_save_results_writes_the_command_and_the_slimmed_metrics(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"x": 1.5, "environment": {"host": "h"}}))
    out = save_results("demo-x", run, "make x", tmp_path / "results")
    assert out == tmp_path / "results" / "demo-x.json"
    # The environment stays: which code and versions made a committed result.
    assert json.loads(out.read_text()) == {"command": "make x", "x": 1.5, "environment": {"host": "h"}}
    with pytest.raises(DataError, match=r"missing/metrics\.json: no readable metrics\.json"):
        save_results("y", tmp_path / "missing", "cmd", tmp_path / "results")
    (run / "metrics.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="is not a JSON object"):
        save_results("z", run, "cmd", tmp_path / "results")
