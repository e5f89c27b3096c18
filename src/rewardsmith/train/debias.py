"""Length debiasing of pair training (TrainConfig.debias) as one objective wrapper, so the Trainer holds no
debias policy: it asks any objective for its training hooks (rewardsmith.train.objectives.TrainingHooks) and
calls them.

- length-covariate: a training-only h(length) head attached for the run (rewardsmith.models.debias), prefit on
  the pairs' lengths alone before training, removed after it (scores never see it);
- odin: a length head and a quality head attached for the run, and ODIN's regulariser added to the inner
  objective's loss on the same forward (rewardsmith.losses.debias);
- length-balanced: pair weights under which chosen-longer and chosen-shorter pairs carry equal mass.

Each kind's head trains at its own learning rate (DebiasSettings.lr), named to the Trainer as a parameter group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rewardsmith.config import DebiasSettings
from rewardsmith.data.collate import EncodedPair
from rewardsmith.losses.base import LossResult
from rewardsmith.losses.debias import odin_regulariser
from rewardsmith.models.debias import attach_debias, detach_debias, prefit_covariate
from rewardsmith.train.objectives import Objective, StepInfo, TrainingHooks


def response_tokens(pair: EncodedPair) -> tuple[int, int]:
    """Response token counts (chosen, rejected) of an encoded pair."""
    return sum(pair.chosen.response_mask), sum(pair.rejected.response_mask)


def length_balance_weights(encoded: Sequence[EncodedPair]) -> list[float]:
    """Pair weights under which pairs whose preferred response (label >= 0.5: chosen) is the longer one and
    pairs where it is the shorter one carry equal total mass; ties keep weight 1. Normalised to mean 1. All
    ones when either group is empty (nothing to balance)."""
    sides = []
    for p in encoded:
        c, r = response_tokens(p)
        diff = (c - r) if p.label >= 0.5 else (r - c)
        sides.append(0 if diff == 0 else (1 if diff > 0 else -1))
    longer, shorter = sides.count(1), sides.count(-1)
    if not longer or not shorter:
        return [1.0] * len(encoded)
    half = (longer + shorter) / 2
    raw = [1.0 if s == 0 else half / (longer if s > 0 else shorter) for s in sides]
    mean = sum(raw) / len(raw)
    return [w / mean for w in raw]


class DebiasedObjective(TrainingHooks):
    """`inner` trained under one debias kind (not "none"). Delegates checkpoint state to `inner`."""

    def __init__(self, inner: Objective, settings: DebiasSettings):
        self.inner = inner
        self.settings = settings

    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        result = self.inner(model, batch, info)
        if self.settings.kind != "odin":
            return result
        core = getattr(model, "module", model)  # under DDP the heads live on the wrapped module
        out = core.last_debias
        if out is None:
            raise RuntimeError("the odin objective needs a training forward with the length head attached")
        reg = odin_regulariser(
            out.quality,
            out.extra,
            out.log_length,
            core.head.weight,
            core.debias.weight_layer.weight,
            self.settings.correlation_coef,
            self.settings.orthogonal_coef,
        )
        total = result.total + reg.total
        return LossResult(
            total, {**result.terms, **reg.terms, "odin": float(reg.total.detach()), "total": float(total.detach())}
        )

    # -- training hooks ---------------------------------------------------------------------------------------
    def pair_weights(self, encoded: Sequence[EncodedPair]) -> list[float] | None:
        return length_balance_weights(encoded) if self.settings.kind == "length-balanced" else None

    def prepare(self, model: Any, encoded: Sequence[EncodedPair]) -> None:
        if attach_debias(model, self.settings.kind) and self.settings.kind == "length-covariate":
            lengths = torch.log1p(torch.tensor([response_tokens(p) for p in encoded], dtype=torch.float32))
            with torch.random.fork_rng():
                prefit_covariate(
                    model.debias,
                    lengths[:, 0],
                    lengths[:, 1],
                    torch.tensor([p.label for p in encoded], dtype=torch.float32),
                )

    def finish(self, model: Any) -> None:
        detach_debias(model)

    def parameter_groups(self) -> dict[str, float]:
        return {"debias.": self.settings.lr}

    def state_dict(self) -> Any:
        return self.inner.state_dict() if hasattr(self.inner, "state_dict") else None

    def load_state_dict(self, state: Any) -> None:
        if hasattr(self.inner, "load_state_dict"):
            self.inner.load_state_dict(state)


def debiased(objective: Objective, settings: DebiasSettings) -> Objective:
    """The objective a debias setting trains with: `objective` itself for "none", else wrapped."""
    return objective if settings.kind == "none" else DebiasedObjective(objective, settings)
