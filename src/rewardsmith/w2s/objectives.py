"""W2S training objectives, registered in rewardsmith.train.objectives.OBJECTIVES.

naive       soft Bradley-Terry on the teacher's probabilities (the batch's labels)
confidence  the auxiliary confidence loss, openai or EleutherAI form (rewardsmith.losses.w2s)
anchor      soft Bradley-Terry + anchor_weight * masked MSE to reference hidden states
ceiling     Bradley-Terry on gold labels (the strong ceiling for PGR; the pipeline feeds gold pairs)

Each is called as objective(model, batch, StepInfo) -> LossResult with "total" among its terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rewardsmith.errors import ConfigError
from rewardsmith.losses.anchor import anchor_loss
from rewardsmith.losses.base import LossResult
from rewardsmith.losses.w2s import confidence_loss, linear_warmup_coef, naive_w2s_loss, openai_warmup_coef
from rewardsmith.models.reward_model import RewardModel
from rewardsmith.train.objectives import OBJECTIVES, StepInfo, split_rewards
from rewardsmith.w2s.reference import ReferenceProvider

CONFIDENCE_FORMS = ("openai", "eleuther")


def _with_total(result: LossResult) -> LossResult:
    result.terms["total"] = float(result.total.detach())
    return result


class NaiveObjective:
    """Soft BT on the batch labels (teacher probabilities, or gold 1.0 for the ceiling)."""

    def __call__(self, model: RewardModel, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        chosen, rejected = split_rewards(model(batch).rewards)
        return _with_total(naive_w2s_loss(chosen, rejected, batch["labels"]))


class ConfidenceObjective:
    """Auxiliary confidence loss. form "openai": batch-quantile threshold, warm-up over warmup_frac of the
    steps then a jump to aux_coef; form "eleuther": threshold over a rolling buffer of the last
    buffer_size student probabilities plus the batch, linear warm-up over warmup_steps (default:
    warmup_frac of the steps). The buffer is state: state_dict/load_state_dict let the trainer checkpoint it.
    """

    def __init__(
        self,
        form: str = "openai",
        aux_coef: float = 0.5,
        warmup_frac: float = 0.1,
        warmup_steps: int | None = None,
        buffer_size: int = 0,
        **_: Any,
    ):
        if form not in CONFIDENCE_FORMS:
            raise ConfigError(f"confidence form must be one of {CONFIDENCE_FORMS}, got {form!r}")
        self.form = form
        self.aux_coef = aux_coef
        self.warmup_frac = warmup_frac
        self.warmup_steps = warmup_steps
        self.buffer_size = buffer_size if form == "eleuther" else 0
        self.buffer = torch.zeros(0)

    def coef(self, info: StepInfo) -> float:
        if self.form == "openai":
            return openai_warmup_coef(info.step / max(1, info.total_steps), self.warmup_frac, self.aux_coef)
        steps = self.warmup_steps if self.warmup_steps is not None else int(self.warmup_frac * info.total_steps)
        return linear_warmup_coef(info.step, steps, self.aux_coef)

    def update(self, probs: torch.Tensor) -> None:
        """Appends the batch's student probabilities (detached) to the rolling buffer."""
        if self.buffer_size > 0:
            self.buffer = torch.cat([self.buffer, probs.detach().float().cpu()])[-self.buffer_size :]

    def __call__(self, model: RewardModel, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        chosen, rejected = split_rewards(model(batch).rewards)
        probs = torch.sigmoid((chosen - rejected).detach().float())
        pool = None
        if self.buffer_size > 0:
            pool = torch.cat([self.buffer.to(probs.device), probs])
        result = confidence_loss(chosen, rejected, batch["labels"], self.coef(info), pool)
        self.update(probs)
        return _with_total(result)

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": self.buffer.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = state["buffer"].clone()


class AnchorObjective:
    """L = L_w2s + anchor_weight * L_anchor over `layers` (hidden-state indices, L = last), with the
    reference states from `reference` (frozen copy, LoRA adapter disabled, or the cache)."""

    def __init__(
        self,
        reference: ReferenceProvider | None = None,
        layers: Sequence[int] = (-1,),
        anchor_weight: float = 1e-4,
        **_: Any,
    ):
        if reference is None:
            raise ConfigError("the anchor objective needs a reference (frozen copy, LoRA base or cache)")
        self.reference = reference
        self.layers = list(layers)
        self.anchor_weight = anchor_weight

    def __call__(self, model: RewardModel, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        out = model(batch, hidden_layers=self.layers)
        chosen, rejected = split_rewards(out.rewards)
        bt = naive_w2s_loss(chosen, rejected, batch["labels"])
        reference = self.reference(model, batch, self.layers)
        anchor = anchor_loss(out.hidden_states, reference, out.response_mask)
        total = bt.total + self.anchor_weight * anchor.total
        return LossResult(total, {**bt.terms, **anchor.terms, "total": float(total.detach())})


OBJECTIVES.add("naive", lambda **_: NaiveObjective())
OBJECTIVES.add("ceiling", lambda **_: NaiveObjective())
OBJECTIVES.add("confidence", lambda **kw: ConfidenceObjective(**kw))
OBJECTIVES.add("anchor", lambda **kw: AnchorObjective(**kw))
