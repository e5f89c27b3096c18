"""Training objectives: glue from a model's outputs on a batch to the pure loss functions.

An objective is built once per run from the registry (name = TrainConfig.loss, or a method's objective) and
called every step as objective(model, batch, StepInfo) -> LossResult with "total" among its terms.
Objectives with state (for example a rolling buffer) keep it in the object, update it explicitly and expose
state_dict / load_state_dict so checkpoints carry it. A factory takes exactly its own options: a misspelt
option is a one-line ConfigError, never silently ignored.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rewardsmith.config import DebiasSettings
from rewardsmith.errors import ConfigError
from rewardsmith.losses.base import LossResult
from rewardsmith.losses.bt import bradley_terry_loss
from rewardsmith.losses.debias import odin_regulariser
from rewardsmith.registry import Registry


@dataclass
class StepInfo:
    step: int          # optimiser steps done so far (0-based index of the current step)
    total_steps: int


class Objective(Protocol):
    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult: ...


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


class OdinObjective:
    """`inner` plus ODIN's regulariser on the debias head's outputs of the same forward (model.last_debias):
    the length head explains length, the quality head is penalised for following it, and the two heads' weights
    are kept orthogonal. Delegates checkpoint state to `inner`."""

    def __init__(self, inner: Objective, settings: DebiasSettings):
        self.inner = inner
        self.settings = settings

    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        result = self.inner(model, batch, info)
        core = getattr(model, "module", model)  # under DDP the heads live on the wrapped module
        out = core.last_debias
        if out is None:
            raise RuntimeError("the odin objective needs a training forward with the length head attached")
        reg = odin_regulariser(out.quality, out.extra, out.log_length, core.head.weight,
                               core.debias.weight_layer.weight, self.settings.correlation_coef,
                               self.settings.orthogonal_coef)
        total = result.total + reg.total
        return LossResult(total, {**result.terms, **reg.terms, "odin": float(reg.total.detach()),
                                  "total": float(total.detach())})

    def state_dict(self) -> Any:
        return self.inner.state_dict() if hasattr(self.inner, "state_dict") else None

    def load_state_dict(self, state: Any) -> None:
        if hasattr(self.inner, "load_state_dict"):
            self.inner.load_state_dict(state)


def debias_objective(objective: Objective, settings: DebiasSettings) -> Objective:
    """The objective a debias setting trains with: odin wraps it with its regulariser; the other kinds act
    through the model (length-covariate) or the pair weights (length-balanced) and leave it as is."""
    return OdinObjective(objective, settings) if settings.kind == "odin" else objective
