"""confidence: the auxiliary confidence loss of Burns et al. (2023), in the openai or EleutherAI form
(rewardsmith.losses.w2s)."""

from __future__ import annotations

from typing import Any

import torch

from rewardsmith.losses.base import LossResult
from rewardsmith.losses.w2s import confidence_loss, linear_warmup_coef, openai_warmup_coef
from rewardsmith.train.objectives import StepInfo, split_rewards, with_total
from rewardsmith.w2s.config import ConfidenceSettings
from rewardsmith.w2s.objectives import StudentContext, W2SObjective


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
            self.buffer = torch.cat([self.buffer, probs.detach().float().cpu()])[-self.buffer_size :]

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


def build(method: Any, context: StudentContext) -> ConfidenceObjective:
    return ConfidenceObjective(settings=method.confidence)


OBJECTIVE = W2SObjective("confidence", build)
