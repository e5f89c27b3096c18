"""W2S training objectives, registered in rewardsmith.train.objectives.OBJECTIVES.

naive       soft Bradley-Terry on the teacher's probabilities (the batch's labels); also the ceiling's
            objective, fed gold labels
confidence  the auxiliary confidence loss, openai or EleutherAI form (rewardsmith.losses.w2s)
anchor      soft Bradley-Terry + weight * masked MSE to reference hidden states (rewardsmith.losses.anchor)

Each is called as objective(model, batch, StepInfo) -> LossResult with "total" among its terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rewardsmith.losses.anchor import anchor_loss
from rewardsmith.losses.base import LossResult
from rewardsmith.losses.w2s import confidence_loss, linear_warmup_coef, naive_w2s_loss, openai_warmup_coef
from rewardsmith.train.objectives import OBJECTIVES, StepInfo, split_rewards, with_total
from rewardsmith.w2s.config import AnchorSettings, ConfidenceSettings
from rewardsmith.w2s.reference import ReferenceProvider


class NaiveObjective:
    """Soft BT on the batch labels (teacher probabilities, or gold 1.0 for the ceiling)."""

    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        chosen, rejected = split_rewards(model(batch).rewards)
        return with_total(naive_w2s_loss(chosen, rejected, batch["labels"], batch.get("weights")))


class ConfidenceObjective:
    """Auxiliary confidence loss. form "openai": batch-quantile threshold, warm-up over warmup_frac of the
    steps then a jump to aux_coef; form "eleuther": threshold over a rolling buffer of the last buffer_size
    student probabilities plus the batch, linear warm-up over warmup_frac of the steps. The buffer is state:
    state_dict / load_state_dict let the trainer checkpoint it."""

    def __init__(self, settings: ConfidenceSettings | None = None):
        self.settings = settings or ConfidenceSettings()
        self.buffer_size = self.settings.buffer_size if self.settings.form == "eleuther" else 0
        self.buffer = torch.zeros(0)

    def coef(self, info: StepInfo) -> float:
        s = self.settings
        if s.form == "openai":
            return openai_warmup_coef(info.step / max(1, info.total_steps), s.warmup_frac, s.aux_coef)
        return linear_warmup_coef(info.step, int(s.warmup_frac * info.total_steps), s.aux_coef)

    def update(self, probs: torch.Tensor) -> None:
        """Appends the batch's student probabilities (detached) to the rolling buffer."""
        if self.buffer_size > 0:
            self.buffer = torch.cat([self.buffer, probs.detach().float().cpu()])[-self.buffer_size:]

    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        chosen, rejected = split_rewards(model(batch).rewards)
        probs = torch.sigmoid((chosen - rejected).detach().float())
        pool = torch.cat([self.buffer.to(probs.device), probs]) if self.buffer_size > 0 else None
        result = confidence_loss(chosen, rejected, batch["labels"], self.coef(info), pool, batch.get("weights"))
        self.update(probs)
        return with_total(result)

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": self.buffer.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = state["buffer"].clone()


class AnchorObjective:
    """L = L_w2s + weight * L_anchor over `layers` (hidden-state indices, L = last), with the reference states
    from `reference` (frozen copy, LoRA adapter disabled, or the cache)."""

    def __init__(self, reference: ReferenceProvider, layers: Sequence[int], settings: AnchorSettings | None = None):
        self.reference = reference
        self.layers = list(layers)
        self.settings = settings or AnchorSettings()

    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        out = model(batch, hidden_layers=self.layers)
        chosen, rejected = split_rewards(out.rewards)
        bt = naive_w2s_loss(chosen, rejected, batch["labels"], batch.get("weights"))
        reference = self.reference(model, batch, self.layers)
        anchor = anchor_loss(out.hidden_states, reference, out.response_mask, self.settings.normalise)
        total = bt.total + self.settings.weight * anchor.total
        return LossResult(total, {**bt.terms, **anchor.terms, "total": float(total.detach())})


OBJECTIVES.add("naive", NaiveObjective)
OBJECTIVES.add("confidence", ConfidenceObjective)
OBJECTIVES.add("anchor", AnchorObjective)
