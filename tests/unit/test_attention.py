"""The attention rewardsmith's backbones run (models/attention.py): plain SDPA in fp32, padding masks applied,
the fp32 core only where the rule says, and nothing of it saved into a model's config."""

from __future__ import annotations

import json

import pytest
import torch

from rewardsmith.config import ModelConfig
from rewardsmith.models import build_reward_model, load_model, save_model
from rewardsmith.models.attention import ATTENTION_NAME, FP32_CORE_MAX_HEAD_DIM, fp32_core, sdpa_attention


def _batch(tok, texts: list[str]) -> dict[str, torch.Tensor]:
    enc = tok(texts, padding=True, return_tensors="pt")
    mask = enc["attention_mask"]
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": mask,
        "token_type_ids": enc["token_type_ids"],
        "response_mask": mask.bool(),
        "position_ids": (mask.cumsum(1) - 1).clamp(min=0),
    }


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-llama"])
def test_built_models_use_it_and_score_as_plain_sdpa_in_fp32(backbone: str) -> None:
    model, tok = build_reward_model(ModelConfig(backbone=backbone, max_length=64), seed=0)
    assert model.backbone.config._attn_implementation == ATTENTION_NAME
    batch = _batch(tok, ["a short text", "a much longer text with many more words in it than the first"])
    ours = model(batch).rewards
    model.backbone.set_attn_implementation("sdpa")
    plain = model(batch).rewards
    assert torch.equal(ours, plain)


def test_padding_is_masked() -> None:
    """A text scores the same alone and beside a longer text that pads it (no mask would change it)."""
    model, tok = build_reward_model(ModelConfig(backbone="tiny-bert", max_length=64), seed=0)
    alone = model(_batch(tok, ["a short text"])).rewards[0]
    padded = model(_batch(tok, ["a short text", "a much longer text with many more words in it than that"])).rewards[0]
    assert torch.allclose(alone, padded, atol=1e-5)


def test_fp32_core_rule() -> None:
    def q(dim: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(1, 2, 4, dim, dtype=dtype)

    assert fp32_core(q(FP32_CORE_MAX_HEAD_DIM, torch.bfloat16))
    assert fp32_core(q(16, torch.float16))
    assert not fp32_core(q(FP32_CORE_MAX_HEAD_DIM + 1, torch.bfloat16))  # wider heads keep the bf16 core
    assert not fp32_core(q(32, torch.float32))


def test_bf16_core_upcast_equals_fp32_attention_rounded() -> None:
    """Under bf16 autocast a 32-wide head's output is the fp32 attention of the same bf16 inputs, rounded to
    bf16 once, with padded keys ignored."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 32).to(torch.bfloat16) for _ in range(3))
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :].expand(2, 1, 5, 5)
    module = torch.nn.Module()
    module.is_causal = False  # type: ignore[assignment]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = sdpa_attention(module, q, k, v, mask)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, expected.transpose(1, 2).to(torch.bfloat16))


def test_saved_config_does_not_record_it(tmp_path) -> None:
    cfg = ModelConfig(backbone="tiny-bert", max_length=64)
    model, tok = build_reward_model(cfg, seed=0)
    save_model(model, tok, tmp_path / "m", cfg)
    assert (tmp_path / "m" / "config.json").exists()  # a full fine-tune stores the backbone's config
    for path in (tmp_path / "m").glob("*.json"):
        assert ATTENTION_NAME not in json.dumps(json.loads(path.read_text()))
    loaded, _, _ = load_model(tmp_path / "m")
    assert loaded.backbone.config._attn_implementation == ATTENTION_NAME
