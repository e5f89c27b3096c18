"""Known answers for the W2S losses: confidence loss (threshold, warm-up, both forms) and anchor MSE."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rewardsmith.losses.anchor import anchor_loss, masked_mse
from rewardsmith.losses.w2s import (
    confidence_loss,
    harden_by_quantile,
    linear_warmup_coef,
    naive_w2s_loss,
    openai_warmup_coef,
)
from rewardsmith.train.objectives import StepInfo
from rewardsmith.w2s.config import ConfidenceSettings
from rewardsmith.w2s.objectives.confidence import ConfidenceObjective


def _bce(margin: float, target: float) -> float:
    p = 1.0 / (1.0 + math.exp(-margin))
    return -(target * math.log(p) + (1 - target) * math.log(1 - p))


def test_naive_is_soft_bt_by_hand() -> None:
    chosen, rejected = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])
    q = torch.tensor([0.8, 0.3])
    expected = (_bce(1.0, 0.8) + _bce(-2.0, 0.3)) / 2
    assert naive_w2s_loss(chosen, rejected, q).total.item() == pytest.approx(expected, rel=1e-6)


def test_openai_warmup_ramps_then_jumps() -> None:
    assert openai_warmup_coef(0.0, 0.2, 0.5) == 0.0
    assert openai_warmup_coef(0.1, 0.2, 0.5) == pytest.approx(0.05)  # aux_coef * step_frac
    assert openai_warmup_coef(0.2, 0.2, 0.5) == pytest.approx(0.1)
    assert openai_warmup_coef(0.21, 0.2, 0.5) == 0.5  # the reference code's jump after warm-up


def test_linear_warmup_has_no_jump() -> None:
    assert linear_warmup_coef(0, 10, 0.5) == 0.0
    assert linear_warmup_coef(5, 10, 0.5) == pytest.approx(0.25)
    assert linear_warmup_coef(10, 10, 0.5) == 0.5
    assert linear_warmup_coef(50, 10, 0.5) == 0.5
    assert linear_warmup_coef(0, 0, 0.5) == 0.5


def test_quantile_threshold_matches_teacher_positive_rate() -> None:
    # Student probabilities; teacher says 2 of 4 pairs are positive (rate 0.5).
    probs = torch.tensor([0.9, 0.6, 0.4, 0.2])
    hard, threshold = harden_by_quantile(probs, 0.5)
    # p0 = 1 - p = [0.1, 0.4, 0.6, 0.8]; quantile(p0, 0.5) = 0.5 (linear interpolation); h = p0 < 0.5.
    assert threshold.item() == pytest.approx(0.5)
    assert hard.tolist() == [1.0, 1.0, 0.0, 0.0]
    hard_low, _ = harden_by_quantile(probs, 0.25)  # quantile(p0, .25) = 0.325 -> only the top pair
    assert hard_low.tolist() == [1.0, 0.0, 0.0, 0.0]


def test_confidence_loss_by_hand() -> None:
    # margins d = [2, 0.5, -0.5, -2]; teacher q = [0.6, 0.6, 0.4, 0.4] (rate 0.5); h = [1, 1, 0, 0].
    chosen = torch.tensor([2.0, 0.5, -0.5, -2.0])
    rejected = torch.zeros(4)
    q = torch.tensor([0.6, 0.6, 0.4, 0.4])
    c = 0.5
    targets = [(1 - c) * 0.6 + c, (1 - c) * 0.6 + c, (1 - c) * 0.4, (1 - c) * 0.4]
    expected = np.mean([_bce(d, t) for d, t in zip([2.0, 0.5, -0.5, -2.0], targets, strict=True)])
    result = confidence_loss(chosen, rejected, q, coef=c)
    assert result.total.item() == pytest.approx(expected, rel=1e-6)
    assert result.terms["hardened_rate"] == 0.5
    # coef 0 is the naive loss; a non-zero coef changes it.
    assert confidence_loss(chosen, rejected, q, coef=0.0).total.item() == pytest.approx(
        naive_w2s_loss(chosen, rejected, q).total.item()
    )
    assert result.total.item() != pytest.approx(naive_w2s_loss(chosen, rejected, q).total.item())


def test_confidence_target_has_no_gradient_through_hardening() -> None:
    """The gradient is exactly that of BCE against a constant target: (sigmoid(d) - t) / N per pair, with
    t = (1 - c) q + c h and h treated as data (no gradient through the quantile threshold)."""
    d = torch.tensor([1.0, -1.0, 0.3], requires_grad=True)
    q = torch.tensor([0.7, 0.3, 0.6])
    c = 0.5
    result = confidence_loss(d, torch.zeros(3), q, coef=c)
    result.total.backward()
    hard, _ = harden_by_quantile(torch.sigmoid(d.detach()), q.mean())
    target = (1 - c) * q + c * hard
    expected = (torch.sigmoid(d.detach()) - target) / 3
    assert d.grad is not None
    assert torch.allclose(d.grad, expected, atol=1e-6)


def test_buffer_changes_the_threshold() -> None:
    chosen = torch.tensor([0.2, 0.1, -0.1, -0.2])
    q = torch.tensor([0.9, 0.9, 0.9, 0.1])  # teacher positive rate 0.7
    batch_only = confidence_loss(chosen, torch.zeros(4), q, coef=0.5)
    pool = torch.cat([torch.full((16,), 0.99), torch.sigmoid(chosen)])  # confident history: high threshold
    buffered = confidence_loss(chosen, torch.zeros(4), q, coef=0.5, pool=pool)
    assert buffered.terms["hardened_rate"] < batch_only.terms["hardened_rate"]
    assert buffered.total.item() != pytest.approx(batch_only.total.item())


def _batch(margins: list[float], labels: list[float]) -> dict[str, torch.Tensor]:
    return {"labels": torch.tensor(labels), "margins": torch.tensor(margins)}


class _FixedModel:
    """Returns preset rewards: chosen = margins, rejected = 0."""

    def __init__(self, margins: torch.Tensor):
        self.margins = margins

    def __call__(self, batch: dict[str, torch.Tensor], hidden_layers: object = ()) -> object:
        from rewardsmith.models.reward_model import RewardOutput

        rewards = torch.cat([self.margins, torch.zeros_like(self.margins)])
        return RewardOutput(rewards, torch.zeros(1), torch.zeros(1, dtype=torch.bool))


def test_confidence_objective_forms_and_buffer_state() -> None:
    margins = torch.tensor([1.0, 0.3, -0.2, -1.0])
    batch = _batch(margins.tolist(), [0.7, 0.6, 0.6, 0.3])
    model = _FixedModel(margins)
    info = StepInfo(step=5, total_steps=100)
    openai = ConfidenceObjective(ConfidenceSettings("openai", aux_coef=0.5, warmup_frac=0.1))
    eleuther = ConfidenceObjective(ConfidenceSettings("eleuther", aux_coef=0.5, warmup_frac=0.1, buffer_size=8))
    a = openai(model, batch, info)  # type: ignore[arg-type]
    b = eleuther(model, batch, info)  # type: ignore[arg-type]
    assert a.terms["confidence_coef"] == pytest.approx(0.5 * 0.05)  # step_frac 0.05
    assert b.terms["confidence_coef"] == pytest.approx(0.5 * 5 / 10)  # 5 of 10 warm-up steps
    assert len(eleuther.buffer) == 4
    state = eleuther.state_dict()
    fresh = ConfidenceObjective(ConfidenceSettings("eleuther", buffer_size=8))
    fresh.load_state_dict(state)
    assert torch.equal(fresh.buffer, eleuther.buffer)
    eleuther(model, batch, info)  # type: ignore[arg-type]
    eleuther(model, batch, info)  # type: ignore[arg-type]
    assert len(eleuther.buffer) == 8  # rolling: capped at buffer_size


def test_masked_mse_excludes_prompt_and_padding_by_hand() -> None:
    # Two sequences, T = 4, H = 2. Mask: seq 0 response = tokens 2, 3; seq 1 response = token 1 only
    # (token 0 prompt, tokens 2-3 padding).
    student = torch.zeros(2, 4, 2)
    reference = torch.zeros(2, 4, 2)
    student[0, 2] = torch.tensor([1.0, 1.0])  # sq err mean over H = 1
    student[0, 3] = torch.tensor([2.0, 0.0])  # (4 + 0) / 2 = 2
    student[1, 1] = torch.tensor([3.0, 1.0])  # (9 + 1) / 2 = 5
    student[0, 0] = torch.tensor([100.0, 100.0])  # prompt token: must not count
    student[1, 3] = torch.tensor([50.0, 50.0])  # padding: must not count
    mask = torch.tensor([[False, False, True, True], [False, True, False, False]])
    # seq 0: (1 + 2) / 2 = 1.5; seq 1: 5; mean = 3.25
    assert masked_mse(student, reference, mask).item() == pytest.approx(3.25)
    full = torch.ones_like(mask)
    assert masked_mse(student, reference, full).item() != pytest.approx(3.25)


def test_anchor_loss_averages_layers_and_logs_drift() -> None:
    mask = torch.tensor([[True, True]])
    s = {1: torch.ones(1, 2, 3), 2: torch.full((1, 2, 3), 2.0)}
    r = {1: torch.zeros(1, 2, 3), 2: torch.zeros(1, 2, 3)}
    result = anchor_loss(s, r, mask)
    assert result.terms["anchor_drift.L1"] == pytest.approx(1.0)
    assert result.terms["anchor_drift.L2"] == pytest.approx(4.0)
    assert result.total.item() == pytest.approx(2.5)
    with pytest.raises(ValueError):
        anchor_loss(s, {1: r[1]}, mask)


def test_anchor_loss_zero_at_reference_and_has_gradient() -> None:
    x = torch.randn(2, 3, 4, requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, True, True]])
    assert masked_mse(x, x.detach(), mask).item() == 0.0
    masked_mse(x, torch.zeros(2, 3, 4), mask).backward()
    assert x.grad is not None
    assert torch.all(x.grad[0, 1] == 0) and torch.all(x.grad[1, 0] == 0)  # masked tokens get no gradient
