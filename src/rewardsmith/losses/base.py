"""What every loss returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LossResult:
    """total: scalar tensor to backpropagate. terms: named scalar parts (detached floats) for the log."""

    total: torch.Tensor
    terms: dict[str, float] = field(default_factory=dict)
