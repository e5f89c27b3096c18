"""Experiment trackers (train.report_to): TensorBoard's event files read back equal log.jsonl value for value, a
resumed run (a real SIGKILL, or a stop) continues the same tracker run, a missing package fails before any
training with one line, and the train job registers tracking/ in its manifest. W&B (offline) and MLflow (file
store) are checked the same way where their packages are installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import easy_pairs
from rewardsmith.config import ModelConfig, TrainConfig
from rewardsmith.errors import ConfigError
from rewardsmith.models import build_reward_model
from rewardsmith.train.tracking import (
    STATE_FILE,
    TRACKERS,
    TRACKING_DIR,
    TrackerRun,
    _tensorboard_order,
    accelerator_options,
    tracked_paths,
)
from rewardsmith.train.trainer import CHECKPOINT_DIR, KILL_AFTER_STEP_ENV, LOG_FILE, StepEnd, train_pairs

torch.set_num_threads(1)
MODEL_CFG = ModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8)
STEPS = 8  # 64 pairs, batch 8, one epoch


class Stop(Exception):
    """Raised by an on_step hook: the run stops as a kill would (the last checkpoint stays)."""


def train(run_dir: Path, stop_at: int | None = None, **overrides: object) -> None:
    cfg = TrainConfig(
        **{"epochs": 1, "batch_size": 8, "lr": 1e-3, "checkpoint_every": 3, "progress": False, **overrides}
    )  # type: ignore[arg-type]
    model, tok = build_reward_model(MODEL_CFG, seed=cfg.seed)

    def stop(end: StepEnd) -> None:
        if end.step == stop_at:
            raise Stop

    train_pairs(model, tok, easy_pairs(64), cfg, MODEL_CFG, run_dir, on_step=[stop] if stop_at else [])


def log_rows(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / LOG_FILE).read_text().splitlines()]


def tensorboard_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value)]} as TensorBoard shows them (purged events dropped)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / TRACKING_DIR / "tensorboard"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def raw_event_steps(run_dir: Path, tag: str) -> list[int]:
    """Every step recorded for `tag` in every event file, purged or not, in file order."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    steps = []
    for path in sorted((run_dir / TRACKING_DIR / "tensorboard").glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            steps += [event.step for v in event.summary.value if v.tag == tag]
    return steps


def assert_tensorboard_equals_log(run_dir: Path) -> None:
    """Every log.jsonl value is in TensorBoard at its step (stored as float32), and nothing else is."""
    rows = log_rows(run_dir)
    scalars = tensorboard_scalars(run_dir)
    assert set(scalars) == set(rows[0])
    for key, events in scalars.items():
        assert [step for step, _ in events] == [r["step"] for r in rows], key
        assert [value for _, value in events] == [float(np.float32(r[key])) for r in rows], key


def test_tensorboard_events_equal_log_jsonl_value_for_value(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    train(tmp_path, report_to="tensorboard")
    rows = log_rows(tmp_path)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert {"step", "epoch", "lr", "items_per_s", "bt"} <= set(rows[0])
    assert_tensorboard_equals_log(tmp_path)
    state = json.loads((tmp_path / TRACKING_DIR / STATE_FILE).read_text())
    assert state["runs"] == {"tensorboard": "tensorboard"}
    assert not (tmp_path / CHECKPOINT_DIR).exists()


def test_no_tracker_writes_nothing_beside_the_log(tmp_path: Path) -> None:
    train(tmp_path, max_steps=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_FILE]
    assert tracked_paths("none") == () and accelerator_options("none", tmp_path) == {}
    assert tracked_paths("wandb") == (TRACKING_DIR,)
    assert accelerator_options("tensorboard", tmp_path) == {
        "log_with": "tensorboard",
        "project_dir": str(tmp_path / TRACKING_DIR),
    }


@pytest.mark.parametrize("name", ["tensorboard", "wandb", "mlflow", "trackio"])
def test_a_missing_tracker_package_fails_before_training_in_one_line(tmp_path: Path, monkeypatch, name: str) -> None:
    for module in TRACKERS.get(name).modules:
        monkeypatch.setitem(sys.modules, module, None)  # import and find_spec then see no such package
    with pytest.raises(ConfigError) as caught:
        train(tmp_path / "run", report_to=name)
    message = str(caught.value)
    assert "\n" not in message and f"pip install {TRACKERS.get(name).package}" in message
    assert f"report_to={name!r}" in message
    assert not (tmp_path / "run").exists()  # nothing trained, nothing written


_TENSORBOARD_RUN = """
import sys
from pathlib import Path
sys.path[:0] = [{tests!r}, {helpers!r}]
from test_tracking import train
train(Path(sys.argv[1]), report_to="tensorboard")
"""


def _tensorboard_run() -> str:
    """_TENSORBOARD_RUN importing from this folder and from tests/ (helpers.py)."""
    here = Path(__file__).resolve().parent
    return _TENSORBOARD_RUN.format(tests=str(here), helpers=str(here.parent))


@pytest.mark.slow
def test_a_killed_run_resumes_the_same_tensorboard_run(tmp_path: Path) -> None:
    """SIGKILL right after step 7 (checkpoint at 6), then the same training again: TensorBoard shows every step
    once, with the values of log.jsonl (the resumed attempt's, items_per_s included); the event files keep
    step 7 of the killed attempt, hidden by purge_step."""
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    script = _tensorboard_run()
    env = {**os.environ, "OMP_NUM_THREADS": "1", KILL_AFTER_STEP_ENV: "7"}
    killed = subprocess.run([sys.executable, "-c", script, str(run)], env=env, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert [r["step"] for r in log_rows(run)] == list(range(1, 8))
    before = json.loads((run / TRACKING_DIR / STATE_FILE).read_text())
    killed_rows = log_rows(run)
    train(run, report_to="tensorboard")
    rows = log_rows(run)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert rows[:6] == killed_rows[:6] and rows[6]["bt"] == killed_rows[6]["bt"]  # resume is exact
    assert_tensorboard_equals_log(run)
    assert raw_event_steps(run, "bt") == [*range(1, 8), *range(7, STEPS + 1)]
    assert json.loads((run / TRACKING_DIR / STATE_FILE).read_text()) == before  # the same tracker run


def test_a_resumed_tensorboard_writer_starts_in_a_later_second(tmp_path: Path) -> None:
    """Event files are read in name order (<unix second>.<host>.<pid>): a writer opened in the same second as an
    earlier attempt's file (a pid that sorts lower would be read first) waits for the next second."""
    (tmp_path / "tensorboard").mkdir()
    now = int(time.time())
    (tmp_path / "tensorboard" / f"events.out.tfevents.{now}.host.99999.0").touch()
    _tensorboard_order(TrackerRun(tmp_path, "run-0", "0", "tensorboard", 6))
    assert int(time.time()) > now


def test_a_tracker_switched_on_at_resume_gets_the_earlier_steps(tmp_path: Path) -> None:
    """report_to may change on resume: a tracker first started at step 6 receives log.jsonl's steps 1-6 first."""
    pytest.importorskip("tensorboard")
    with pytest.raises(Stop):
        train(tmp_path, stop_at=7)
    assert not (tmp_path / TRACKING_DIR).exists()
    train(tmp_path, report_to="tensorboard")
    assert_tensorboard_equals_log(tmp_path)
    assert raw_event_steps(tmp_path, "bt") == list(range(1, STEPS + 1))


def test_importing_the_module_loads_no_tracker() -> None:
    code = (
        "import sys, rewardsmith.train.tracking; "
        "print([m for m in ('accelerate', 'tensorboard', 'wandb', 'mlflow', 'trackio') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_train_job_claims_the_tracking_folder(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from rewardsmith.config import DataConfig, EvalSettings, RunConfig
    from rewardsmith.jobs.train import run_train

    cfg = RunConfig(
        data=DataConfig(train_pairs=32, eval_pairs=16),
        model=MODEL_CFG,
        train=TrainConfig(max_steps=2, batch_size=8, progress=False, report_to="tensorboard"),
        eval=EvalSettings(batch_size=16, n_boot=10),
        save_model=False,
    )
    run_train(cfg, tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert TRACKING_DIR in manifest["files"]
    assert [s for s, _ in tensorboard_scalars(tmp_path / "run")["bt"]] == [1, 2]


@pytest.mark.slow
def test_under_two_processes_only_the_main_process_logs(tmp_path: Path) -> None:
    """`accelerate launch --multi_gpu --num_processes 2` on CPU (gloo, as tests/integration/test_distributed.py
    runs it): one event file, the steps of log.jsonl once each."""
    pytest.importorskip("tensorboard")
    script = tmp_path / "launch_tracked.py"
    script.write_text(_tensorboard_run())
    accelerate = Path(sys.executable).with_name("accelerate")
    cmd = [
        str(accelerate),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        "29519",
        str(script),
        str(tmp_path / "run"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list((tmp_path / "run" / TRACKING_DIR / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert_tensorboard_equals_log(tmp_path / "run")
    assert [r["step"] for r in log_rows(tmp_path / "run")] == list(range(1, STEPS + 1))


def _wandb_history(path: Path) -> list[dict[str, float]]:
    """The history rows of a W&B offline run file (LevelDB log format: a 7-byte file header, 32 KiB blocks,
    records of crc32, little-endian length, type (1 full, 2 first, 3 middle, 4 last) and a protobuf Record)."""
    from wandb.proto import wandb_internal_pb2

    data, pos, block, chunk, rows = path.read_bytes(), 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunk)
            chunk = b""
            if record.WhichOneof("record_type") == "history":
                rows.append(
                    {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                )
    return rows


@pytest.mark.slow
def test_wandb_offline_run_in_the_run_folder_resumes_the_same_run(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("wandb")
    for var in ("WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(Stop):
        train(tmp_path, stop_at=7, report_to="wandb")
    train(tmp_path, report_to="wandb")
    token = json.loads((tmp_path / TRACKING_DIR / STATE_FILE).read_text())["token"]
    attempts = sorted((tmp_path / TRACKING_DIR / "wandb").glob(f"offline-run-*-{token}"))
    assert len(attempts) == 2  # one offline folder per attempt, one run id
    logged: dict[int, dict[str, float]] = {}
    for folder in attempts:
        for row in _wandb_history(folder / f"run-{token}.wandb"):
            logged[int(row["_step"])] = row  # a later attempt's step replaces the earlier one's
    rows = log_rows(tmp_path)
    assert sorted(logged) == [r["step"] for r in rows]
    for r in rows:
        assert {k: logged[r["step"]][k] for k in r} == r


def test_mlflow_file_store_in_the_run_folder_resumes_the_same_run(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    with pytest.raises(Stop):
        train(tmp_path, stop_at=7, report_to="mlflow")
    first = json.loads((tmp_path / TRACKING_DIR / STATE_FILE).read_text())["runs"]["mlflow"]
    train(tmp_path, report_to="mlflow")
    state = json.loads((tmp_path / TRACKING_DIR / STATE_FILE).read_text())
    assert state["runs"]["mlflow"] == first
    client = MlflowClient((tmp_path / TRACKING_DIR / "mlflow").resolve().as_uri())
    assert client.get_run(first).info.status == "FINISHED"
    assert client.get_run(first).data.params["lr"] == "0.001"
    rows = log_rows(tmp_path)
    history = client.get_metric_history(first, "bt")
    # step 7 twice (the stopped attempt's and the resumed one's, equal: resume is exact), every other step once
    assert sorted(m.step for m in history) == sorted([r["step"] for r in rows] + [7])
    assert {(m.step, m.value) for m in history} == {(r["step"], r["bt"]) for r in rows}
