"""anchor (ANCHOR): soft Bradley-Terry + weight * masked MSE between the student's and a frozen reference's hidden
states on response tokens (rewardsmith.losses.anchor); the reference comes from a frozen copy, the LoRA base with
the adapter disabled, or states cached once before training (rewardsmith.w2s.reference)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from rewardsmith.errors import ConfigError
from rewardsmith.losses.anchor import anchor_loss
from rewardsmith.losses.base import LossResult
from rewardsmith.losses.w2s import naive_w2s_loss
from rewardsmith.models.backbone import num_hidden_layers
from rewardsmith.models.factory import is_lora
from rewardsmith.train.objectives import StepInfo, split_rewards
from rewardsmith.w2s.config import AnchorSettings
from rewardsmith.w2s.objectives import StudentContext, W2SObjective
from rewardsmith.w2s.reference import (
    AdapterDisabledReference,
    CachedReference,
    FrozenCopyReference,
    ReferenceProvider,
)


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


def layers_for(fractions: Sequence[float], n_layers: int) -> list[int]:
    """Depth fractions -> hidden-state indices (1..n_layers; index 0 is the embeddings), rounding half up
    (1.0 = the last layer, 0.5 = the middle one)."""
    out = []
    for f in fractions:
        if not 0.0 < f <= 1.0:
            raise ConfigError(f"anchor_layers are depth fractions in (0, 1], got {f}")
        out.append(min(n_layers, max(1, math.floor(f * n_layers + 0.5))))
    return sorted(set(out))


def build(method: Any, context: StudentContext) -> AnchorObjective:
    a = method.anchor
    layers = layers_for(a.layers, num_hidden_layers(context.model.backbone))
    reference: ReferenceProvider
    if a.reference in ("cache", "disk"):
        reference = CachedReference(
            context.run.reference_cache(
                layers, a.reference == "disk", context.encoded, int(context.tokenizer.pad_token_id)
            )
        )
    elif a.reference == "copy":
        reference = FrozenCopyReference(context.model)
    else:
        if not is_lora(context.model):
            raise ConfigError(f"method {method.name}: reference lora-base needs student.lora.r > 0")
        reference = AdapterDisabledReference()
    return AnchorObjective(reference=reference, layers=layers, settings=a)


OBJECTIVE = W2SObjective("anchor", build)
