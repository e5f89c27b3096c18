"""BetaRewardModel: a backbone with a two-output head (utility u, confidence s) per response, conditioned on
N demonstrations of a preference standard (METHODS.md section 2).

Two ways to condition:
- set: each demonstration (x', y_w, y_l) is encoded once into a vector phi(h(x', y_w) - h(x', y_l)), with phi
  odd (tanh MLP without biases), so exchanging a demonstration's sides negates its vector and a mixture
  with a fraction p flipped shrinks the pooled context toward 0 by (1 - 2p). The context c is the mean of
  the demonstration vectors (invariant to their order; zero when N = 0). Per response y:
      u(y) = w^T g(h_y) + <Q g(h_y), c>,   s(y) = MLP([g(h_y), c, Q g(h_y) * c, log(1 + N)])
  with g a LayerNorm. Demonstration encodings depend only on the demonstrations, so they are computed once
  per standard and reused for every pair scored under it.
- concat: the demonstrations are serialised into the context before the target (decoder backbones), the
  sequence is pooled (last token) and a linear layer gives (u, s). N is bounded by the context length.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from rewardsmith.config import from_dict, to_dict
from rewardsmith.errors import CheckpointError, ConfigError
from rewardsmith.icrm.config import ICRMModelConfig
from rewardsmith.models.backbone import load_backbone, quiet_transformers
from rewardsmith.models.factory import resolve_pooling
from rewardsmith.models.reward_model import RewardModel, pool
from rewardsmith.train.checkpoint import atomic_folder

MODES = ("set", "concat")
META_FILE = "rewardsmith.json"
HEADS_FILE = "icrm_heads.safetensors"
FORMAT = "rewardsmith-icrm"


@dataclass
class BetaScores:
    """Utilities and confidences of two responses and the Beta posterior over z = P(first preferred).
    Every field is (B,) float32."""

    u_first: torch.Tensor
    u_second: torch.Tensor
    s_first: torch.Tensor
    s_second: torch.Tensor

    @property
    def mu(self) -> torch.Tensor:
        return torch.sigmoid(self.u_first - self.u_second)

    @property
    def tau(self) -> torch.Tensor:
        return nn.functional.softplus(self.s_first) + nn.functional.softplus(self.s_second) + 1.0


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


class BetaRewardModel(nn.Module):
    """Backbone (a RewardModel used for encoding and pooling only) plus the ICRM heads of one mode."""

    def __init__(
        self, encoder: RewardModel, mode: str = "set", context_dim: int = 128, hidden_dim: int = 256
    ):
        super().__init__()
        if mode not in MODES:
            raise ConfigError(f"icrm mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.encoder = encoder
        self.encoder.head.requires_grad_(False)  # the scalar head of RewardModel is unused here
        self.mode = mode
        hidden = int(encoder.config.hidden_size)
        self.hidden_size = hidden
        self.context_dim = context_dim
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

    @property
    def kind(self) -> str:
        return self.encoder.kind

    def head_parameters(self) -> list[nn.Parameter]:
        """Trainable parameters outside the backbone."""
        modules = [m for m in (self.context_encoder, self.set_head, self.concat_head) if m is not None]
        return [p for m in modules for p in m.parameters()]

    def embed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Pooled backbone representation (B, H) float32 of (prompt, response) texts (pad_texts tensors)."""
        last, _ = self.encoder.encode(batch)
        return pool(last, batch["attention_mask"], batch["response_mask"], self.encoder.pooling)

    # -- set mode ---------------------------------------------------------------------------------------
    def context(
        self, demo_preferred: torch.Tensor, demo_other: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Set mode. demo_*: (B, N, H) embeddings; mask (B, N) bool. Returns context (B, D) and N (B,)."""
        assert self.context_encoder is not None, "context() is a set-mode method"
        vectors = self.context_encoder.demo_vectors(demo_preferred, demo_other)
        return self.context_encoder.pool(vectors, mask)

    def demo_vectors(self, demo_preferred: torch.Tensor, demo_other: torch.Tensor) -> torch.Tensor:
        """Set mode. (N, H), (N, H) -> (N, D): what a cache stores per demonstration."""
        assert self.context_encoder is not None, "demo_vectors() is a set-mode method"
        return self.context_encoder.demo_vectors(demo_preferred, demo_other)

    def response_heads(
        self, h: torch.Tensor, context: torch.Tensor, n_demos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Set mode. h (B, H), context (B, D) or (D,), n_demos (B,) or scalar. Returns u (B,), s (B,)."""
        assert self.set_head is not None, "response_heads() is a set-mode method"
        if context.dim() == 1:
            context = context.expand(h.shape[0], -1)
        if n_demos.dim() == 0:
            n_demos = n_demos.expand(h.shape[0])
        return self.set_head(h, context, n_demos)

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


def build_beta_reward_model(cfg: ICRMModelConfig, seed: int = 0) -> tuple[BetaRewardModel, Any]:
    """A BetaRewardModel with freshly initialised heads (seeded) and its tokenizer."""
    loaded = load_backbone(cfg.backbone, cfg.num_layers, cfg.dropout)
    torch.manual_seed(seed)
    encoder = RewardModel(loaded.model, resolve_pooling(cfg.pooling, loaded.kind), loaded.kind, cfg.backbone)
    model = BetaRewardModel(encoder, cfg.mode, cfg.context_dim, cfg.hidden_dim)
    if cfg.freeze_backbone:
        model.encoder.backbone.requires_grad_(False)
    if loaded.tokenizer.pad_token_id is None:
        loaded.tokenizer.pad_token = loaded.tokenizer.eos_token
    return model, loaded.tokenizer


def save_beta_reward_model(
    model: BetaRewardModel,
    tokenizer: Any,
    out_dir: str | Path,
    cfg: ICRMModelConfig,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Writes the model folder atomically: heads (safetensors), tokenizer, rewardsmith.json and, when the
    backbone was trained, the backbone (save_pretrained). A frozen backbone is named, not copied."""
    out_dir = Path(out_dir)
    with atomic_folder(out_dir) as tmp:
        heads = {
            k: v.detach().float().cpu().contiguous()
            for k, v in model.state_dict().items()
            if not k.startswith("encoder.")
        }
        save_file(heads, str(tmp / HEADS_FILE))
        tokenizer.save_pretrained(str(tmp))
        backbone_saved = not cfg.freeze_backbone
        if backbone_saved:
            backbone: Any = model.encoder.backbone
            backbone.save_pretrained(str(tmp / "backbone"))
        meta = {
            "format": FORMAT,
            "version": 1,
            "mode": model.mode,
            "pooling": model.encoder.pooling,
            "kind": model.kind,
            "backbone_saved": backbone_saved,
            "model_config": to_dict(cfg),
            **(extra or {}),
        }
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    return out_dir


def load_beta_reward_model(folder: str | Path) -> tuple[BetaRewardModel, Any, ICRMModelConfig]:
    """Loads a folder written by save_beta_reward_model. Returns (model in eval mode, tokenizer, config)."""
    from transformers import AutoModel, AutoTokenizer

    quiet_transformers()
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.exists():
        raise CheckpointError(f"{folder}: not a rewardsmith model folder (no {META_FILE})")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{folder}: not an ICRM model (format {meta.get('format')!r})")
    cfg = from_dict(ICRMModelConfig, meta["model_config"])
    if meta["backbone_saved"]:
        backbone = AutoModel.from_pretrained(str(folder / "backbone"))
    else:
        backbone = load_backbone(cfg.backbone, cfg.num_layers, cfg.dropout).model
    encoder = RewardModel(backbone, meta["pooling"], meta["kind"], cfg.backbone)
    model = BetaRewardModel(encoder, meta["mode"], cfg.context_dim, cfg.hidden_dim)
    missing, unexpected = model.load_state_dict(load_file(str(folder / HEADS_FILE)), strict=False)
    if unexpected or any(not k.startswith("encoder.") for k in missing):
        raise CheckpointError(f"{folder}: heads do not match the config ({(unexpected or missing)[0]})")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer, cfg
