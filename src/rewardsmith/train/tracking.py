"""Experiment trackers that follow a training run live, beside log.jsonl (`TrainConfig.report_to`), through
Accelerate's trackers: every optimiser step's log.jsonl line goes to the tracker as it is, at its step.

Where each tracker writes (offline by default, inside the run folder's `tracking/`):
- tensorboard: event files in `tracking/tensorboard/` (`tensorboard --logdir <run>/tracking`, or a folder of
  run folders to compare runs).
- wandb: offline mode unless WANDB_MODE is set; files in `tracking/wandb/` unless WANDB_DIR is set
  (`wandb sync <run>/tracking/wandb/offline-run-*` uploads them later).
- mlflow: a file store in `tracking/mlflow/` unless MLFLOW_TRACKING_URI is set (then the run goes there).
- trackio: trackio's own local store ($TRACKIO_DIR, default ~/.cache/huggingface/trackio), never a Space.
`tracking/run.json` holds the run's name and each tracker's run id, so that a resumed run continues the same
tracker run: TensorBoard reopens its folder with `purge_step` = the checkpoint step + 1, so readers drop the
steps a killed attempt logged past its checkpoint (the event files keep them: a kill necessarily leaves them);
W&B resumes the same run id (offline: a second offline-run folder with that id, synced into one run; online,
W&B keeps the first value logged at a step, equal but for items_per_s); MLflow
reopens the same run id (the steps past the checkpoint are logged again with the same values: resume is exact);
trackio resumes the run by name. A tracker first switched on at a resume (report_to is volatile) receives the
log.jsonl lines up to the checkpoint first, so its curve starts at step 1.

Only the main process starts trackers and logs. A missing tracker package is a one-line ConfigError naming the
pip package, raised when the Trainer is built, before any training.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from rewardsmith.errors import CheckpointError, ConfigError
from rewardsmith.io.atomic import atomic_write_json
from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.io.runfolder import flatten
from rewardsmith.registry import Registry

TRACKING_DIR = "tracking"
STATE_FILE = "run.json"
PROJECT = "rewardsmith"


@dataclass(frozen=True)
class TrackerRun:
    """What a tracker needs to open its run. folder: <run>/tracking; name: the run's display name (folder
    name + a random token, unique across runs); token: the random part, W&B's run id; saved: this tracker's id
    from an earlier attempt of the same run (None: a new tracker run); start_step: the checkpoint step the
    training resumes from (0 for a fresh run)."""

    folder: Path
    name: str
    token: str
    saved: str | None
    start_step: int


@dataclass(frozen=True)
class Tracker:
    """One Accelerate tracker as rewardsmith uses it.

    modules: importable names that provide it (any one); package: what `pip install` needs; project: the
    project name handed to init_trackers (TensorBoard: the sub-folder of tracking/); init_kwargs: keyword
    arguments of the tracker (through init_trackers' init_kwargs); run_id: the id to save after start, from
    the started tracker object and the TrackerRun; takes_config: whether the run's TrainConfig is stored as its
    hyperparameters (TensorBoard's add_hparams writes a new sub-run per call, so not there); before_start: a
    setting to make before the tracker starts (MLflow's store)."""

    modules: tuple[str, ...]
    package: str
    project: Callable[[], str]
    init_kwargs: Callable[[TrackerRun], dict[str, Any]]
    run_id: Callable[[Any, TrackerRun], str]
    takes_config: bool = True
    before_start: Callable[[TrackerRun], None] | None = None


def _tensorboard_kwargs(run: TrackerRun) -> dict[str, Any]:
    # purge_step: readers (TensorBoard, EventAccumulator) drop earlier events at steps >= it, i.e. the steps a
    # killed attempt logged past the checkpoint this attempt restarts from.
    return {"purge_step": run.start_step + 1} if run.saved is not None else {}


def _tensorboard_order(run: TrackerRun) -> None:
    """Readers take a folder's event files in name order, and a file is named events.out.tfevents.<unix
    second>.<host>.<pid>...: a resumed attempt waits (under a second) for the second after the newest file's,
    so that its file is read after the earlier ones and its purge_step applies to them."""
    stamps = [
        int(part)
        for path in (run.folder / "tensorboard").glob("events.out.tfevents.*")
        if (part := path.name.split(".")[3]).isdigit()
    ]
    if stamps:
        time.sleep(max(0.0, max(stamps) + 1 - time.time()))


def _wandb_kwargs(run: TrackerRun) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"name": run.name, "id": run.token, "resume": "allow"}
    if "WANDB_MODE" not in os.environ:
        kwargs["mode"] = "offline"
    if "WANDB_DIR" not in os.environ:
        kwargs["dir"] = str(run.folder)
    return kwargs


def _mlflow_store(run: TrackerRun) -> None:
    """Points MLflow at a file store in the run folder unless MLFLOW_TRACKING_URI names one (the setting holds
    for this process until another training sets its own). MLflow 3 refuses file stores unless
    MLFLOW_ALLOW_FILE_STORE is set; a user's own setting of it is kept."""
    if "MLFLOW_TRACKING_URI" in os.environ:
        return
    import mlflow

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((run.folder / "mlflow").resolve().as_uri())


TRACKERS: Registry[Tracker] = Registry("experiment tracker")
TRACKERS.add(
    "tensorboard",
    Tracker(
        ("tensorboard", "tensorboardX"),
        "tensorboard",
        lambda: "tensorboard",
        _tensorboard_kwargs,
        lambda started, run: "tensorboard",
        takes_config=False,
        before_start=_tensorboard_order,
    ),
)
TRACKERS.add(
    "wandb",
    Tracker(
        ("wandb",),
        "wandb",
        lambda: os.environ.get("WANDB_PROJECT", PROJECT),
        _wandb_kwargs,
        lambda started, run: run.token,
    ),
)
TRACKERS.add(
    "mlflow",
    Tracker(
        ("mlflow",),
        "mlflow",
        lambda: PROJECT,
        lambda run: {"run_name": run.name, "run_id": run.saved},
        lambda started, run: str(started.info.run_id),
        before_start=_mlflow_store,
    ),
)
TRACKERS.add(
    "trackio",
    Tracker(
        ("trackio",),
        "trackio",
        lambda: PROJECT,
        lambda run: {"name": run.name, "resume": "allow", "embed": False},
        lambda started, run: run.name,
    ),
)


def _missing(report_to: str) -> ConfigError:
    package = TRACKERS.get(report_to).package
    return ConfigError(
        f"train.report_to={report_to!r} needs the {package} package, which is not installed: pip install {package}"
    )


def require_tracker(report_to: str) -> None:
    """Checks, without importing it, that the package of tracker `report_to` is installed ("none": nothing to
    check). Raises ConfigError (one line naming the pip package) or UnknownNameError."""
    if report_to == "none":
        return
    if not any(find_spec(module) is not None for module in TRACKERS.get(report_to).modules):
        raise _missing(report_to)


def tracked_paths(report_to: str) -> tuple[str, ...]:
    """What a training with `report_to` writes into its run folder besides log.jsonl and checkpoint/ (the
    paths a job claims): (TRACKING_DIR,) with a tracker, () without."""
    return () if report_to == "none" else (TRACKING_DIR,)


def accelerator_options(report_to: str, run_dir: str | Path) -> dict[str, Any]:
    """Keyword arguments of Accelerator(...) for `report_to`: log_with and project_dir (<run>/tracking, the
    logging folder of trackers that need one); {} for "none"."""
    if report_to == "none":
        return {}
    return {"log_with": report_to, "project_dir": str(Path(run_dir) / TRACKING_DIR)}


def _read_state(path: Path, run_dir: Path) -> dict[str, Any]:
    """tracking/run.json, or a new state (a random token; the run folder's name with it) when there is none."""
    if not path.exists():
        token = secrets.token_hex(6)
        return {"name": f"{run_dir.resolve().name}-{token}", "token": token, "runs": {}}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if not (
            isinstance(state, dict)
            and isinstance(state.get("name"), str)
            and isinstance(state.get("token"), str)
            and isinstance(state.get("runs"), dict)
        ):
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path}: unreadable tracker state; use another --out or --overwrite") from None
    return state


def start_tracking(
    accelerator: Any, report_to: str, run_dir: str | Path, start_step: int, config: Mapping[str, Any], log_path: Path
) -> None:
    """Starts (or resumes) the tracker run of a training on the main process; nothing for "none" or on other
    processes. config: the TrainConfig as a dict (stored, flattened, as a new tracker run's hyperparameters);
    log_path: log.jsonl, already cut to `start_step`: a tracker that did not follow the earlier attempts
    receives its lines first. Raises ConfigError when Accelerate does not offer the tracker."""
    if report_to == "none" or not accelerator.is_main_process:
        return
    if not accelerator.log_with:  # Accelerate drops a tracker it finds unavailable, silently
        raise _missing(report_to)
    tracker = TRACKERS.get(report_to)
    folder = Path(run_dir) / TRACKING_DIR
    folder.mkdir(parents=True, exist_ok=True)
    state_path = folder / STATE_FILE
    state = _read_state(state_path, Path(run_dir))
    saved = state["runs"].get(report_to)
    run = TrackerRun(folder, state["name"], state["token"], saved, start_step)
    if tracker.before_start is not None:
        tracker.before_start(run)
    hparams = flatten(config) if tracker.takes_config and saved is None else None
    accelerator.init_trackers(tracker.project(), config=hparams, init_kwargs={report_to: tracker.init_kwargs(run)})
    state["runs"][report_to] = tracker.run_id(accelerator.get_tracker(report_to, unwrap=True), run)
    atomic_write_json(state_path, state)
    if saved is None and log_path.exists():
        for line in jsonl_lines(log_path.read_text(encoding="utf-8")):  # whole JSON objects: truncate_log kept them
            row = json.loads(line)
            accelerator.log(row, step=int(row["step"]))


def finish_tracking(accelerator: Any) -> None:
    """Closes the trackers of `accelerator` (each tracker's finish(), once). Accelerator.end_training would
    also destroy the process group, which a process that trains several models (a shift run's teacher and
    students) under `accelerate launch` still needs."""
    for tracker in accelerator.trackers:
        tracker.finish()
    accelerator.trackers.clear()


@contextmanager
def tracking(
    accelerator: Any, report_to: str, run_dir: str | Path, start_step: int, config: Mapping[str, Any], log_path: Path
) -> Iterator[None]:
    """start_tracking on entry, finish_tracking on exit (an error or a stopping hook included)."""
    start_tracking(accelerator, report_to, run_dir, start_step, config, log_path)
    try:
        yield
    finally:
        finish_tracking(accelerator)
