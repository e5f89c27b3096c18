"""One training loop for every reward model in rewardsmith, on Accelerate.

Single process on CPU or one GPU, or many under `accelerate launch` (DDP, FSDP, DeepSpeed): the same
code. Data order is a pure function of (seed, epoch), so a run killed at any point and started again with
the same arguments resumes from its last checkpoint and ends with the same weights.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rewardsmith.config import ModelConfig, TrainConfig, to_dict
from rewardsmith.data.collate import EncodedPair, PairEncoder, collate_pairs, encode_pairs, length_grouped_batches
from rewardsmith.data.schema import PreferencePair, stable_hash
from rewardsmith.errors import CheckpointError, ConfigError
from rewardsmith.models.reward_model import RewardModel
from rewardsmith.train.checkpoint import load_checkpoint, save_checkpoint
from rewardsmith.train.objectives import Objective, StepInfo, build_objective

CHECKPOINT_FILE = "checkpoint.pt"
# Fault injection for the resume tests: the process SIGKILLs itself right after this optimiser step.
KILL_AFTER_STEP_ENV = "REWARDSMITH_FAULT_KILL_AFTER_STEP"


@dataclass
class TrainResult:
    steps: int
    pairs_seen: int
    seconds: float
    pairs_per_second: float
    resumed_from_step: int
    final_terms: dict[str, float] = field(default_factory=dict)


def swap_decision(seed: int, epoch: int, index: int) -> bool:
    """Whether pair `index` is presented with sides exchanged in `epoch` (a stable coin flip)."""
    return int(stable_hash(f"swap:{seed}:{epoch}:{index}")[:8], 16) % 2 == 1


def _swap_pair(p: EncodedPair) -> EncodedPair:
    return EncodedPair(p.rejected, p.chosen, 1.0 - p.label, p.index, not p.swapped)


class Trainer:
    """Trains `model` on preference pairs with a registered objective.

    run_dir receives log.jsonl (one JSON line per optimiser step) and checkpoint.pt (atomic). Call fit().
    """

    def __init__(self, model: RewardModel, tokenizer: Any, pairs: Sequence[PreferencePair], cfg: TrainConfig,
                 model_cfg: ModelConfig, run_dir: str | Path, objective: Objective | None = None,
                 encoded: list[EncodedPair] | None = None):
        if not pairs and encoded is None:
            raise ConfigError("no training pairs")
        if cfg.batch_size < 1 or cfg.grad_accum < 1 or cfg.epochs <= 0:
            raise ConfigError("batch_size and grad_accum must be >= 1 and epochs > 0")
        self.model = model
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.model_cfg = model_cfg
        self.run_dir = Path(run_dir)
        self.objective = objective or build_objective(cfg.loss)
        if encoded is None:
            encoder = PairEncoder(tokenizer, model_cfg.max_length, model_cfg.min_prompt_tokens)
            encoded = encode_pairs(encoder, pairs)
        self.encoded = encoded
        self.lengths = [p.length for p in encoded]
        self.pad_id = int(tokenizer.pad_token_id)
        self.batches_per_epoch = math.ceil(len(encoded) / cfg.batch_size)
        total_batches = math.ceil(cfg.epochs * self.batches_per_epoch)
        self.total_steps = max(1, total_batches // cfg.grad_accum)
        if cfg.max_steps is not None:
            self.total_steps = min(self.total_steps, cfg.max_steps)
        self.total_batches = self.total_steps * cfg.grad_accum

    # -- schedule -------------------------------------------------------------------------------------
    def batch_plan(self, process_index: int = 0, num_processes: int = 1) -> list[tuple[int, list[int]]]:
        """(epoch, pair indices) for every micro-batch of the run, in order; each process takes its slice."""
        plan: list[tuple[int, list[int]]] = []
        epoch = 0
        while len(plan) < self.total_batches:
            for batch in length_grouped_batches(self.lengths, self.cfg.batch_size, seed=self.cfg.seed * 7919 + epoch):
                plan.append((epoch, batch))
                if len(plan) == self.total_batches:
                    break
            epoch += 1
        if num_processes > 1:
            plan = [(e, b[process_index::num_processes]) for e, b in plan]
        return plan

    def _make_batch(self, epoch: int, indices: list[int]) -> dict[str, torch.Tensor]:
        items = []
        for i in indices:
            p = self.encoded[i]
            items.append(_swap_pair(p) if self.cfg.swap_pairs and swap_decision(self.cfg.seed, epoch, i) else p)
        return collate_pairs(items, self.pad_id)

    def _optimizer(self) -> torch.optim.Optimizer:
        head_params = [p for p in self.model.head.parameters() if p.requires_grad]
        head_ids = {id(p) for p in head_params}
        body = [p for p in self.model.parameters() if p.requires_grad and id(p) not in head_ids]
        groups = [{"params": body, "lr": self.cfg.lr}] if body else []
        groups.append({"params": head_params, "lr": self.cfg.head_lr or self.cfg.lr})
        return torch.optim.AdamW(groups, weight_decay=self.cfg.weight_decay)

    def _scheduler(self, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
        warmup = int(self.cfg.warmup_ratio * self.total_steps)
        total = self.total_steps

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / (warmup + 1)
            return max(0.0, (total - step) / max(1, total - warmup))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    # -- loop -----------------------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        from accelerate import Accelerator

        cfg = self.cfg
        _reset_single_process_state()
        accelerator = Accelerator(mixed_precision="bf16" if cfg.bf16 else "no",
                                  gradient_accumulation_steps=cfg.grad_accum,
                                  cpu=not torch.cuda.is_available())
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        optimizer = self._optimizer()
        scheduler = self._scheduler(optimizer)
        ckpt_path = self.run_dir / CHECKPOINT_FILE
        start_batch = 0
        if ckpt_path.exists():
            start_batch = self._restore(load_checkpoint(ckpt_path), optimizer, scheduler)
        # The scheduler is stepped here, once per optimiser step, not prepared: batches are already split
        # across processes, so accelerate's per-process scheduler stepping would shorten the schedule.
        model, optimizer = accelerator.prepare(self.model, optimizer)
        plan = self.batch_plan(accelerator.process_index, accelerator.num_processes)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.run_dir / "log.jsonl"
        truncate_log(log_path, start_batch // cfg.grad_accum)
        model.train()
        start_step = start_batch // cfg.grad_accum
        t0 = time.perf_counter()
        pairs_seen = 0
        terms: dict[str, float] = {}
        progress = progress_bar(cfg.progress and accelerator.is_main_process, self.total_steps, start_step)
        with progress as bar, log_path.open("a") as log:
            task = bar.add_task("train", total=self.total_steps, completed=start_step) if bar else None
            for b in range(start_batch, self.total_batches):
                epoch, indices = plan[b]
                batch = {k: v.to(accelerator.device) for k, v in self._make_batch(epoch, indices).items()}
                step = b // cfg.grad_accum
                with accelerator.accumulate(model):
                    result = self.objective(model, batch, StepInfo(step, self.total_steps))
                    accelerator.backward(result.total)
                    if accelerator.sync_gradients and cfg.max_grad_norm > 0:
                        accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer.step()
                    if accelerator.sync_gradients:
                        scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                pairs_seen += len(indices)
                terms = {k: round(v, 6) for k, v in result.terms.items()}
                if (b + 1) % cfg.grad_accum:
                    continue
                done = step + 1
                if accelerator.is_main_process:
                    elapsed = time.perf_counter() - t0
                    log.write(json.dumps({"step": done, "epoch": epoch, "lr": scheduler.get_last_lr()[0],
                                          "pairs_per_s": round(pairs_seen / max(elapsed, 1e-9), 3), **terms}) + "\n")
                    log.flush()
                    if bar is not None and task is not None:
                        loss = terms.get("total", terms.get("bt", 0.0))
                        bar.update(task, completed=done, description=f"train loss {loss:.3f}")
                if cfg.checkpoint_every and done % cfg.checkpoint_every == 0 and done < self.total_steps:
                    self._save(accelerator, model, optimizer, scheduler, b + 1)
                if os.environ.get(KILL_AFTER_STEP_ENV) == str(done):
                    os.kill(os.getpid(), signal.SIGKILL)
        accelerator.wait_for_everyone()
        seconds = time.perf_counter() - t0
        self.model = accelerator.unwrap_model(model)
        if accelerator.is_main_process:
            ckpt_path.unlink(missing_ok=True)  # the run is complete: the saved model replaces the checkpoint
        return TrainResult(self.total_steps, pairs_seen, seconds, pairs_seen / max(seconds, 1e-9),
                           start_step, terms)

    def _save(self, accelerator: Any, model: Any, optimizer: Any, scheduler: Any, next_batch: int) -> None:
        accelerator.wait_for_everyone()
        if not accelerator.is_main_process:
            return
        state = {"next_batch": next_batch, "model": accelerator.unwrap_model(model).state_dict(),
                 "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                 "torch_rng": torch.get_rng_state(), "python_rng": random.getstate(),
                 "train_config": to_dict(self.cfg), "objective_state": _objective_state(self.objective)}
        save_checkpoint(self.run_dir / CHECKPOINT_FILE, state)

    def _restore(self, state: dict[str, Any], optimizer: Any, scheduler: Any) -> int:
        saved = state.get("train_config", {})
        for key in ("seed", "batch_size", "grad_accum", "epochs", "loss", "lr"):
            if key in saved and saved[key] != getattr(self.cfg, key):
                raise CheckpointError(f"{self.run_dir / CHECKPOINT_FILE}: saved with {key}={saved[key]!r}, "
                                      f"now {getattr(self.cfg, key)!r}; use a new --out or the same settings")
        self.model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        if state.get("objective_state") is not None and hasattr(self.objective, "load_state_dict"):
            self.objective.load_state_dict(state["objective_state"])
        return int(state["next_batch"])


def _reset_single_process_state() -> None:
    """Lets one process run several trainings with different precisions (a teacher in bf16, a student
    in fp32): accelerate keeps a process-wide state that refuses a second mixed_precision setting. Under
    `accelerate launch` (several processes) the launcher's state is kept as it is."""
    from accelerate.state import AcceleratorState, PartialState

    if PartialState().num_processes == 1:
        AcceleratorState._reset_state(reset_partial_state=True)


def _objective_state(objective: Objective) -> Any:
    return objective.state_dict() if hasattr(objective, "state_dict") else None


def truncate_log(path: Path, keep_steps: int) -> None:
    """Drops log lines past the checkpoint a resumed run restarts from (no duplicate steps)."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line and json.loads(line).get("step", 0) <= keep_steps]
    path.write_text("".join(line + "\n" for line in kept))


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def progress_bar(enabled: bool, total: int, done: int) -> Any:
    """A rich progress context (or a no-op one when disabled); callers add a task of `total` steps."""
    if not enabled:
        return _NoProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    transient=False)
