"""Negative ELBO of the variational in-context reward model (METHODS.md section 2).

The preference probability z in [0, 1] has the posterior q = Beta(alpha, beta) with
    mu = sigmoid(u_w - u_l),  tau = softplus(s_w) + softplus(s_l) + 1,  alpha = mu tau,  beta = (1 - mu) tau
and the prior Beta(1, 1). For a soft label q_lab = P(first response preferred) the loss is
    L = -[q_lab E_q[log z] + (1 - q_lab) E_q[log(1 - z)]] + lambda(N) KL(Beta(alpha, beta) || Beta(1, 1))
with the closed forms
    E_q[log z]     = digamma(alpha) - digamma(alpha + beta)
    E_q[log(1-z)]  = digamma(beta)  - digamma(alpha + beta)
    KL(q || U)     = -log B(alpha, beta) + (alpha - 1) digamma(alpha) + (beta - 1) digamma(beta)
                     - (alpha + beta - 2) digamma(alpha + beta).
The KL term keeps the optimum inside (0 < mu < 1, tau finite) where plain Bradley-Terry drives the margin
to infinity. lambda(N) decreases with the number of demonstrations N; schedules live in KL_SCHEDULES.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rewardsmith.losses.base import LossResult
from rewardsmith.registry import Registry

# A schedule maps (N (B,) float, base weight, scale) -> lambda(N) (B,).
KLSchedule = Callable[[torch.Tensor, float, float], torch.Tensor]
KL_SCHEDULES: Registry[KLSchedule] = Registry("kl schedule")

KL_SCHEDULES.add("constant", lambda n, base, scale: torch.full_like(n, base))
# base / (1 + N / scale): the prior weighs like `scale` demonstrations.
KL_SCHEDULES.add("inverse", lambda n, base, scale: base / (1.0 + n / scale))
KL_SCHEDULES.add("inverse_sqrt", lambda n, base, scale: base / torch.sqrt(1.0 + n / scale))
KL_SCHEDULES.add("exp", lambda n, base, scale: base * torch.exp(-n / scale))


def kl_weight(n_demos: torch.Tensor, schedule: str = "inverse", base: float = 0.1, scale: float = 8.0) -> torch.Tensor:
    """lambda(N) for each episode. n_demos: (B,) -> (B,) float32."""
    return KL_SCHEDULES.get(schedule)(n_demos.float(), float(base), float(scale))


@dataclass(frozen=True)
class BetaPosterior:
    """Per-pair posterior over z = P(first response preferred). Every field is (B,) float32."""

    mu: torch.Tensor
    tau: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor


def beta_posterior(
    u_first: torch.Tensor, u_second: torch.Tensor, s_first: torch.Tensor, s_second: torch.Tensor
) -> BetaPosterior:
    """Beta(mu tau, (1 - mu) tau) from utilities u and confidences s of both responses, each (B,)."""
    margin = (u_first - u_second).float()
    mu = torch.sigmoid(margin)
    tau = F.softplus(s_first.float()) + F.softplus(s_second.float()) + 1.0
    # alpha, beta via log-sigmoid keep both strictly positive even when mu rounds to 0 or 1 in fp32.
    alpha = torch.exp(F.logsigmoid(margin)) * tau
    beta = torch.exp(F.logsigmoid(-margin)) * tau
    return BetaPosterior(mu, tau, alpha.clamp(min=1e-6), beta.clamp(min=1e-6))


def expected_log_z(alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """E_{Beta(alpha, beta)}[log z], elementwise."""
    return torch.digamma(alpha) - torch.digamma(alpha + beta)


def beta_kl_to_uniform(alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """KL(Beta(alpha, beta) || Beta(1, 1)), elementwise (closed form; log B(1, 1) = 0)."""
    log_b = torch.lgamma(alpha) + torch.lgamma(beta) - torch.lgamma(alpha + beta)
    return (
        -log_b
        + (alpha - 1.0) * torch.digamma(alpha)
        + (beta - 1.0) * torch.digamma(beta)
        - (alpha + beta - 2.0) * torch.digamma(alpha + beta)
    )


def beta_elbo_loss(
    u_first: torch.Tensor,
    u_second: torch.Tensor,
    s_first: torch.Tensor,
    s_second: torch.Tensor,
    n_demos: torch.Tensor,
    labels: torch.Tensor | None = None,
    schedule: str = "inverse",
    kl_base: float = 0.1,
    kl_scale: float = 8.0,
) -> LossResult:
    """Negative ELBO averaged over pairs.

    u_*, s_*: (B,) utilities and confidences of the first and second response. n_demos: (B,) demonstrations
    each episode was conditioned on. labels: (B,) P(first preferred) under the episode's standard (1 when
    None; soft values for mixture standards). Terms: total, nll (-expected log-likelihood), kl,
    kl_weight (mean lambda), mu (mean), tau (mean), accuracy (mu on the side of the label).
    """
    post = beta_posterior(u_first, u_second, s_first, s_second)
    if labels is None:
        labels = torch.ones_like(post.mu)
    labels = labels.to(device=post.mu.device, dtype=post.mu.dtype)
    log_z = expected_log_z(post.alpha, post.beta)
    log_not_z = expected_log_z(post.beta, post.alpha)
    nll = -(labels * log_z + (1.0 - labels) * log_not_z)
    kl = beta_kl_to_uniform(post.alpha, post.beta)
    lam = kl_weight(n_demos.to(post.mu.device), schedule, kl_base, kl_scale)
    total = (nll + lam * kl).mean()
    with torch.no_grad():
        hit = ((post.mu > 0.5).float() == (labels > 0.5).float()).float().mean()
    return LossResult(
        total,
        {
            "total": float(total.detach()),
            "nll": float(nll.mean().detach()),
            "kl": float(kl.mean().detach()),
            "kl_weight": float(lam.mean()),
            "mu": float(post.mu.mean().detach()),
            "tau": float(post.tau.mean().detach()),
            "accuracy": float(hit),
        },
    )
