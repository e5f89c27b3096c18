"""Reward model, pair encoding and Bradley-Terry loss: known answers and invariances."""

from __future__ import annotations

import math

import pytest
import torch

from rewardsmith.config import ICRMModelConfig, LoraSettings, ModelConfig
from rewardsmith.data.collate import PairEncoder, collate_pairs, encode_pairs, length_grouped_batches, pad_texts
from rewardsmith.data.schema import PreferencePair, Turn
from rewardsmith.evaluate.scoring import score_encoded, score_pairs
from rewardsmith.losses.bt import bradley_terry_loss
from rewardsmith.models import build_model, build_reward_model, load_model, save_model
from rewardsmith.models.reward_model import pool

torch.set_num_threads(1)


def _pairs(n: int = 12) -> list[PreferencePair]:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
    return [
        PreferencePair(
            (Turn("user", f"question {i} " + " ".join(words[: i % 7 + 1])),),
            " ".join(words[: (i * 3) % 11 + 1]),
            " ".join(reversed(words[: (i * 5) % 9 + 2])),
        )
        for i in range(n)
    ]


def test_bt_loss_known_value() -> None:
    chosen, rejected = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])
    result = bradley_terry_loss(chosen, rejected)
    expected = (-math.log(1 / (1 + math.exp(-1))) - math.log(1 / (1 + math.exp(2)))) / 2
    assert result.total.item() == pytest.approx(expected, rel=1e-6)
    assert result.terms["accuracy"] == pytest.approx(0.5)


def test_bt_loss_soft_label_and_shift_invariance() -> None:
    c, r = torch.randn(8), torch.randn(8)
    q = torch.rand(8)
    base = bradley_terry_loss(c, r, q).total
    assert bradley_terry_loss(c + 3.7, r + 3.7, q).total.item() == pytest.approx(base.item(), rel=1e-6)
    # swapping the sides and flipping the label leaves the loss unchanged
    assert bradley_terry_loss(r, c, 1 - q).total.item() == pytest.approx(base.item(), rel=1e-6)
    # q = 0.5 is minimised at d = 0: the loss there is log 2
    at_zero = bradley_terry_loss(torch.zeros(3), torch.zeros(3), torch.full((3,), 0.5)).total.item()
    assert at_zero == pytest.approx(math.log(2))


def test_bt_label_changes_loss() -> None:
    c, r = torch.tensor([2.0]), torch.tensor([0.0])
    assert bradley_terry_loss(c, r, torch.tensor([1.0])).total < bradley_terry_loss(c, r, torch.tensor([0.3])).total


@pytest.fixture(scope="module")
def tiny_bert():
    return build_reward_model(ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8))


@pytest.fixture(scope="module")
def tiny_llama():
    return build_reward_model(ModelConfig(backbone="tiny-llama", max_length=48, min_prompt_tokens=8))


def test_truncation_keeps_prompt_end_and_response(tiny_bert) -> None:
    _, tok = tiny_bert
    enc = PairEncoder(tok, max_length=20, min_prompt_tokens=4)
    long_prompt = " ".join(f"w{i}" for i in range(50)) + " final question"
    out = enc.encode(long_prompt, "short answer")
    tokens = tok.convert_ids_to_tokens(out.input_ids)
    assert len(out.input_ids) == 20 and out.prompt_truncated and not out.response_truncated
    assert "question" in tokens  # the end of the prompt survives
    assert [t for t, m in zip(tokens, out.response_mask, strict=True) if m] == tok.tokenize("short answer")
    long_response = " ".join(["word"] * 60)
    out = enc.encode("the prompt here", long_response)
    assert len(out.input_ids) == 20 and out.response_truncated and sum(out.response_mask) == 20 - 3 - 3


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_llama"])
def test_no_sequence_exceeds_max_length_even_below_min_prompt_tokens(fixture, request) -> None:
    """min_prompt_tokens at or above the budget once let a negative slice keep whole responses (224 tokens at
    max_length 64); now the prompt gets half the budget there and every sequence fits."""
    _, tok = request.getfixturevalue(fixture)
    long_prompt, long_response = " ".join(["ask"] * 300), " ".join(["answer"] * 300)
    for max_length in (12, 32, 64, 65, 66, 200):
        enc = PairEncoder(tok, max_length=max_length, min_prompt_tokens=64)
        for prompt, response in ((long_prompt, long_response), ("hi", long_response), (long_prompt, "ok")):
            out = enc.encode(prompt, response)
            assert len(out.input_ids) <= max_length, (max_length, len(out.input_ids))
            assert sum(out.response_mask) >= 1
        out = enc.encode(long_prompt, long_response)
        assert len(out.input_ids) == max_length and out.prompt_truncated and out.response_truncated


def test_response_mask_excludes_prompt_and_padding(tiny_bert) -> None:
    _, tok = tiny_bert
    enc = PairEncoder(tok, 48, 8)
    texts = [enc.encode("a prompt", "one two"), enc.encode("another longer prompt text", "x")]
    batch = pad_texts(texts, tok.pad_token_id)
    assert batch["response_mask"].sum().item() == len(tok.tokenize("one two")) + len(tok.tokenize("x"))
    assert not (batch["response_mask"] & ~batch["attention_mask"].bool()).any()


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_llama"])
def test_scores_invariant_to_batch_size_and_padding_side(fixture, request) -> None:
    model, tok = request.getfixturevalue(fixture)
    pairs = _pairs(12)
    results = [
        score_pairs(model, tok, pairs, 48, 8, batch_size=bs, padding_side=side)
        for bs in (1, 8, 32)
        for side in ("right", "left")
    ]
    ref = results[0]
    for chosen, rejected in results[1:]:
        assert torch.allclose(torch.tensor(chosen), torch.tensor(ref[0]), atol=1e-4)
        assert torch.allclose(torch.tensor(rejected), torch.tensor(ref[1]), atol=1e-4)


