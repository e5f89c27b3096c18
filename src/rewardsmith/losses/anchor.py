"""Representation anchoring: MSE between the student's hidden states and a frozen reference's, on
response tokens only (METHODS.md 1, ANCHOR: L = L_w2s + lambda * L_anchor)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rewardsmith.losses.base import LossResult

__all__ = ["anchor_loss", "masked_mse"]


def masked_mse(student: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the masked tokens of each sequence, averaged over sequences.

    student, reference: (N, T, H); mask: (N, T) bool, True on response tokens (prompt, special tokens and
    padding False). Per sequence: sum over its masked tokens of mean_h (s - r)^2, divided by its number
    of masked tokens; sequences without a masked token are skipped. Returns a scalar (0 when none).
    """
    weights = mask.to(torch.float32)
    per_token = (student.float() - reference.float()).pow(2).mean(dim=-1)  # (N, T)
    counts = weights.sum(dim=1)  # (N,)
    per_sequence = (per_token * weights).sum(dim=1) / counts.clamp(min=1.0)
    has_tokens = counts > 0
    if not bool(has_tokens.any()):
        return per_token.sum() * 0.0
    return per_sequence[has_tokens].mean()


def anchor_loss(
    student_states: Mapping[int, torch.Tensor],
    reference_states: Mapping[int, torch.Tensor],
    response_mask: torch.Tensor,
    normalise: bool = False,
) -> LossResult:
    """Anchor loss averaged over the anchored layers, with the drift of each layer as a logged term.

    student_states, reference_states: layer -> (N, T, H) with the same layers; response_mask: (N, T)
    bool. normalise: divide each layer's MSE by the masked mean square of its reference states (a relative
    drift, comparable across layers and model widths). Returns total = mean over layers, terms "anchor" and
    "anchor_drift.L<layer>" (the raw MSE of each layer).
    """
    if set(student_states) != set(reference_states) or not student_states:
        raise ValueError(
            f"anchored layers differ: student {sorted(student_states)}, reference {sorted(reference_states)}"
        )
    drifts = {
        layer: masked_mse(student_states[layer], reference_states[layer], response_mask)
        for layer in sorted(student_states)
    }
    parts = list(drifts.values())
    if normalise:
        zeros = {layer: torch.zeros_like(reference_states[layer]) for layer in drifts}
        parts = [
            drifts[layer] / masked_mse(reference_states[layer], zeros[layer], response_mask).clamp(min=1e-12)
            for layer in drifts
        ]
    total = torch.stack(parts).mean()
    terms = {"anchor": float(total.detach())}
    terms.update({f"anchor_drift.L{layer}": float(v.detach()) for layer, v in drifts.items()})
    return LossResult(total, terms)
