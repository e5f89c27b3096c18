"""bf16 scoring stays within its stated tolerance of fp32 (docs: README "Speed"): on the pretrained MiniLM and real
HH-RLHF texts from the shipped sample, every reward differs from its fp32 value by at most 5% of the fp32
rewards' standard deviation (2% measured on the trained harmless model), and the preferred side of each pair is
the same in at least 98% of pairs. The batched inference path is the one `score`, `eval` and the server use. bf16 is
forced where the CPU would emulate it (models/precision.py runs fp32 there, the second test), so the tolerance is
checked on every machine."""

from __future__ import annotations

import numpy as np
import pytest

from rewardsmith.config import ModelConfig
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.sources import sample_dir
from rewardsmith.evaluate.scoring import score_pairs
from rewardsmith.models import build_reward_model, precision

pytestmark = pytest.mark.slow  # scores the pretrained MiniLM on real data: `make test`, not test-fast

TOLERANCE = 0.05  # of the fp32 rewards' standard deviation


def _model_and_pairs(n: int) -> tuple:
    with sample_dir() as folder:
        pairs = load_dataset("hh-rlhf/harmless-base", data_dir=str(folder)).pairs[:n]
    model, tok = build_reward_model(ModelConfig(backbone="minilm", max_length=128), seed=3)
    return model, tok, pairs


def test_bf16_scores_within_tolerance_of_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "bf16_native", lambda device: True)
    model, tok, pairs = _model_and_pairs(120)
    fp32 = np.stack(score_pairs(model, tok, pairs, 128, 48, 32, bf16=False))
    bf16 = np.stack(score_pairs(model, tok, pairs, 128, 48, 32, bf16=True))
    assert np.abs(bf16 - fp32).max() <= TOLERANCE * fp32.std()
    assert not np.array_equal(bf16, fp32)  # bf16 really ran
    agree = np.mean(np.sign(fp32[0] - fp32[1]) == np.sign(bf16[0] - bf16[1]))
    assert agree >= 0.98


def test_a_cpu_without_native_bf16_scores_a_bf16_request_in_fp32(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(precision, "bf16_native", lambda device: False)
    precision._say_fp32_instead.cache_clear()
    model, tok, pairs = _model_and_pairs(24)
    fp32 = np.stack(score_pairs(model, tok, pairs, 128, 48, 32, bf16=False))
    asked = np.stack(score_pairs(model, tok, pairs, 128, 48, 32, bf16=True))
    assert np.array_equal(asked, fp32)
    assert capsys.readouterr().err.count(precision.FP32_INSTEAD) == 1
