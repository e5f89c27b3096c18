"""Training objectives: glue from a model's outputs on a batch to the pure loss functions.

An objective is built once per run from the registry (name = TrainConfig.loss) and called every step.
Objectives with state (for example a rolling buffer) keep it in the object and update it explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rewardsmith.losses.base import LossResult
from rewardsmith.losses.bt import bradley_terry_loss
from rewardsmith.models.reward_model import RewardModel
from rewardsmith.registry import Registry


@dataclass
class StepInfo:
    step: int          # optimiser steps done so far (0-based index of the current step)
    total_steps: int


class Objective(Protocol):
    def __call__(self, model: RewardModel, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult: ...


ObjectiveFactory = Callable[..., Objective]
OBJECTIVES: Registry[ObjectiveFactory] = Registry("loss")


def split_rewards(rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(2B,) rewards from collate_pairs -> chosen (B,), rejected (B,)."""
    half = rewards.shape[0] // 2
    return rewards[:half], rewards[half:]


class BradleyTerryObjective:
    """Soft-label Bradley-Terry on the batch's labels (gold labels are 1, teacher labels in [0, 1])."""

    def __call__(self, model: RewardModel, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        chosen, rejected = split_rewards(model(batch).rewards)
        return bradley_terry_loss(chosen, rejected, batch["labels"])


OBJECTIVES.add("bt", lambda **_: BradleyTerryObjective())


def build_objective(name: str, **kwargs: Any) -> Objective:
    """The registered objective `name`, built with keyword settings (unused ones are ignored)."""
    return OBJECTIVES.get(name)(**kwargs)
