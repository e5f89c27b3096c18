"""Weak-to-strong losses: the naive soft Bradley-Terry loss and the auxiliary confidence loss.

Pairwise form of "Weak-to-strong generalization" (arXiv:2312.09390), sec. 4.3.2. A pair with margin
d = r(chosen) - r(rejected) is a two-class problem with logits (0, d): P(chosen preferred) = sigmoid(d),
so the cross-entropy against a target probability y is the soft Bradley-Terry loss with label y.

The confidence loss mixes the teacher's label q with the student's own hardened prediction h:

    target = (1 - c) * q + c * h,    L = -[target log sigmoid(d) + (1 - target) log sigmoid(-d)]

Two published forms differ in how h's threshold and the coefficient c are set:
- openai/weak-to-strong (`logconf_loss_fn`): the threshold is the batch quantile of the student's
  probabilities that makes the hardened positive rate equal the teacher's positive rate in the batch;
  c = aux_coef * step_frac while step_frac <= warmup_frac, then aux_coef (a jump at the end of warm-up,
  as in the reference code).
- EleutherAI/w2s (`log_confidence_loss`): the same quantile rule, optionally taken over a rolling buffer
  of recent student predictions (a less noisy threshold with small batches); c = aux_coef *
  min(1, step / warmup_steps), a linear warm-up with no jump.

Everything here is a pure function of tensors; the rolling buffer lives in the objective
(rewardsmith.w2s.objectives.confidence.ConfidenceObjective) and is passed in.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rewardsmith.losses.base import LossResult
from rewardsmith.losses.bt import bradley_terry_loss, weighted_mean

__all__ = [
    "confidence_loss",
    "harden_by_quantile",
    "linear_warmup_coef",
    "naive_w2s_loss",
    "openai_warmup_coef",
]


def naive_w2s_loss(
    chosen_rewards: torch.Tensor,
    rejected_rewards: torch.Tensor,
    teacher_labels: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> LossResult:
    """Soft Bradley-Terry on the teacher's probabilities q (B,) (METHODS.md 1, L_w2s); weights: (B,) or None."""
    return bradley_terry_loss(chosen_rewards, rejected_rewards, teacher_labels, weights)


def openai_warmup_coef(step_frac: float, warmup_frac: float = 0.1, aux_coef: float = 0.5) -> float:
    """c in openai/weak-to-strong: aux_coef * step_frac during warm-up (step_frac <= warmup_frac), then
    aux_coef. step_frac = optimiser steps done / total steps, in [0, 1]."""
    return aux_coef * (step_frac if step_frac <= warmup_frac else 1.0)


def linear_warmup_coef(step: int, warmup_steps: int, aux_coef: float = 0.5) -> float:
    """c in EleutherAI/w2s: aux_coef * min(1, step / warmup_steps); aux_coef when warmup_steps <= 0."""
    if warmup_steps <= 0:
        return aux_coef
    return aux_coef * min(1.0, step / warmup_steps)


def harden_by_quantile(
    probs: torch.Tensor, positive_rate: float | torch.Tensor, pool: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's hardened predictions h (B,) in {0, 1} and the threshold used.

    probs: (B,) student P(chosen preferred). positive_rate: the teacher's mean label in the batch.
    pool: (K,) probabilities the threshold is computed over (a rolling buffer plus this batch); default
    the batch itself. As in the reference code, with p0 = 1 - p (the probability of class 0),
    threshold = quantile(p0_pool, positive_rate) and h = 1 where p0 < threshold, so about a fraction
    positive_rate of the pool is hardened to 1. Returns (h, threshold on p0).
    """
    pool = probs if pool is None else pool
    rate = torch.as_tensor(positive_rate, dtype=torch.float32, device=probs.device).clamp(0.0, 1.0)
    threshold = torch.quantile((1.0 - pool.detach()).float(), rate)
    hard = ((1.0 - probs.detach()) < threshold).to(probs.dtype)
    return hard, threshold


def confidence_loss(
    chosen_rewards: torch.Tensor,
    rejected_rewards: torch.Tensor,
    teacher_labels: torch.Tensor,
    coef: float,
    pool: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
) -> LossResult:
    """Auxiliary confidence loss, averaged over pairs.

    chosen_rewards, rejected_rewards, teacher_labels: (B,). coef: c in [0, 1] (from openai_warmup_coef or
    linear_warmup_coef). pool: (K,) probabilities for the threshold (None: this batch). weights: (B,) pair
    weights or None. The hardened
    target is detached: no gradient flows through h. Terms: "bt" (the loss), "accuracy" (agreement with
    the teacher's side), "confidence_coef", "confidence_threshold", "hardened_rate".
    """
    margin = (chosen_rewards - rejected_rewards).float()
    labels = teacher_labels.to(margin.dtype)
    probs = torch.sigmoid(margin)
    hard, threshold = harden_by_quantile(probs, labels.mean(), pool)
    target = (1.0 - coef) * labels + coef * hard
    loss = weighted_mean(-(target * F.logsigmoid(margin) + (1.0 - target) * F.logsigmoid(-margin)), weights)
    with torch.no_grad():
        agree = ((margin > 0).float() == (labels > 0.5).float()).float().mean()
    return LossResult(
        loss,
        {
            "bt": float(loss.detach()),
            "accuracy": float(agree),
            "confidence_coef": float(coef),
            "confidence_threshold": float(threshold),
            "hardened_rate": float(hard.mean()),
        },
    )
