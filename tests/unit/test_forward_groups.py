"""Forward groups: a micro-batch's texts run as groups of similar length, each padded to its own longest, must
train exactly as one padded pass does (data.collate.forward_groups, PooledBackbone.encode, PairBatchPlan)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest
import torch
from test_trainer import Stop, stop_after

from helpers import easy_pairs
from rewardsmith.config import ModelConfig, TrainConfig
from rewardsmith.data.collate import (
    collate_pairs,
    encode_pairs,
    forward_groups,
    length_grouped_batches,
    random_batches,
)
from rewardsmith.data.templates import encoder_for
from rewardsmith.errors import CheckpointError
from rewardsmith.losses.bt import bradley_terry_loss
from rewardsmith.models import build_reward_model
from rewardsmith.train.trainer import PairBatchPlan, train_pairs

torch.set_num_threads(1)


def _padded_cost(lengths: list[int], groups: list[list[int]], overhead: int) -> int:
    return sum(len(g) * max(lengths[i] for i in g) + overhead for g in groups)


def _best_cost_by_search(lengths: list[int], overhead: int) -> int:
    """Every cut of the rows sorted by length into runs, tried one by one."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    best = None
    for k in range(len(order)):
        for cuts in itertools.combinations(range(1, len(order)), k):
            bounds = [0, *cuts, len(order)]
            groups = [order[a:b] for a, b in itertools.pairwise(bounds)]
            cost = _padded_cost(lengths, groups, overhead)
            best = cost if best is None else min(best, cost)
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_groups_are_the_cheapest_cut(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(3, 200) for _ in range(rng.randint(1, 9))]
    overhead = rng.choice([0, 16, 64, 256])
    groups = forward_groups(lengths, overhead)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert _padded_cost(lengths, groups, overhead) == _best_cost_by_search(lengths, overhead)


def test_one_group_where_cutting_saves_nothing() -> None:
    assert forward_groups([40] * 12) == [list(range(12))]
    assert len(forward_groups([250, 240, 30, 20, 25, 31])) == 2


def test_random_batches_cover_every_pair_once_in_a_seeded_order() -> None:
    a = random_batches(50, 8, seed=3)
    assert sorted(i for b in a for i in b) == list(range(50)) and [len(b) for b in a][:-1] == [8] * 6
    assert a == random_batches(50, 8, seed=3) and a != random_batches(50, 8, seed=4)


def _loss_and_grads(model, batch: dict[str, torch.Tensor]) -> tuple[float, dict[str, torch.Tensor], torch.Tensor]:
    model.zero_grad(set_to_none=True)
    out = model(batch, hidden_layers=(1,))
    half = out.rewards.shape[0] // 2
    loss = bradley_terry_loss(out.rewards[:half], out.rewards[half:], batch["labels"]).total
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return float(loss.detach()), grads, out.hidden_states[1].detach()


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-llama"])
def test_grouped_and_one_pass_give_the_same_loss_and_gradients(backbone: str) -> None:
    cfg = ModelConfig(backbone=backbone, max_length=48, min_prompt_tokens=8)
    model, tok = build_reward_model(cfg, seed=0)
    model.train()
    encoded = encode_pairs(encoder_for(tok, cfg), _varied_pairs(12))
    batch = PairBatchPlan(encoded, int(tok.pad_token_id), 12, 1.0, seed=0, grouped_forward=True).batch(0).tensors
    assert int(batch["forward_group"].max()) >= 1, "the test needs a batch cut into groups"
    loss_a, grads_a, hidden_a = _loss_and_grads(model, {k: v for k, v in batch.items() if k != "forward_group"})
    loss_b, grads_b, hidden_b = _loss_and_grads(model, batch)
    assert abs(loss_a - loss_b) <= 1e-5
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], atol=1e-5, rtol=1e-5, msg=name)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(hidden_b[real], hidden_a[real], atol=1e-5, rtol=1e-5)


def test_left_padded_rows_are_refused() -> None:
    model, tok = build_reward_model(ModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8), seed=0)
    encoded = encode_pairs(encoder_for(tok, ModelConfig(backbone="tiny-bert", max_length=32)), easy_pairs(4))
    batch = collate_pairs(encoded, int(tok.pad_token_id), padding_side="left")
    batch["forward_group"] = torch.arange(batch["input_ids"].shape[0]) % 2
    with pytest.raises(ValueError, match="right-padded"):
        model(batch)


def _varied_pairs(n: int) -> list:
    return [replace(p, chosen=" ".join([p.chosen] * 4)) if i % 3 == 0 else p for i, p in enumerate(easy_pairs(n, 5))]


_CFG = ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8)


def _run(out, batches: str, stop_at: int | None = None):
    train = TrainConfig(epochs=2, batch_size=8, lr=1e-3, checkpoint_every=2, progress=False, batches=batches)
    model, tok = build_reward_model(_CFG, seed=0)
    hooks = [stop_after(stop_at)] if stop_at else []
    return train_pairs(model, tok, _varied_pairs(48), train, _CFG, out, on_step=hooks)


@pytest.mark.parametrize("batches", ["length-grouped", "random"])
def test_a_stopped_run_resumes_exactly_with_either_batching(tmp_path, batches: str) -> None:
    full = _run(tmp_path / "full", batches)
    assert any("forward_group" in full.plan.batch(b).tensors for b in range(full.total_batches))
    with pytest.raises(Stop):
        _run(tmp_path / "cut", batches, stop_at=5)
    resumed = _run(tmp_path / "cut", batches)
    assert resumed.result.resumed_from_step == 4
    for (name, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_the_batchings_differ_and_a_resume_under_the_other_is_refused(tmp_path) -> None:
    lengths = [(i * 37) % 23 for i in range(40)]
    assert [sorted(b) for b in length_grouped_batches(lengths, 8, seed=1)] != [
        sorted(b) for b in random_batches(40, 8, seed=1)
    ]
    with pytest.raises(Stop):
        _run(tmp_path, "length-grouped", stop_at=3)
    with pytest.raises(CheckpointError, match="batches"):
        _run(tmp_path, "random")


def test_train_config_defaults_run_grouped_batches_and_grouped_forward() -> None:
    cfg = TrainConfig()
    assert cfg.batches == "length-grouped" and cfg.forward_groups and not cfg.compile
