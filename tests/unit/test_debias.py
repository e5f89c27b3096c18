"""Length debiasing: the pair weights, the weighted losses, the ODIN regulariser, the training-only heads (attached
for training, absent from scoring and saved models) and that each scheme takes length off the reward on a task
whose only signal is length."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from rewardsmith.config import DebiasSettings, ModelConfig, TrainConfig
from rewardsmith.data.collate import PairEncoder, encode_pairs
from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.errors import ConfigError
from rewardsmith.evaluate.metrics import length_correlation
from rewardsmith.evaluate.scoring import score_pairs
from rewardsmith.losses.bt import bradley_terry_loss
from rewardsmith.losses.debias import odin_regulariser, pearson
from rewardsmith.losses.w2s import confidence_loss
from rewardsmith.models import build_reward_model
from rewardsmith.models.debias import attach_debias
from rewardsmith.models.factory import load_model, save_model
from rewardsmith.train.debias import length_balance_weights, response_tokens
from rewardsmith.train.trainer import PairBatchPlan, train_pairs

torch.set_num_threads(1)
MODEL_CFG = ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8)
GOOD = ["helpful", "clear", "accurate", "kind", "detailed", "careful", "honest"]
BAD = ["rude", "wrong", "vague", "lazy", "useless", "sloppy", "false"]
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


def length_only_pairs(n: int, seed: int = 0) -> list[PreferencePair]:
    """The chosen response is always the longer one and the words are random: length is the only signal."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        short = rng.randint(1, 4)
        longer = " ".join(rng.choices(WORDS, k=short + rng.randint(4, 9)))
        pairs.append(
            PreferencePair(user_prompt(f"question {i}"), longer, " ".join(rng.choices(WORDS, k=short)), pair_id=str(i))
        )
    return pairs


def _encoded(pairs):
    tok = build_reward_model(MODEL_CFG)[1]
    return encode_pairs(PairEncoder(tok, MODEL_CFG.max_length, MODEL_CFG.min_prompt_tokens), pairs), tok


def test_balance_weights_give_both_directions_equal_mass() -> None:
    pairs = length_only_pairs(30)
    pairs += [PreferencePair(p.prompt, p.rejected, p.chosen, pair_id=f"s{k}") for k, p in enumerate(pairs[:10])]
    pairs.append(PreferencePair(user_prompt("tie"), "alpha beta", "gamma delta", pair_id="tie"))
    encoded, _ = _encoded(pairs)
    weights = np.array(length_balance_weights(encoded))
    side = np.array([np.sign(c - r) for c, r in map(response_tokens, encoded)])
    assert weights[side > 0].sum() == pytest.approx(weights[side < 0].sum())
    assert weights.mean() == pytest.approx(1.0)
    assert weights[side == 0] == pytest.approx(weights[side > 0][0] * 30 / 20)  # tie keeps 1 before normalising
    # Soft labels below one half prefer the rejected side: the direction follows the label.
    flipped = [replace(p, label=0.2) for p in encoded]
    assert length_balance_weights(flipped) == pytest.approx(list(weights))
    # One direction only: nothing to balance.
    assert length_balance_weights(encoded[:30]) == [1.0] * 30


def test_plan_serves_each_pairs_weight_through_swaps() -> None:
    encoded, tok = _encoded(length_only_pairs(24))
    weights = [float(i + 1) for i in range(24)]
    plan = PairBatchPlan(encoded, tok.pad_token_id, 8, 2.0, seed=3, weights=weights)
    for b in range(plan.natural_batches or 0):
        tensors = plan.batch(b).tensors
        assert tensors["weights"].tolist() == [weights[i] for i in tensors["pair_index"].tolist()]
    with pytest.raises(ValueError, match="3 weights for 24 pairs"):
        PairBatchPlan(encoded, tok.pad_token_id, 8, 1.0, seed=0, weights=[1.0, 1.0, 1.0])