def test_pooling_modes_pick_expected_tokens() -> None:
    hidden = torch.arange(2 * 4 * 1, dtype=torch.float32).reshape(2, 4, 1)
    attention = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]])
    response = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
    assert pool(hidden, attention, response, "mean").squeeze(-1).tolist() == [1.5, 6.5]
    assert pool(hidden, attention, response, "last").squeeze(-1).tolist() == [2.0, 7.0]
    assert pool(hidden, attention, response, "cls").squeeze(-1).tolist() == [0.0, 5.0]


@pytest.mark.parametrize("backbone,lora_r", [("tiny-bert", 0), ("tiny-bert", 4), ("tiny-llama", 0), ("tiny-llama", 4)])
def test_save_load_roundtrip_scores_equal(tmp_path, backbone, lora_r) -> None:
    cfg = ModelConfig(
        backbone=backbone,
        max_length=48,
        min_prompt_tokens=8,
        lora=LoraSettings(r=lora_r, target_modules=["q_proj", "v_proj"] if backbone == "tiny-llama" else []),
    )
    model, tok = build_reward_model(cfg, seed=3)
    with torch.no_grad():  # move LoRA B off zero so the adapter matters
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(0.05 * torch.randn_like(p))
    pairs = _pairs(6)
    before = score_pairs(model, tok, pairs, 48, 8)
    save_model(model, tok, tmp_path / "m", cfg)
    loaded, tok2, meta = load_model(tmp_path / "m")
    after = score_pairs(loaded, tok2, pairs, 48, 8)
    assert meta["backbone_storage"] == (
        "lora-adapter" if lora_r else "sequence-classification" if backbone == "tiny-llama" else "full"
    )
    assert abs(before[0] - after[0]).max() < 1e-5 and abs(before[1] - after[1]).max() < 1e-5


def test_decoder_export_loads_as_sequence_classifier(tmp_path, tiny_llama) -> None:
    from transformers import AutoModelForSequenceClassification

    model, tok = tiny_llama
    cfg = ModelConfig(backbone="tiny-llama", max_length=48, min_prompt_tokens=8)
    save_model(model, tok, tmp_path / "m", cfg)
    seq = AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    enc = PairEncoder(tok, 48, 8)
    text = enc.encode("\n\nHuman: hi\n\nAssistant:", "hello there")
    batch = pad_texts([text], tok.pad_token_id)
    with torch.no_grad():
        ours = model(batch).rewards.item()
        theirs = seq(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.item()
    assert ours == pytest.approx(theirs, abs=1e-5)


def test_length_grouped_batches_cover_all_and_are_deterministic() -> None:
    lengths = [(i * 37) % 100 for i in range(103)]
    a = length_grouped_batches(lengths, 8, seed=1, mega_factor=2)
    assert sorted(i for b in a for i in b) == list(range(103))
    assert a == length_grouped_batches(lengths, 8, seed=1, mega_factor=2)
    assert a != length_grouped_batches(lengths, 8, seed=2, mega_factor=2)


def test_collate_orders_chosen_then_rejected(tiny_bert) -> None:
    model, tok = tiny_bert
    enc = PairEncoder(tok, 48, 8)
    encoded = encode_pairs(enc, _pairs(3))
    batch = collate_pairs(encoded, tok.pad_token_id)
    assert batch["input_ids"].shape[0] == 6 and batch["labels"].tolist() == [1.0, 1.0, 1.0]
    scores = score_encoded(model, [p.chosen for p in encoded] + [p.rejected for p in encoded], tok.pad_token_id)
    with torch.no_grad():
        direct = model(batch).rewards.numpy()
    assert abs(direct - scores).max() < 1e-5


def test_frozen_backbone_is_named_not_copied_and_reloads(tmp_path) -> None:
    cfg = ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8, freeze_backbone=True)
    model, tok = build_reward_model(cfg, seed=1)
    save_model(model, tok, tmp_path / "m", cfg)
    assert not (tmp_path / "m" / "model.safetensors").exists()
    loaded, tok2, meta = load_model(tmp_path / "m")
    assert meta["backbone_storage"] == "named"
    pairs = _pairs(4)
    before, after = score_pairs(model, tok, pairs, 48, 8), score_pairs(loaded, tok2, pairs, 48, 8)
    assert abs(before[0] - after[0]).max() < 1e-6


@pytest.mark.parametrize("mode", ["set", "concat"])
def test_icrm_model_saves_and_loads_through_the_same_path(tmp_path, mode) -> None:
    from rewardsmith.models.beta import BetaRewardModel

    backbone = "tiny-bert" if mode == "set" else "tiny-llama"
    cfg = ICRMModelConfig(
        backbone=backbone,
        mode=mode,
        max_length=48,
        min_prompt_tokens=8,
        context_dim=8,
        hidden_dim=16,
        freeze_backbone=mode == "set",
    )
    model, tok = build_model(cfg, seed=2)
    assert isinstance(model, BetaRewardModel) and not hasattr(model, "head")
    save_model(model, tok, tmp_path / "m", cfg)
    loaded, _, meta = load_model(tmp_path / "m")
    assert meta["model_type"] == "icrm" and isinstance(meta["model_config"], ICRMModelConfig)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
