"""BetaRewardModel: a pooled backbone with two outputs per response, utility u and confidence s, conditioned
on N demonstrations of a preference standard (METHODS.md section 2). The Beta posterior over the preference
probability is formed from (u, s) by rewardsmith.losses.beta_elbo.beta_posterior.

Two ways to condition:
- set: each demonstration (x', y_w, y_l) is encoded once into a vector phi(g(h(x', y_w)) - g(h(x', y_l))), with
  phi odd (tanh MLP without biases), so exchanging a demonstration's sides negates its vector and a mixture
  with a fraction p flipped shrinks the pooled context toward 0 by (1 - 2p). The context c is the mean of the
  demonstration vectors (invariant to their order; zero when N = 0). Per response y:
      u(y) = w^T g(h_y) + <Q g(h_y), c>,   s(y) = MLP([g(h_y), c, Q g(h_y) * c, log(1 + N)])
  with g a LayerNorm. Demonstration encodings depend only on the demonstrations, so they are computed once
  per standard and reused for every pair scored under it.
- concat: the demonstrations are serialised into the context before the target (decoder backbones), the
  sequence is pooled and a linear layer gives (u, s). N is bounded by the context length.
Heads always compute in float32, also under bf16 autocast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from rewardsmith.errors import ConfigError
from rewardsmith.models.reward_model import PooledBackbone

MODES = ("set", "concat")


@dataclass
class BetaScores:
    """Utilities and confidences of the first and second response of B pairs, each (B,) float32."""

    u_first: torch.Tensor
    u_second: torch.Tensor
    s_first: torch.Tensor
    s_second: torch.Tensor


class SetContextEncoder(nn.Module):
    """Demonstration vectors phi(g(h_w) - g(h_l)) in R^D and their masked mean."""

    def __init__(self, hidden_size: int, context_dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size)
        # No biases and an odd activation: phi(-x) = -phi(x), so a flipped demonstration votes the other way.
        self.first = nn.Linear(hidden_size, context_dim, bias=False)
        self.second = nn.Linear(context_dim, context_dim, bias=False)

    def demo_vectors(self, h_preferred: torch.Tensor, h_other: torch.Tensor) -> torch.Tensor:
        """h_preferred, h_other: (..., H) pooled embeddings. Returns (..., D)."""
        diff = self.norm(h_preferred.float()) - self.norm(h_other.float())
        return self.second(torch.tanh(self.first(diff)))

    @staticmethod
    def pool(vectors: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """vectors: (B, N, D), mask: (B, N) bool. Returns context (B, D) (0 where N = 0) and N (B,)."""
        weights = mask.to(vectors.dtype).unsqueeze(-1)
        count = weights.sum(dim=1)
        context = (vectors * weights).sum(dim=1) / count.clamp(min=1.0)
        return context, count.squeeze(-1)


class SetHead(nn.Module):
    """(u, s) of a response from its embedding h (B, H), the context c (B, D) and N (B,)."""

    def __init__(self, hidden_size: int, context_dim: int, hidden_dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size)
        self.utility = nn.Linear(hidden_size, 1, bias=False)
        self.query = nn.Linear(hidden_size, context_dim, bias=False)
        self.confidence = nn.Sequential(
            nn.Linear(hidden_size + 2 * context_dim + 1, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, 1)
        )

    def forward(
        self, h: torch.Tensor, context: torch.Tensor, n_demos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        g = self.norm(h.float())
        q = self.query(g)
        u = self.utility(g).squeeze(-1) + (q * context).sum(dim=-1)
        log_n = torch.log1p(n_demos.float()).unsqueeze(-1)
        s = self.confidence(torch.cat([g, context, q * context, log_n], dim=-1)).squeeze(-1)
        return u, s


class BetaRewardModel(PooledBackbone):
    """PooledBackbone plus the in-context heads of one mode (set or concat)."""

    def __init__(
        self,
        backbone: Any,
        pooling: str = "mean",
        kind: str = "encoder",
        backbone_name: str = "",
        mode: str = "set",
        context_dim: int = 128,
        hidden_dim: int = 256,
    ):
        super().__init__(backbone, pooling, kind, backbone_name)
        if mode not in MODES:
            raise ConfigError(f"icrm mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.context_dim = context_dim
        hidden = self.hidden_size
        self.context_encoder: SetContextEncoder | None = None
        self.set_head: SetHead | None = None
        self.concat_head: nn.Linear | None = None
        if mode == "set":
            self.context_encoder = SetContextEncoder(hidden, context_dim)
            self.set_head = SetHead(hidden, context_dim, hidden_dim)
        else:
            self.concat_head = nn.Linear(hidden, 2)
            nn.init.normal_(self.concat_head.weight, std=1.0 / math.sqrt(hidden))
            nn.init.zeros_(self.concat_head.bias)

    def forward(self, batch: dict[str, torch.Tensor]) -> BetaScores:
        """Scores of an episode batch: a set-mode batch (icrm.features.set_episode_tensors: first, second
        (B, H), demo_preferred, demo_other (B, M, H), demo_mask (B, M)) or a concat-mode batch (pad_texts
        tensors (2B, T), rows B.. the second responses)."""
        if self.mode == "set":
            context, n = self.context(batch["demo_preferred"], batch["demo_other"], batch["demo_mask"])
            return self.score_embeddings(batch["first"], batch["second"], context, n)
        u, s = self.concat_heads(batch)
        half = u.shape[0] // 2
        return BetaScores(u[:half], u[half:], s[:half], s[half:])

    # -- set mode ---------------------------------------------------------------------------------------
    def context(
        self, demo_preferred: torch.Tensor, demo_other: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Set mode. demo_*: (B, N, H) embeddings; mask (B, N) bool. Returns context (B, D) and N (B,)."""
        assert self.context_encoder is not None, "context() is a set-mode method"
        with torch.autocast(device_type=demo_preferred.device.type, enabled=False):
            vectors = self.context_encoder.demo_vectors(demo_preferred, demo_other)
            return self.context_encoder.pool(vectors, mask)

    def response_heads(
        self, h: torch.Tensor, context: torch.Tensor, n_demos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Set mode. h (B, H), context (B, D) or (D,), n_demos (B,) or scalar. Returns u (B,), s (B,)."""
        assert self.set_head is not None, "response_heads() is a set-mode method"
        if context.dim() == 1:
            context = context.expand(h.shape[0], -1)
        if n_demos.dim() == 0:
            n_demos = n_demos.expand(h.shape[0])
        with torch.autocast(device_type=h.device.type, enabled=False):
            return self.set_head(h, context.float(), n_demos)

    def score_embeddings(
        self, h_first: torch.Tensor, h_second: torch.Tensor, context: torch.Tensor, n_demos: torch.Tensor
    ) -> BetaScores:
        """Set mode: both responses of B pairs from their embeddings (B, H) under contexts (B, D)."""
        u1, s1 = self.response_heads(h_first, context, n_demos)
        u2, s2 = self.response_heads(h_second, context, n_demos)
        return BetaScores(u1, u2, s1, s2)

    # -- concat mode ------------------------------------------------------------------------------------
    def concat_heads(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Concat mode. batch: pad_texts tensors of sequences holding demonstrations + target (B, T).
        Returns u (B,), s (B,)."""
        assert self.concat_head is not None, "concat_heads() is a concat-mode method"
        pooled = self.embed(batch)
        with torch.autocast(device_type=pooled.device.type, enabled=False):
            out = self.concat_head(pooled.float())
        return out[:, 0], out[:, 1]