def test_weighted_losses() -> None:
    torch.manual_seed(0)
    c, r, q = torch.randn(6), torch.randn(6), torch.rand(6)
    plain = bradley_terry_loss(c, r, q).total
    assert torch.allclose(bradley_terry_loss(c, r, q, torch.ones(6)).total, plain)
    # A zero weight removes a pair; the rest keep their share of the mean.
    w = torch.tensor([0.0, 1.2, 1.2, 1.2, 1.2, 1.2])
    assert torch.allclose(bradley_terry_loss(c, r, q, w).total, bradley_terry_loss(c[1:], r[1:], q[1:]).total)
    conf = confidence_loss(c, r, q, 0.3).total
    assert torch.allclose(confidence_loss(c, r, q, 0.3, weights=torch.ones(6)).total, conf)
    assert not torch.allclose(confidence_loss(c, r, q, 0.3, weights=w).total, conf)


def test_odin_regulariser_pushes_each_head_its_way() -> None:
    torch.manual_seed(0)
    length = torch.rand(64)
    quality = (length + 0.1 * torch.randn(64)).requires_grad_()
    length_score = torch.randn(64).requires_grad_()
    wq, wl = torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)
    reg = odin_regulariser(quality, length_score, length, wq, wl)
    reg.total.backward()
    assert reg.terms["rho_quality"] == pytest.approx(float(pearson(quality.detach(), length)), abs=1e-6)
    step = 1e-2
    with torch.no_grad():  # one gradient step lowers the quality head's |correlation| and raises the length head's
        q2, l2 = quality - step * quality.grad, length_score - step * length_score.grad
    assert pearson(q2, length) < pearson(quality, length)
    assert abs(pearson(l2, length)) > abs(pearson(length_score, length))  # either direction explains length
    assert abs(float(pearson(torch.ones(5), torch.arange(5.0)))) < 1e-6  # constant: no correlation, no NaN
    zero = torch.zeros(5, requires_grad=True)  # a zero-initialised length head: a finite gradient to start from
    pearson(zero, torch.arange(5.0)).backward()
    assert zero.grad is not None and bool(torch.isfinite(zero.grad).all())


def test_length_correlation_matches_scipy_with_a_ci() -> None:
    rng = np.random.default_rng(0)
    lc, lr = rng.integers(10, 400, 200).astype(float), rng.integers(10, 400, 200).astype(float)
    sc, sr = 0.01 * lc + rng.normal(size=200), 0.01 * lr + rng.normal(size=200)
    est = length_correlation(sc, sr, lc, lr, n_boot=300)
    assert est.estimate == pytest.approx(spearmanr(np.r_[sc, sr], np.r_[lc, lr]).statistic)
    assert est.low < est.estimate < est.high and est.low > 0
    assert np.isnan(length_correlation([1.0], [0.0], [3.0], [2.0]).estimate)


