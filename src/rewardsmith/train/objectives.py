"""Training objectives: glue from a model's outputs on a batch to the pure loss functions.

An objective is built once per run from the registry (name = TrainConfig.loss, or a method's objective) and
called every step as objective(model, batch, StepInfo) -> LossResult with "total" among its terms.
Objectives with state (for example a rolling buffer) keep it in the object, update it explicitly and expose
state_dict / load_state_dict so checkpoints carry it. A factory takes exactly its own options: a misspelt
option is a one-line ConfigError, never silently ignored.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rewardsmith.errors import ConfigError
from rewardsmith.losses.base import LossResult
from rewardsmith.losses.bt import bradley_terry_loss
from rewardsmith.registry import Registry


@dataclass
class StepInfo:
    step: int  # optimiser steps done so far (0-based index of the current step)
    total_steps: int


class Objective(Protocol):
    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult: ...


class TrainingHooks:
    """What an objective may do around a run of pair training besides its loss (train_pairs calls these for an
    objective that subclasses TrainingHooks; the defaults do nothing): weight the pairs, prepare the model before
    the Trainer is built (attach and prefit a training-only head), restore it after the run, and give parameters
    under a name prefix their own learning rate. rewardsmith.train.debias is the one user today."""

    def pair_weights(self, encoded: Sequence[Any]) -> list[float] | None:
        """Per-pair loss weights (mean 1), or None for none."""
        return None

    def prepare(self, model: Any, encoded: Sequence[Any]) -> None:
        """Called once before the Trainer is built (its optimiser sees what this attaches)."""

    def finish(self, model: Any) -> None:
        """Called once after the run, also when it fails."""

    def parameter_groups(self) -> dict[str, float]:
        """Parameter-name prefix -> learning rate, for parameters trained at their own rate."""
        return {}


ObjectiveFactory = Callable[..., Objective]
OBJECTIVES: Registry[ObjectiveFactory] = Registry("objective")


def split_rewards(rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(2B,) rewards from collate_pairs -> chosen (B,), rejected (B,)."""
    half = rewards.shape[0] // 2
    return rewards[:half], rewards[half:]


def with_total(result: LossResult) -> LossResult:
    """The result with its total also among the logged terms."""
    result.terms["total"] = float(result.total.detach())
    return result


class BradleyTerryObjective:
    """Soft-label Bradley-Terry on the batch's labels (gold labels are 1, teacher labels in [0, 1])."""

    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        chosen, rejected = split_rewards(model(batch).rewards)
        return with_total(bradley_terry_loss(chosen, rejected, batch["labels"], batch.get("weights")))


OBJECTIVES.add("bt", BradleyTerryObjective)


def build_objective(name: str, **options: Any) -> Objective:
    """The registered objective `name` built with `options`; an option it does not take is a ConfigError."""
    factory = OBJECTIVES.get(name)
    params = inspect.signature(factory).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        takes = ", ".join(params) or "no options"
        raise ConfigError(f"objective {name!r} has no option {unknown[0]!r} (takes: {takes})")
    return factory(**options)
