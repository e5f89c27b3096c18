"""Two processes on one --out: exactly one proceeds; the other exits 2 with one line naming the holder's PID
and changes nothing (its different settings do not reach config.yaml, the manifest or the log)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ARGS = [
    "train",
    "--train",
    "synthetic/source",
    "--backbone",
    "tiny-bert",
    "--train-pairs",
    "64",
    "--eval-pairs",
    "16",
    "--max-length",
    "48",
    "--epochs",
    "12",
    "--batch-size",
    "4",
    "--quiet",
]


def _checksums(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# `rewardsmith` that, once it has logged its first optimiser step, waits while the file TRAIN_TEST_HOLD names
# exists: the second process meets a run that is surely still under way, however fast the machine.
HELD_CLI = """
import os, sys, time
from pathlib import Path
from rewardsmith.train import trainer
write_step = trainer._write_step
def held(log, accelerator, values):
    write_step(log, accelerator, values)
    while Path(os.environ["TRAIN_TEST_HOLD"]).exists():
        time.sleep(0.05)
trainer._write_step = held
sys.argv[0] = "rewardsmith"
from rewardsmith.cli import main
main()
"""


def test_second_process_on_a_busy_folder_is_refused(tmp_path: Path) -> None:
    out, hold = tmp_path / "run", tmp_path / "hold"
    hold.touch()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "rewardsmith.cli"]
    first = subprocess.Popen(
        [sys.executable, "-c", HELD_CLI, *ARGS, "--out", str(out)],
        env={**env, "TRAIN_TEST_HOLD": str(hold)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 300
    while not (out / "log.jsonl").exists() or not (out / "log.jsonl").read_text():
        assert first.poll() is None, first.communicate()
        assert time.time() < deadline
        time.sleep(0.2)
    second = subprocess.run(
        [*cmd, *ARGS, "--seed", "7", "--out", str(out)], env=env, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and f"PID {first.pid}" in lines[0] and "in use" in lines[0]
    hold.unlink()
    _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    config = (out / "config.yaml").read_text()
    assert "seed: 0" in config and "seed: 7" not in config
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["train"]["seed"] == 0
    steps = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, len(steps) + 1))  # one run's log, not two interleaved
    # A third run with the same settings finds the finished run and leaves it as it is.
    before = _checksums(out)
    third = subprocess.run([*cmd, *ARGS, "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0 and "already holds this finished run" in third.stdout
    after = _checksums(out)
    own = ("manifest.json", ".rewardsmith.lock")  # the manifest's `updated` time and the lock holder's PID
    assert {k: v for k, v in after.items() if k not in own} == {k: v for k, v in before.items() if k not in own}