def confounded_pairs(n: int, seed: int, chosen_longer: float) -> list[PreferencePair]:
    """The chosen response carries a good word and the rejected a bad one; the chosen is the longer one in a
    fraction `chosen_longer` of pairs (0.8: length is a shortcut; 0.5: length says nothing)."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        short, long = rng.randint(1, 4), rng.randint(6, 12)
        lc, lr = (long, short) if rng.random() < chosen_longer else (short, long)
        chosen = " ".join([*rng.choices(WORDS, k=lc - 1), rng.choice(GOOD)])
        rejected = " ".join([*rng.choices(WORDS, k=lr - 1), rng.choice(BAD)])
        pairs.append(PreferencePair(user_prompt(f"question {i}"), chosen, rejected, pair_id=str(i)))
    return pairs


def _train(run_dir, kind: str, seed: int = 0, pairs: list[PreferencePair] | None = None):
    cfg = TrainConfig(
        epochs=3,
        batch_size=8,
        lr=1e-3,
        checkpoint_every=0,
        progress=False,
        seed=seed,
        debias=DebiasSettings(kind=kind, lr=1e-2),
    )
    model, tok = build_reward_model(MODEL_CFG, seed=seed)
    pairs = pairs if pairs is not None else confounded_pairs(128, seed, chosen_longer=0.8)
    return train_pairs(model, tok, pairs, cfg, MODEL_CFG, run_dir).model, tok


def _evaluate(model, tok) -> tuple[float, float]:
    """(Spearman of reward and length, accuracy) on pairs where length says nothing."""
    pairs = confounded_pairs(100, seed=99, chosen_longer=0.5)
    chosen, rejected = score_pairs(model, tok, pairs, MODEL_CFG.max_length, 16)
    lengths = [len(p.chosen) for p in pairs] + [len(p.rejected) for p in pairs]
    return float(spearmanr(np.r_[chosen, rejected], lengths).statistic), float((chosen > rejected).mean())


@pytest.mark.slow
def test_each_scheme_takes_length_off_the_reward(tmp_path) -> None:
    """Trained where the chosen response is longer in 80 % of pairs, plain BT's reward follows length. On pairs
    where length says nothing, the covariate and balanced schemes at least halve that correlation and are more
    accurate; ODIN's quality head is less correlated too (it overshoots to a negative correlation here, so
    only the reduction is asserted). Means over two seeds."""
    result = {
        kind: np.mean([_evaluate(*_train(tmp_path / f"{kind}{s}", kind, s)) for s in (0, 1)], axis=0)
        for kind in ("none", "length-covariate", "odin", "length-balanced")
    }
    assert result["none"][0] > 0.2, result
    for kind in ("length-covariate", "length-balanced"):
        assert abs(result[kind][0]) < result["none"][0] / 2, (kind, result)
    assert abs(result["odin"][0]) < result["none"][0], result
    assert result["length-covariate"][1] > result["none"][1], result
    assert result["length-balanced"][1] > result["none"][1], result


def test_training_head_is_gone_after_training_and_from_the_saved_model(tmp_path) -> None:
    model, tok = _train(tmp_path / "run", "odin")
    assert model.debias is None and model.last_debias is None
    assert not any(k.startswith("debias.") for k in model.state_dict())
    save_model(model, tok, tmp_path / "model", MODEL_CFG)
    loaded, _, _ = load_model(tmp_path / "model")
    pairs = length_only_pairs(8, seed=5)
    a, _ = score_pairs(model, tok, pairs, MODEL_CFG.max_length, 8)
    b, _ = score_pairs(loaded, tok, pairs, MODEL_CFG.max_length, 8)
    assert np.allclose(a, b, atol=1e-5)
    log = (tmp_path / "run" / "log.jsonl").read_text()
    assert '"rho_quality"' in log and '"cos_heads"' in log


def test_debias_only_for_pair_models() -> None:
    model, _ = build_reward_model(MODEL_CFG)
    assert attach_debias(model, "none") is False and attach_debias(model, "length-balanced") is False
    with pytest.raises(ConfigError, match="pairwise reward model"):
        attach_debias(torch.nn.Linear(2, 2), "odin")


def test_resume_with_a_debias_head_matches_uninterrupted(tmp_path) -> None:
    from test_trainer import Stop, stop_after

    def run(out, stop=None):
        cfg = TrainConfig(
            epochs=2,
            batch_size=8,
            lr=1e-3,
            checkpoint_every=3,
            progress=False,
            debias=DebiasSettings(kind="length-covariate"),
        )
        model, tok = build_reward_model(MODEL_CFG, seed=0)
        return train_pairs(
            model, tok, length_only_pairs(48), cfg, MODEL_CFG, out, on_step=[stop_after(stop)] if stop else []
        ).model

    full = run(tmp_path / "full")
    with pytest.raises(Stop):
        run(tmp_path / "cut", stop=7)
    resumed = run(tmp_path / "cut")
    for (name, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
