"""One training loop for every model rewardsmith trains, on Accelerate: reward models on preference pairs and
in-context models on episodes.

The Trainer is generic over two things:
- a batch plan: micro-batch `b` of the run is a pure function of (seed, b), so a run killed at any point and
  started again resumes from its last checkpoint and ends with the same weights. PairBatchPlan serves
  length-grouped pairs over epochs; the ICRM episode plan (rewardsmith.icrm.train) serves sampled episodes.
- an objective: objective(model, batch, StepInfo) -> LossResult, a thin glue to a pure loss function.

Single process on CPU or one GPU, or many under `accelerate launch` (DDP; FSDP2, also on CPU processes over gloo;
FSDP1 and DeepSpeed ZeRO-1/2/3 on GPUs; configs/accelerate/): the same code; each process takes its slice of every
micro-batch, and gradients are averaged across processes, so the result matches a single process with the same
global batch. A launch whose engine accelerate does not run (FSDP1, or DeepSpeed with several processes, on CPU
processes) is refused, not trained as something else.
Checkpoints are pickle-free state folders (safetensors + JSON), written atomically, holding whole state (full
model and optimiser state, train.sharding) under every engine, so a run resumes exactly under any of them.
After a sharded run trainer.model is a plain module again, with whole weights on every process.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from rewardsmith.config import BATCHES, ModelConfig, TrainConfig, to_dict
from rewardsmith.data.collate import (
    EncodedPair,
    collate_pairs,
    encode_pairs,
    forward_groups,
    length_grouped_batches,
    pad_texts,
    random_batches,
)
from rewardsmith.data.schema import PreferencePair, stable_hash
from rewardsmith.data.templates import encoder_for
from rewardsmith.errors import CheckpointError, ConfigError, first_line
from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.io.processes import Processes, agree, before_group, launched_processes, release_at_exit
from rewardsmith.io.progress import Progress
from rewardsmith.io.state import load_state, save_state
from rewardsmith.models.precision import use_bf16
from rewardsmith.models.reward_model import deterministic_frozen, frozen_features
from rewardsmith.train.cost import sample_batches, training_cost
from rewardsmith.train.debias import debiased
from rewardsmith.train.objectives import Objective, StepInfo, TrainingHooks, build_objective
from rewardsmith.train.sharding import (
    Skeleton,
    check_engine,
    check_requested_engine,
    end_of_run,
    fill_deepspeed_config,
    load_whole_optimizer_state,
    requested_engine,
    run_fsdp2_on_cpu_processes,
    shards_in_place,
    unwrapped,
    whole_model_state,
    whole_optimizer_state,
)
from rewardsmith.train.tracking import accelerator_options, require_tracker, tracking

CHECKPOINT_DIR = "checkpoint"
LOG_FILE = "log.jsonl"
# Fault injection for the resume tests: the process SIGKILLs itself right after this optimiser step.
KILL_AFTER_STEP_ENV = "REWARDSMITH_FAULT_KILL_AFTER_STEP"
# Settings a resumed run must share with the checkpoint it resumes from.
_RESUME_KEYS = (
    "seed",
    "batch_size",
    "grad_accum",
    "epochs",
    "max_steps",
    "loss",
    "lr",
    "head_lr",
    "swap_pairs",
    "debias",
    "batches",
)


@dataclass
class PlannedBatch:
    """One process's share of a micro-batch: model inputs, the number of items (pairs or episodes) and the
    epoch it belongs to (0 for plans without epochs)."""

    tensors: dict[str, torch.Tensor]
    size: int
    epoch: int = 0


class BatchPlan(Protocol):
    """Serves the micro-batches of a run. natural_batches: how many micro-batches `cfg.epochs` passes make
    (None for endless plans such as sampled episodes, which need cfg.max_steps). A plan may also offer
    `texts()`, its distinct texts as model inputs in a fixed order (PairBatchPlan.texts): with it, a frozen,
    dropout-free backbone runs once per text (models.reward_model.frozen_features)."""

    natural_batches: int | None

    def batch(self, index: int, process_index: int = 0, num_processes: int = 1) -> PlannedBatch: ...


def swap_decision(seed: int, epoch: int, index: int) -> bool:
    """Whether pair `index` is presented with sides exchanged in `epoch` (a stable coin flip)."""
    return int(stable_hash(f"swap:{seed}:{epoch}:{index}")[:8], 16) % 2 == 1


def _swap_pair(p: EncodedPair) -> EncodedPair:
    return EncodedPair(p.rejected, p.chosen, 1.0 - p.label, p.index, not p.swapped)


class PairBatchPlan:
    """Micro-batches of encoded pairs, reshuffled each epoch (seed * 7919 + epoch), with a seeded swap coin per
    (pair, epoch). weights: one per pair (served as the batch's "weights") or None.

    batches: "length-grouped" (collate.length_grouped_batches: pairs of similar length together) or "random".
    grouped_forward: each micro-batch also carries "forward_group" (collate.forward_groups), so the model runs
    its texts in groups of similar length (models.reward_model.PooledBackbone.encode); left out where one group
    is best."""

    def __init__(
        self,
        encoded: Sequence[EncodedPair],
        pad_id: int,
        batch_size: int,
        epochs: float,
        seed: int,
        swap_pairs: bool = True,
        weights: Sequence[float] | None = None,
        batches: str = "length-grouped",
        grouped_forward: bool = False,
    ):
        if batches not in BATCHES:
            raise ConfigError(f"train.batches must be one of {', '.join(BATCHES)}, got {batches!r}")
        if not encoded:
            raise ConfigError("no training pairs")
        if weights is not None and len(weights) != len(encoded):
            raise ValueError(f"{len(weights)} weights for {len(encoded)} pairs")
        self.encoded = list(encoded)
        self.weights = None if weights is None else [float(w) for w in weights]
        self.pad_id = pad_id
        self.batch_size = batch_size
        self.seed = seed
        self.swap_pairs = swap_pairs
        self.batches = batches
        self.grouped_forward = grouped_forward
        self.lengths = [p.length for p in self.encoded]
        self.batches_per_epoch = math.ceil(len(self.encoded) / batch_size)
        self.natural_batches: int | None = max(1, math.ceil(epochs * self.batches_per_epoch))
        self._epochs: dict[int, list[list[int]]] = {}

    def _epoch(self, epoch: int) -> list[list[int]]:
        if epoch not in self._epochs:
            seed = self.seed * 7919 + epoch
            if self.batches == "random":
                self._epochs = {epoch: random_batches(len(self.lengths), self.batch_size, seed)}
            else:
                self._epochs = {epoch: length_grouped_batches(self.lengths, self.batch_size, seed)}
        return self._epochs[epoch]

    def texts(self, batch_size: int = 64) -> Iterator[dict[str, torch.Tensor]]:
        """Every distinct text of the plan once, as pad_texts tensors in batches of similar length, in an order
        that depends on the pairs alone (what a frozen-feature cache is filled with: models.reward_model)."""
        distinct = {
            (tuple(t.input_ids), tuple(t.response_mask), tuple(t.token_type_ids)): t
            for p in self.encoded
            for t in (p.chosen, p.rejected)
        }
        ordered = sorted(distinct.values(), key=lambda t: (len(t.input_ids), t.input_ids, t.response_mask))
        for start in range(0, len(ordered), batch_size):
            yield pad_texts(ordered[start : start + batch_size], self.pad_id)

    def batch(self, index: int, process_index: int = 0, num_processes: int = 1) -> PlannedBatch:
        epoch, within = divmod(index, self.batches_per_epoch)
        indices = self._epoch(epoch)[within][process_index::num_processes]
        items = []
        for i in indices:
            p = self.encoded[i]
            items.append(_swap_pair(p) if self.swap_pairs and swap_decision(self.seed, epoch, i) else p)
        tensors = collate_pairs(items, self.pad_id)
        if self.grouped_forward:
            groups = forward_groups(tensors["attention_mask"].sum(dim=1).tolist())
            if len(groups) > 1:
                group = torch.empty(tensors["attention_mask"].shape[0], dtype=torch.long)
                for g, rows in enumerate(groups):
                    group[rows] = g
                tensors["forward_group"] = group
        if self.weights is not None:
            tensors["weights"] = torch.tensor([self.weights[i] for i in indices], dtype=torch.float32)
        return PlannedBatch(tensors, len(items), epoch)


@dataclass
class StepEnd:
    """What an on_step hook sees after each optimiser step."""

    step: int  # optimiser steps done
    total_steps: int
    terms: dict[str, float]


StepHook = Callable[[StepEnd], None]


@dataclass
class TrainResult:
    steps: int
    items_seen: int
    seconds: float
    items_per_second: float
    resumed_from_step: int
    final_terms: dict[str, float] = field(default_factory=dict)


class Trainer:
    """Trains `model` on the micro-batches of `plan` with `objective`. Call fit().

    run_dir receives log.jsonl (one JSON line per optimiser step), checkpoint/ (atomic, removed when the
    run completes) and, with cfg.report_to, tracking/ (rewardsmith.train.tracking: the same lines, live, to
    TensorBoard, W&B, MLflow or trackio; the tracker's package is checked here, before any training). on_step
    hooks run after every optimiser step on the main process; a hook that raises stops the run as a kill
    would (the last checkpoint stays, and fit() on a new Trainer resumes from it).
    """

    def __init__(
        self,
        model: Any,
        plan: BatchPlan,
        cfg: TrainConfig,
        run_dir: str | Path,
        objective: Objective | None = None,
        on_step: Sequence[StepHook] = (),
    ):
        self.model = model
        self.plan = plan
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.objective = objective or build_objective(cfg.loss)
        self.on_step = list(on_step)
        self._result: TrainResult | None = None
        require_tracker(cfg.report_to)
        if plan.natural_batches is None and cfg.max_steps is None:
            raise ConfigError("this training has no epochs: set train.max_steps")
        natural = plan.natural_batches
        total_batches = natural if natural is not None else int(cfg.max_steps or 1) * cfg.grad_accum
        self.total_steps = max(1, int(total_batches) // cfg.grad_accum)
        if cfg.max_steps is not None:
            self.total_steps = min(self.total_steps, cfg.max_steps) if plan.natural_batches else cfg.max_steps
        self.total_batches = self.total_steps * cfg.grad_accum

    # -- optimiser --------------------------------------------------------------------------------------
    def _optimizer(self) -> torch.optim.Optimizer:
        """AdamW with a learning rate per group: the backbone (lr), the heads (head_lr) and each parameter group
        the objective names (TrainingHooks.parameter_groups: a training-only debias head at debias.lr). The fused
        kernel where every parameter's device has one: on CPU it steps MiniLM's 22M parameters several times
        faster than the default multi-tensor loop (benchmarks/results/kernels.json).
        Records the parameter names of each group (self.group_names: what whole optimiser state is keyed by)."""
        own_rates = self.objective.parameter_groups() if isinstance(self.objective, TrainingHooks) else {}
        extra: list[dict[str, Any]] = []
        taken: set[int] = set()
        for prefix, lr in own_rates.items():
            params = [
                p
                for name, p in self.model.named_parameters()
                if name.startswith(prefix) and p.requires_grad and id(p) not in taken
            ]
            taken |= {id(p) for p in params}
            if params:
                extra.append({"params": params, "lr": lr})
        head = [p for p in self.model.head_parameters() if p.requires_grad and id(p) not in taken]
        taken |= {id(p) for p in head}
        body = [p for p in self.model.parameters() if p.requires_grad and id(p) not in taken]
        groups: list[dict[str, Any]] = [{"params": body, "lr": self.cfg.lr}] if body else []
        groups.append({"params": head, "lr": self.cfg.head_lr or self.cfg.lr})
        groups.extend(extra)
        fused = all(p.device.type in ("cpu", "cuda") for g in groups for p in g["params"])
        names = {id(p): name for name, p in self.model.named_parameters()}
        self.group_names = [[names[id(p)] for p in g["params"]] for g in groups]
        return torch.optim.AdamW(groups, weight_decay=self.cfg.weight_decay, fused=fused)

    def _scheduler(self, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
        warmup = int(self.cfg.warmup_ratio * self.total_steps)
        factor = functools.partial(linear_warmup_decay, warmup=warmup, total=self.total_steps)
        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    # -- loop -------------------------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        from accelerate import Accelerator

        cfg = self.cfg
        _reset_single_process_state()
        engine = requested_engine()
        check_requested_engine(engine)
        if launched_processes() > 1:
            before_group()
        gpu = torch.cuda.is_available()
        # DeepSpeed needs cpu=False to start its engine, also on its CPU accelerator (DS_ACCELERATOR=cpu).
        accelerator = Accelerator(
            mixed_precision="bf16" if use_bf16(cfg.bf16, "cuda" if gpu else "cpu") else "no",
            gradient_accumulation_steps=cfg.grad_accum,
            cpu=not gpu and engine != "deepspeed",
            **accelerator_options(cfg.report_to, self.run_dir),
        )
        run_fsdp2_on_cpu_processes(accelerator, engine)
        check_engine(accelerator, engine)
        if accelerator.num_processes > 1:
            release_at_exit()
        fill_deepspeed_config(
            accelerator, math.ceil(self._items_per_batch() / accelerator.num_processes), cfg.max_grad_norm
        )
        self.model.to(accelerator.device)
        compiled = _compile_backbone(self.model, accelerator.num_processes) if cfg.compile else None
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        optimizer = self._optimizer()
        scheduler = self._scheduler(optimizer)
        ckpt = self.run_dir / CHECKPOINT_DIR
        saved = load_state(ckpt) if ckpt.exists() else None
        start_batch = self._restore(saved, scheduler) if saved is not None else 0
        if accelerator.is_main_process and accelerator.device.type == "cpu":
            self._say_cost(start_batch)
        skeleton = Skeleton(self.model) if shards_in_place(accelerator) else None
        # The scheduler is stepped here, once per optimiser step, not prepared: batches are already split
        # across processes, so accelerate's per-process scheduler stepping would shorten the schedule.
        model, optimizer = accelerator.prepare(self.model, optimizer)
        if accelerator.gradient_accumulation_steps != cfg.grad_accum:
            raise ConfigError(
                f"the DeepSpeed config accumulates {accelerator.gradient_accumulation_steps} "
                f"micro-batches, train.grad_accum {cfg.grad_accum}: set gradient_accumulation_steps: "
                "auto in it (the Trainer fills it)"
            )
        if saved is not None:
            self._restore_optimizer(saved, accelerator, model, optimizer)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.run_dir / LOG_FILE
        start_step = start_batch // cfg.grad_accum
        if accelerator.is_main_process:
            truncate_log(log_path, start_step)
        model.train()
        # A frozen backbone without dropout gives each text one representation: run it once per text, not once
        # an epoch (a linear probe's later epochs train the head alone; one process, where the cache is whole).
        frozen = accelerator.num_processes == 1 and deterministic_frozen(self.model)
        texts = getattr(self.plan, "texts", None) if frozen else None
        t0 = time.perf_counter()
        saved_at = time.monotonic()
        procs = Processes(accelerator.process_index, accelerator.num_processes, accelerator.device)
        seen = 0
        terms: dict[str, float] = {}
        progress = Progress(
            "train",
            self.total_steps,
            enabled=cfg.progress and accelerator.is_main_process,
            completed=start_step,
            unit="steps",
        )
        with (
            progress,
            log_path.open("a", encoding="utf-8") as log,
            tracking(accelerator, cfg.report_to, self.run_dir, start_step, to_dict(cfg), log_path),
            frozen_features(self.model, frozen, texts() if texts is not None else ()),
        ):
            for b in range(start_batch, self.total_batches):
                planned = self.plan.batch(b, accelerator.process_index, accelerator.num_processes)
                batch = {k: v.to(accelerator.device) for k, v in planned.tensors.items()}
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
                seen += planned.size
                terms = {k: round(v, 6) for k, v in result.terms.items()}
                if (b + 1) % cfg.grad_accum:
                    continue
                done = step + 1
                if accelerator.is_main_process:
                    elapsed = time.perf_counter() - t0
                    _write_step(
                        log,
                        accelerator,
                        {
                            "step": done,
                            "epoch": planned.epoch,
                            "lr": scheduler.get_last_lr()[0],
                            "items_per_s": round(seen / max(elapsed, 1e-9), 3),
                            **terms,
                        },
                    )
                    progress.update(done, f"loss {terms.get('total', terms.get('bt', float('nan'))):.3f}")
                if self._checkpoint_due(done, saved_at, procs):
                    self._save(accelerator, model, optimizer, scheduler, b + 1)
                    saved_at = time.monotonic()
                if accelerator.is_main_process:
                    for hook in self.on_step:
                        hook(StepEnd(done, self.total_steps, terms))
                if os.environ.get(KILL_AFTER_STEP_ENV) == str(done):
                    os.kill(os.getpid(), signal.SIGKILL)
        accelerator.wait_for_everyone()
        seconds = time.perf_counter() - t0
        if compiled is not None:
            compiled._compiled_call_impl = None  # scoring after the run calls the module as it was
        if skeleton is not None:  # a plain module with whole weights on every process (scoring, saving)
            self.model = skeleton.build(whole_model_state(accelerator, model, everywhere=True), accelerator.device)
        else:
            self.model = unwrapped(accelerator, model)
        end_of_run(accelerator)
        if accelerator.is_main_process and ckpt.exists():
            shutil.rmtree(ckpt)  # the run is complete: the saved model replaces the checkpoint
        self._result = TrainResult(
            self.total_steps,
            seen * accelerator.num_processes,
            seconds,
            seen * accelerator.num_processes / max(seconds, 1e-9),
            start_step,
            terms,
        )
        return self._result

    @property
    def result(self) -> TrainResult:
        """What fit() returned."""
        if self._result is None:
            raise RuntimeError("Trainer.fit() has not run")
        return self._result

    def _say_cost(self, start_batch: int) -> None:
        """One line on stderr, before the first step, with what the rest of the run will cost on the CPU (time,
        memory, checkpoints; train.cost) when the model is large or the run long."""
        cfg = self.cfg
        cost = training_cost(
            self.model,
            sample_batches(self.plan, start_batch, self.total_batches),
            cfg.grad_accum,
            self.total_steps - start_batch // cfg.grad_accum,
            cfg.bf16,
            checkpoints=bool(cfg.checkpoint_every)
            and (self.total_steps > cfg.checkpoint_every or cfg.checkpoint_minutes > 0),
        )
        if cost is not None and cost.worth_saying():
            print(cost.line(), file=sys.stderr, flush=True)

    # -- checkpoints ------------------------------------------------------------------------------------
    def _checkpoint_due(self, done: int, saved_at: float, procs: Processes) -> bool:
        """Whether to checkpoint after optimiser step `done`: every `checkpoint_every` steps, or once
        `checkpoint_minutes` have passed since the last checkpoint (or the start), as the main process's clock
        says (every process gets its answer, so all save together); never after the last step or with
        `checkpoint_every` 0."""
        cfg = self.cfg
        if not cfg.checkpoint_every or done >= self.total_steps:
            return False
        if done % cfg.checkpoint_every == 0:
            return True
        if not cfg.checkpoint_minutes:
            return False
        return bool(agree(int(time.monotonic() - saved_at >= 60 * cfg.checkpoint_minutes), procs))

    def _items_per_batch(self) -> int:
        """Items (pairs or episodes) in one micro-batch of the plan, all processes together."""
        return int(getattr(self.plan, "batch_size", None) or self.cfg.batch_size)

    def _save(self, accelerator: Any, model: Any, optimizer: Any, scheduler: Any, next_batch: int) -> None:
        """Writes whole state (train.sharding) from the main process; every process takes part in gathering it."""
        accelerator.wait_for_everyone()
        model_state = whole_model_state(accelerator, model, everywhere=False)
        optimizer_state = whole_optimizer_state(accelerator, model, optimizer, self.group_names)
        if not accelerator.is_main_process:
            accelerator.wait_for_everyone()
            return
        rng: dict[str, Any] = {
            "torch": torch.get_rng_state(),
            "python": random.getstate(),
            "numpy": np.random.get_state(),
        }
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        state = {
            "next_batch": next_batch,
            "model": model_state,
            "optimizer": optimizer_state,
            "scheduler": scheduler.state_dict(),
            "rng": rng,
            "train_config": to_dict(self.cfg),
            "objective": _objective_state(self.objective),
        }
        save_state(self.run_dir / CHECKPOINT_DIR, state)
        # No process runs on (and may be killed) before the checkpoint of this step is complete on disk.
        accelerator.wait_for_everyone()

    def _restore_optimizer(self, state: Any, accelerator: Any, model: Any, optimizer: Any) -> None:
        """Loads the checkpoint's whole optimiser state into the prepared optimiser (each process its shard)."""
        try:
            load_whole_optimizer_state(
                accelerator, model, optimizer, state["optimizer"], state["model"], self.group_names
            )
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(
                f"{self.run_dir / CHECKPOINT_DIR}: its optimiser state does not fit this run ({first_line(exc)[:200]})"
            ) from None

    def _restore(self, state: Any, scheduler: Any) -> int:
        """Restores the model weights (before prepare(): every engine shards what the module holds), the
        scheduler, the random generators and the objective's state; returns the micro-batch to go on from."""
        where = self.run_dir / CHECKPOINT_DIR
        try:
            saved, now = state["train_config"], to_dict(self.cfg)
            for key in _RESUME_KEYS:
                if key in saved and saved[key] != now[key]:
                    raise CheckpointError(
                        f"{where}: saved with {key}={saved[key]!r}, now {now[key]!r}; "
                        "use another --out or the same settings"
                    )
            self.model.load_state_dict(state["model"])
            if not all(isinstance(name, str) for g in state["optimizer"]["param_groups"] for name in g["params"]):
                raise ValueError("optimiser state keyed by position (an older rewardsmith), not by parameter name")
            scheduler.load_state_dict(state["scheduler"])
            rng = state["rng"]
            torch.set_rng_state(rng["torch"])
            random.setstate(rng["python"])
            np.random.set_state(rng["numpy"])
            if "cuda" in rng and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(rng["cuda"])
            if state.get("objective") is not None and hasattr(self.objective, "load_state_dict"):
                self.objective.load_state_dict(state["objective"])
            next_batch = int(state["next_batch"])
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            detail = first_line(exc)
            raise CheckpointError(f"{where}: does not fit this model or run ({detail[:200]})") from None
        if not 0 <= next_batch <= self.total_batches:
            raise CheckpointError(
                f"{where}: resumes at micro-batch {next_batch}, beyond this run's {self.total_batches}"
            )
        return next_batch


def train_pairs(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[PreferencePair],
    cfg: TrainConfig,
    model_cfg: ModelConfig,
    run_dir: str | Path,
    objective: Objective | None = None,
    encoded: list[EncodedPair] | None = None,
    on_step: Sequence[StepHook] = (),
) -> Trainer:
    """Trains `model` on preference pairs (tokenised here unless `encoded` is given) and returns the
    finished Trainer (trainer.model is the trained model).

    cfg.debias selects a length-debiasing scheme (rewardsmith.train.debias): the objective is wrapped, and its
    training hooks weight the pairs, attach a training-only head for the run and remove it after."""
    if encoded is None:
        encoded = encode_pairs(encoder_for(tokenizer, model_cfg), pairs)
    objective = debiased(objective or build_objective(cfg.loss), cfg.debias)
    hooks = objective if isinstance(objective, TrainingHooks) else TrainingHooks()
    plan = PairBatchPlan(
        encoded,
        int(tokenizer.pad_token_id),
        cfg.batch_size,
        cfg.epochs,
        cfg.seed,
        cfg.swap_pairs,
        hooks.pair_weights(encoded),
        cfg.batches,
        cfg.forward_groups,
    )
    hooks.prepare(model, encoded)
    trainer = Trainer(model, plan, cfg, run_dir, objective, on_step)
    try:
        trainer.fit()
    finally:
        hooks.finish(trainer.model)
    return trainer


def linear_warmup_decay(step: int, *, warmup: int, total: int) -> float:
    """The learning rate's factor at `step`: from 0 up to 1 over the first `warmup` steps, then down to 0 at step
    `total`, straight lines both (transformers' get_linear_schedule_with_warmup, tests/unit/test_trainer.py; its
    module imports the Trainer's utilities and PEFT, a fifth of a second of each run's start)."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def _compile_backbone(model: Any, processes: int) -> Any:
    """torch.compile (dynamic shapes) of the model's backbone in place: parameter names, and so checkpoints and
    saved models, stay as they are. Returns the compiled module."""
    if processes > 1:
        raise ConfigError("train.compile runs in one process; leave it off under accelerate launch")
    target = getattr(model, "backbone", model)
    target.compile(dynamic=True)
    return target


def _write_step(log: Any, accelerator: Any, values: dict[str, Any]) -> None:
    """The one place a step's values are written: a log.jsonl line, and the same dict to the experiment
    tracker at its step (Accelerator.log: main process only; nothing without a tracker)."""
    log.write(json.dumps(values) + "\n")
    log.flush()
    accelerator.log(values, step=values["step"])


def _reset_single_process_state() -> None:
    """Lets one process run several trainings with different precisions (a teacher in bf16, a student
    in fp32): accelerate keeps a process-wide state that refuses a second mixed_precision setting. Under a
    launcher (WORLD_SIZE > 1) the distributed state is kept as it is; it is read from the environment, since
    creating a PartialState here would fix the process group before the Accelerator (cpu=True) can join it."""
    from accelerate.state import AcceleratorState

    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        AcceleratorState._reset_state(reset_partial_state=True)


def _objective_state(objective: Objective) -> Any:
    return objective.state_dict() if hasattr(objective, "state_dict") else None


def truncate_log(path: Path, keep_steps: int) -> None:
    """Drops log lines past the checkpoint a resumed run restarts from (no duplicate steps). Reading stops at
    the first line that is not a JSON object (a torn last line, or a file that is not a rewardsmith log)."""
    if not path.exists():
        return
    kept = []
    for line in jsonl_lines(path.read_text(encoding="utf-8", errors="replace")):
        try:
            row = json.loads(line)
        except ValueError:
            break
        if not isinstance(row, dict):
            break
        if int(row.get("step", 0)) <= keep_steps:
            kept.append(line)
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
