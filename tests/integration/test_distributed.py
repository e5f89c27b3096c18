"""The distributed path users take on GPUs, exercised on CPU: the same training under `accelerate launch
--multi_gpu --num_processes 2` on a machine without GPUs (accelerate starts two torchrun processes; the
Trainer's Accelerator(cpu=True) joins them as MULTI_CPU over gloo; each process takes half of every micro-batch
and gradients are averaged) ends with the weights of a single process with the same global batch. (With
accelerate 1.15, `accelerate launch --cpu --num_processes 2` starts one process unless mpirun is used.)

Tolerance: the models' outputs on held-out inputs (reward margins of 32 pairs; ICRM utility margins of 64
episodes) agree within 1e-4 absolute after 6 AdamW steps, while training moved them by more than 100 times
that. The runs differ only in the order of floating-point sums (a half-batch mean per process, then an
all-reduce). Weights are not compared one by one: AdamW's first steps move every weight by about +-lr whatever
the size of its gradient, so a weight whose gradient is within rounding of zero can take either sign; a wrong
shard, a double-counted gradient or a shortened schedule moves the outputs by far more than the tolerance.
Every process of a launch ends with no Gloo thread left running (ddp_train.py records them at exit).

A two-process run SIGKILLed after step 4 (its checkpoint holds whole state from step 3) and started again ends
with the weights of an uninterrupted two-process run, bit for bit. FSDP and DeepSpeed: test_sharded_training.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import launcher
import pytest
import torch
from safetensors.torch import load_file

from rewardsmith.train.trainer import KILL_AFTER_STEP_ENV

SCRIPT = Path(__file__).with_name("ddp_train.py")
TOLERANCE = 1e-4
pytestmark = pytest.mark.slow


def _run(kind: str, out: Path, processes: int, kill_after: int | None = None) -> dict[str, torch.Tensor]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        **({KILL_AFTER_STEP_ENV: str(kill_after)} if kill_after is not None else {}),
    }
    cmd = launcher.command([str(SCRIPT)], processes)
    result = subprocess.run(
        [*cmd, "--kind", kind, "--out", str(out)], capture_output=True, text=True, env=env, timeout=900
    )
    if kill_after is not None:  # killed: the checkpoint of the step before stays
        assert result.returncode != 0 and (out / "run" / "checkpoint" / "state.json").exists(), result.stderr[-3000:]
        return {}
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "processes.txt").read_text() == str(processes)
    # No Gloo thread outlives the process group: left running into the interpreter's teardown, they abort a
    # finished process now and then (rewardsmith.io.processes.before_group).
    for rank in range(processes if processes > 1 else 0):
        threads = (out / f"threads-{rank}.txt").read_text().split()
        assert not [t for t in threads if "gloo" in t], (rank, threads)
    return load_file(str(out / "outputs.safetensors"))


@pytest.mark.parametrize("kind", ["bt", "icrm"])
def test_two_processes_match_one(tmp_path: Path, kind: str) -> None:
    one = _run(kind, tmp_path / "one", 1)
    two = _run(kind, tmp_path / "two", 2)
    worst = float((one["now"] - two["now"]).abs().max())
    assert worst < TOLERANCE, worst
    # Training moved the outputs far beyond the tolerance: agreement is not agreement of untrained models.
    moved = float((one["now"] - one["before"]).abs().max())
    assert moved > 100 * TOLERANCE, moved


def test_a_killed_two_process_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    _run("bt", tmp_path / "clean", 2)
    _run("bt", tmp_path / "killed", 2, kill_after=4)
    resumed = _run("bt", tmp_path / "killed", 2)
    clean = load_file(str(tmp_path / "clean" / "weights.safetensors"))
    weights = load_file(str(tmp_path / "killed" / "weights.safetensors"))
    assert clean.keys() == weights.keys() and all(torch.equal(clean[k], weights[k]) for k in clean)
    assert float((resumed["reloaded"] - resumed["now"]).abs().max()) < 1e-6  # the saved folder scores the same
