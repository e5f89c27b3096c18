"""The processes one command runs in: one, or several started by a launcher (`accelerate launch`, torchrun,
mpirun) that each run the same command. Which process this is, how many there are, which device it owns, and
the few collectives the commands need (agreeing on a flag, gathering rows of scores), all through accelerate's
PartialState and torch.distributed; nothing here starts processes or talks to them any other way.

A command that is not launched (WORLD_SIZE unset or 1) never imports torch.distributed and sees one process.
Importing this module does nothing.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rewardsmith.errors import ConfigError

# Launchers name the number of processes in one of these (torchrun / accelerate: WORLD_SIZE; MPI launchers:
# the others), read the way accelerate reads them.
_WORLD_SIZE_VARS = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launched_processes() -> int:
    """How many processes the launcher started for this command (1 when it was not launched)."""
    for name in _WORLD_SIZE_VARS:
        value = os.environ.get(name, "")
        if value.strip().isdigit():
            return max(1, int(value))
    return 1


@dataclass(frozen=True)
class Processes:
    """This process's place among the processes of a launch: index (0 is the main process), count, and the
    device it computes on (None when not launched: callers keep their own choice)."""

    index: int = 0
    count: int = 1
    device: Any = None

    @property
    def main(self) -> bool:
        return self.index == 0

    @property
    def several(self) -> bool:
        return self.count > 1


def processes() -> Processes:
    """The Processes of this command. Under a launcher this joins (or reads) accelerate's PartialState, which
    sets up the process group: gloo between CPU processes, NCCL between GPUs (one per process, by LOCAL_RANK),
    with the same choice the Trainer's Accelerator makes, so scoring before or after training shares it.

    ConfigError when accelerate counts fewer processes than were launched (it does for DeepSpeed on CPU
    processes, where every process would take itself for the only one)."""
    launched = launched_processes()
    if launched <= 1:
        return Processes()
    import torch
    from accelerate import PartialState

    before_group()
    state = PartialState(cpu=not torch.cuda.is_available())
    release_at_exit()
    if state.num_processes != launched:
        raise ConfigError(
            f"the launcher started {launched} processes but accelerate {_accelerate_version()} counts "
            f"{state.num_processes} ({state.distributed_type}); every process would take itself for "
            "the only one. On CPU processes launch with `accelerate launch --multi_gpu "
            "--num_processes N` (gloo); DeepSpeed with several processes and FSDP1 need GPUs"
        )
    return Processes(state.process_index, state.num_processes, state.device)


_release_registered = False


def before_group() -> None:
    """Readies this process for joining a process group; call it before anything creates one (PartialState,
    Accelerator). It imports what accelerate and torch import on first use once a group exists: torch._dynamo
    (DistributedDataParallel imports it when it wraps a model) and DeepSpeed where it is installed (accelerate's
    unwrap_model imports it). Either, imported while a Gloo group exists, keeps that group alive, so
    destroy_process_group leaves its worker threads running into the interpreter's teardown, which aborts the
    process now and then (SIGABRT, "terminate called without an active exception") and fails a launch whose
    work is done. Imported before, the group ends when it is destroyed (tests/integration/test_distributed.py)."""
    import torch._dynamo  # noqa: F401

    import_deepspeed()


class _DeepSpeedToStderr(logging.Filter):
    """Sends each record of DeepSpeed's logger to stderr (whatever sys.stderr is then), but those of its accelerator
    detection, and keeps it from the logger's own handler, which DeepSpeed points at stdout."""

    formatter = logging.Formatter("[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s")

    def filter(self, record: logging.LogRecord) -> bool:
        # "Setting accelerator to CPU. If you have GPU ...": said on every import without a GPU, about a choice
        # rewardsmith makes itself (its device); stderr keeps to errors, progress and DeepSpeed's own warnings.
        if record.filename != "real_accelerator.py":
            sys.stderr.write(self.formatter.format(record) + "\n")
        return False


def deepspeed_log_to_stderr() -> None:
    """Keeps DeepSpeed's log off stdout, which holds only rewardsmith's own output: its logger ("DeepSpeed")
    writes to stdout, and importing it on a machine without an accelerator logs "[WARNING] ... Setting
    accelerator to CPU". accelerate and transformers import it on first use (unwrap_model, save_pretrained), so
    the command line calls this once at start; the filter it adds to the logger (which DeepSpeed takes over
    when imported, keeping its filters) sends its records to stderr instead, the accelerator detection's
    dropped. Imports nothing."""
    log = logging.getLogger("DeepSpeed")
    if not any(isinstance(f, _DeepSpeedToStderr) for f in log.filters):
        log.addFilter(_DeepSpeedToStderr())


def import_deepspeed() -> bool:
    """Imports DeepSpeed where it is installed (returns whether it is), its log kept off stdout
    (deepspeed_log_to_stderr)."""
    from accelerate.utils import is_deepspeed_available

    deepspeed_log_to_stderr()
    if not is_deepspeed_available():
        return False
    import deepspeed  # noqa: F401

    return True


