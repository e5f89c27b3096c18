"""Bradley-Terry loss with soft labels."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rewardsmith.losses.base import LossResult


def weighted_mean(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """mean(weights * values); the plain mean without weights. Pair weights are normalised to mean 1 over the
    training set (not per batch), so a weighted run sees the same total mass as an unweighted one."""
    if weights is None:
        return values.mean()
    return (weights.to(values.dtype) * values).mean()


def bradley_terry_loss(
    chosen_rewards: torch.Tensor,
    rejected_rewards: torch.Tensor,
    labels: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
) -> LossResult:
    """Soft Bradley-Terry negative log-likelihood, averaged over pairs.

    chosen_rewards, rejected_rewards: (B,). labels: (B,) = P(chosen preferred), 1 for gold labels.
    With d = r_c - r_r:  L = -[q log sigmoid(d) + (1 - q) log sigmoid(-d)]  (METHODS.md, naive W2S loss;
    q = 1 gives the plain BT loss). Depends on rewards only through d, so shifting both by a constant
    leaves it unchanged. weights: (B,) per-pair weights (length-balanced training) or None.
    Terms: "bt" (the loss) and "accuracy" (fraction of pairs with d on the side of q).
    """
    margin = (chosen_rewards - rejected_rewards).float()
    if labels is None:
        labels = torch.ones_like(margin)
    labels = labels.to(margin.dtype)
    loss = weighted_mean(-(labels * F.logsigmoid(margin) + (1.0 - labels) * F.logsigmoid(-margin)), weights)
    with torch.no_grad():
        agree = ((margin > 0).float() == (labels > 0.5).float()).float().mean()
    return LossResult(loss, {"bt": float(loss.detach()), "accuracy": float(agree)})
