"""Training-only heads that take length off the reward head (rewardsmith.losses.debias holds their losses).

- `length-covariate`: the Bradley-Terry logit during training is (r_c + h(len_c)) - (r_r + h(len_r)), with h a
  small learned function of the response's log token count (so beta * f(length difference) for a linear h). The
  reward head need not carry length; h is dropped at inference.
- `odin`: a second linear head r_l on the pooled representation (ODIN, "Disentangled Reward Mitigates Hacking
  in RLHF", arXiv:2402.07319): training uses r_q + r_l, a loss makes r_l explain length and penalises r_q's
  correlation with it, and keeps the two heads' weights orthogonal. Scoring uses the quality head r_q only.

A head is attached to the model as `model.debias` for training (so distributed training syncs its gradients and
the optimiser gives it the heads' learning rate) and removed before the model is saved or scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from rewardsmith.errors import ConfigError


@dataclass
class DebiasOutput:
    """What a training forward adds, each (2B,): extra, the debias head's score added to the rewards (r_l for
    odin, h(len) for the covariate); quality, the reward head's own output; log_length, log(1 + response tokens)."""

    extra: torch.Tensor
    quality: torch.Tensor
    log_length: torch.Tensor


class LengthCovariate(nn.Module):
    """h(log length): a linear term plus a small tanh MLP, all learned."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.linear = nn.Linear(1, 1, bias=False)
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, 1, bias=False))
        nn.init.zeros_(self.linear.weight)
        last = self.mlp[2]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)

    def forward(self, pooled: torch.Tensor | None, log_length: torch.Tensor) -> torch.Tensor:
        x = log_length.float().unsqueeze(-1)
        return (self.linear(x) + self.mlp(x)).squeeze(-1)


class LengthHead(nn.Module):
    """ODIN's length head: a bias-free linear map of the pooled representation. It starts at zero, so the
    labels, not a random start, decide which way it follows length (longer or shorter preferred); the
    correlation term then makes it explain length in that direction."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.weight_layer = nn.Linear(hidden_size, 1, bias=False)
        nn.init.zeros_(self.weight_layer.weight)

    def forward(self, pooled: torch.Tensor, log_length: torch.Tensor) -> torch.Tensor:
        return self.weight_layer(pooled.float()).squeeze(-1)


def prefit_covariate(
    head: LengthCovariate,
    chosen_log_length: torch.Tensor,
    rejected_log_length: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 300,
    lr: float = 0.05,
    l2: float = 1e-3,
) -> float:
    """Fits h alone to the labels first (soft Bradley-Terry on h(len_c) - h(len_r), full batch, Adam, a small L2),
    so training starts with length already explained and the reward head is not pulled toward it. Joint
    training then goes on from there. Returns the length-only fit's final loss."""
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    labels = labels.float()
    loss = torch.zeros(())
    for _ in range(steps):
        opt.zero_grad()
        margin = head(None, chosen_log_length) - head(None, rejected_log_length)
        nll = -(labels * nn.functional.logsigmoid(margin) + (1 - labels) * nn.functional.logsigmoid(-margin)).mean()
        loss = nll + l2 * sum(p.pow(2).sum() for p in head.parameters())
        loss.backward()
        opt.step()
    head.zero_grad(set_to_none=True)  # no stale gradient may reach the first training step
    return float(loss.detach())


def debias_head(kind: str, hidden_size: int) -> nn.Module | None:
    """The training head of a debias kind (None for kinds that need none)."""
    if kind == "length-covariate":
        return LengthCovariate()
    if kind == "odin":
        return LengthHead(hidden_size)
    return None


def attach_debias(model: Any, kind: str) -> bool:
    """Attaches the training head of `kind` to a RewardModel (`model.debias`); returns whether one was attached.
    A model without a `debias` slot (the ICRM) takes none: asking for one there is a ConfigError."""
    if kind not in ("length-covariate", "odin"):
        return False
    if not hasattr(model, "last_debias"):
        raise ConfigError(f"debias {kind!r} needs a pairwise reward model, not {type(model).__name__}")
    head = debias_head(kind, int(model.hidden_size))
    if head is None:
        return False
    model.debias = head.to(next(model.parameters()).device)
    return True


def detach_debias(model: Any) -> None:
    """Removes the training head (scoring and saving use the reward head alone)."""
    if hasattr(model, "last_debias"):
        model.debias = None
        model.last_debias = None