@contextmanager
def no_deepspeed_probe() -> Iterator[None]:
    """Within this block accelerate's unwrap (accelerator.unwrap_model, and transformers' save_pretrained, which
    calls it) does not import DeepSpeed in a process that has not. It imports DeepSpeed wherever it is installed,
    only to test whether the model is a DeepSpeed engine: 2 s of a short training run (import and save,
    benchmarks/bench_train_process.py). No model can be an engine before DeepSpeed is imported, so there the test
    is answered "no" without the import; in a process that has imported it (a DeepSpeed launch), nothing changes."""
    from accelerate.utils import other

    probe = getattr(other, "is_deepspeed_available", None)
    if "deepspeed" in sys.modules or probe is None:
        yield
        return
    other.is_deepspeed_available = lambda: False
    try:
        yield
    finally:
        other.is_deepspeed_available = probe


def release_at_exit() -> None:
    """Has the process group destroyed when this process exits, while the interpreter is still whole. Left to
    the interpreter's teardown, Gloo's worker threads can outlive it and abort a process whose work is done
    (SIGABRT, "terminate called without an active exception"), which fails the whole launch. Registered once;
    every command that joins a process group calls it."""
    global _release_registered
    if not _release_registered:
        atexit.register(release)
        _release_registered = True


def release() -> None:
    """Destroys this process's process group, if one is up (a no-op otherwise, and when torch.distributed was
    never imported)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        _drop_device_meshes()
        dist.destroy_process_group()


def _drop_device_meshes() -> None:
    """Lets go of the device meshes torch.distributed.tensor keeps in its caches, where it was imported (FSDP2
    holds parameters as DTensors). A cached DTensorSpec or redistribution plan holds its DeviceMesh, the mesh
    holds the process group, and a group still held when it is destroyed keeps its Gloo threads running into the
    interpreter's teardown (see release_at_exit). The caches are torch 2.13's; one missing from another torch is
    skipped (tests/integration/test_sharded_training.py checks that no Gloo thread is left)."""
    if "torch.distributed.tensor" not in sys.modules:
        return
    import gc

    from torch.distributed.tensor import _collective_utils, _redistribute, debug

    for owner, path in (
        (debug, "_clear_sharding_prop_cache"),
        (_redistribute, "clear_redistribute_planner_cache"),
        (_redistribute, "_gen_transform_infos.cache_clear"),
        (_collective_utils, "MeshTopoInfo.build_from_mesh.cache_clear"),
    ):
        clear: Any = owner
        for name in path.split("."):
            clear = getattr(clear, name, None)
        if callable(clear):
            clear()
    gc.collect()  # the module, optimiser and meshes of a finished run may sit in reference cycles


def _accelerate_version() -> str:
    from importlib.metadata import version

    return version("accelerate")


def agree(value: int, procs: Processes) -> int:
    """The main process's `value`, on every process (a broadcast of one integer; every process must call it)."""
    if not procs.several:
        return value
    import torch
    import torch.distributed as dist

    flag = torch.tensor([value], dtype=torch.int64, device=procs.device)
    dist.broadcast(flag, src=0)
    return int(flag.item())


def gather_rows(rows: Any, procs: Processes) -> list[Any]:
    """Every process's `rows` (a float32 tensor (n_p, ...) on the CPU; n_p may differ between processes, the
    trailing shape may not), in process order: [rows of process 0, rows of process 1, ...] as CPU tensors,
    on every process. Two all_gathers: the row counts and shapes, then the rows padded to the longest."""
    import torch

    if not procs.several:
        return [rows]
    if rows.dim() > 5:
        raise ValueError(f"gather_rows takes at most 4 trailing dimensions, got shape {tuple(rows.shape)}")
    header = torch.full((6,), -1, dtype=torch.int64)
    header[0], header[1] = rows.shape[0], rows.dim() - 1
    header[2 : 2 + rows.dim() - 1] = torch.tensor(rows.shape[1:], dtype=torch.int64)
    headers = _all_gather(header.to(procs.device), procs)
    shapes = {tuple(int(x) for x in h[2 : 2 + int(h[1])]) for h in headers if int(h[0]) > 0}
    if len(shapes) > 1:
        raise RuntimeError(f"processes computed rows of different shapes {sorted(shapes)}")
    trailing = shapes.pop() if shapes else tuple(rows.shape[1:])
    longest = max(int(h[0]) for h in headers)
    padded = torch.zeros((longest, *trailing), dtype=torch.float32)
    if rows.shape[0]:
        padded[: rows.shape[0]] = rows.reshape(rows.shape[0], *trailing)
    gathered = _all_gather(padded.to(procs.device), procs)
    return [g[: int(h[0])].cpu() for g, h in zip(gathered, headers, strict=True)]


def same_on_every_process(fingerprint: list[int], procs: Processes) -> bool:
    """Whether every process holds the same small integer fingerprint (one all_gather)."""
    if not procs.several:
        return True
    import torch

    mine = torch.tensor(fingerprint, dtype=torch.int64)
    return all(torch.equal(other.cpu(), mine) for other in _all_gather(mine.to(procs.device), procs))


def _all_gather(tensor: Any, procs: Processes) -> list[Any]:
    import torch
    import torch.distributed as dist

    out = [torch.empty_like(tensor) for _ in range(procs.count)]
    dist.all_gather(out, tensor.contiguous())
    return out
