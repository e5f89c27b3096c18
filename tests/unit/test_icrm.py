"""ICRM: heads, set-mode pooling invariances, cache reuse, episode sampling, save/load, RL reward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rewardsmith.config import ICRMModelConfig
from rewardsmith.data.collate import PairEncoder
from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.icrm.config import EpisodeConfig
from rewardsmith.icrm.episodes import EpisodeSampler, PairPool, Standard, draw_demos, split_pool, target_episode
from rewardsmith.icrm.reward import ICRMReward, directional_reward
from rewardsmith.icrm.scoring import DemoCache, ICRMScorer, demo_key
from rewardsmith.losses.beta_elbo import beta_posterior
from rewardsmith.models.beta import BetaRewardModel, SetContextEncoder
from rewardsmith.models.factory import build_model, load_model, save_model


def _pairs(n: int, tag: str = "q") -> list[PreferencePair]:
    return [
        PreferencePair(
            user_prompt(f"{tag} question number {i} about item {i % 5}"),
            f"a careful kind answer {i}",
            f"a short rude reply {i}",
            pair_id=f"{tag}:{i}",
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny_set() -> tuple[BetaRewardModel, object]:
    cfg = ICRMModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8, context_dim=8, hidden_dim=16)
    model, tok = build_model(cfg, seed=0)
    return model.eval(), tok


def test_head_shapes_and_posterior(tiny_set) -> None:
    model, _ = tiny_set
    h1, h2 = torch.randn(5, model.hidden_size), torch.randn(5, model.hidden_size)
    demo_w, demo_l = torch.randn(5, 3, model.hidden_size), torch.randn(5, 3, model.hidden_size)
    mask = torch.ones(5, 3, dtype=torch.bool)
    context, n = model.context(demo_w, demo_l, mask)
    assert context.shape == (5, model.context_dim) and torch.equal(n, torch.full((5,), 3.0))
    scores = model.score_embeddings(h1, h2, context, n)
    assert scores.u_first.shape == (5,) and scores.s_first.shape == (5,)
    post = beta_posterior(scores.u_first, scores.u_second, scores.s_first, scores.s_second)
    assert torch.all((post.mu > 0) & (post.mu < 1)) and torch.all(post.tau > 1)
    # Exchanging the two responses mirrors the posterior: mu -> 1 - mu, tau unchanged.
    swapped = model.score_embeddings(h2, h1, context, n)
    mirrored = beta_posterior(swapped.u_first, swapped.u_second, swapped.s_first, swapped.s_second)
    assert torch.allclose(mirrored.mu, 1 - post.mu, atol=1e-6)
    assert torch.allclose(mirrored.tau, post.tau)


def test_set_pooling_invariant_to_order_and_padding(tiny_set) -> None:
    model, _ = tiny_set
    torch.manual_seed(1)
    w, lo = torch.randn(1, 6, model.hidden_size), torch.randn(1, 6, model.hidden_size)
    c, _ = model.context(w, lo, torch.ones(1, 6, dtype=torch.bool))
    perm = torch.randperm(6)
    c_perm, _ = model.context(w[:, perm], lo[:, perm], torch.ones(1, 6, dtype=torch.bool))
    assert torch.allclose(c, c_perm, atol=1e-6)
    # Extra masked-out slots (padding to a longer batch) change nothing.
    pad = torch.randn(1, 3, model.hidden_size)
    mask = torch.cat([torch.ones(1, 6, dtype=torch.bool), torch.zeros(1, 3, dtype=torch.bool)], dim=1)
    c_pad, n_pad = model.context(torch.cat([w, pad], 1), torch.cat([lo, pad], 1), mask)
    assert torch.allclose(c, c_pad, atol=1e-6) and float(n_pad) == 6.0


def test_flipped_demos_negate_context_and_mixtures_shrink_it(tiny_set) -> None:
    model, _ = tiny_set
    w, lo = torch.randn(1, 4, model.hidden_size), torch.randn(1, 4, model.hidden_size)
    mask = torch.ones(1, 4, dtype=torch.bool)
    c, _ = model.context(w, lo, mask)
    c_flip, _ = model.context(lo, w, mask)
    assert torch.allclose(c_flip, -c, atol=1e-6)
    # Half the demonstrations flipped: their votes cancel exactly.
    both_w = torch.cat([w, lo], 1)
    both_l = torch.cat([lo, w], 1)
    c_half, _ = model.context(both_w, both_l, torch.ones(1, 8, dtype=torch.bool))
    assert torch.allclose(c_half, torch.zeros_like(c_half), atol=1e-6)


def test_no_demos_gives_zero_context() -> None:
    vectors = torch.randn(2, 3, 4)
    context, n = SetContextEncoder.pool(vectors, torch.zeros(2, 3, dtype=torch.bool))
    assert torch.equal(context, torch.zeros(2, 4)) and torch.equal(n, torch.zeros(2))


def test_scorer_cache_reuse_gives_identical_scores(tiny_set) -> None:
    model, tok = tiny_set
    demos, targets = _pairs(5, "demo"), _pairs(7, "target")
    scorer = ICRMScorer(model, PairEncoder(tok, 32, 8), batch_size=4)
    first = scorer.score_pairs(targets, demos)
    assert scorer.cache.misses == 1 and scorer.cache.hits == 0
    second = scorer.score_pairs(targets, list(reversed(demos)))  # same standard, other order: a cache hit
    assert scorer.cache.hits == 1
    np.testing.assert_array_equal(first.u_chosen, second.u_chosen)
    np.testing.assert_array_equal(first.s_rejected, second.s_rejected)
    fresh = ICRMScorer(model, PairEncoder(tok, 32, 8), batch_size=3, cache=DemoCache())
    np.testing.assert_allclose(fresh.score_pairs(targets, demos).mu, first.mu, atol=1e-5)
    assert demo_key(demos) == demo_key(list(reversed(demos))) != demo_key(demos[:4])


def test_scoring_under_several_standards_equals_one_call_each(tiny_set) -> None:
    """score_pairs_under (the steering check's three conditions) embeds the pairs once in set mode; every standard
    gets exactly the numbers of its own score_pairs call, and the backbone sees the targets once, not per standard."""
    model, tok = tiny_set
    demos, targets = _pairs(4, "demo"), _pairs(6, "target")
    standards = [[], demos, [d.swapped() for d in demos]]
    separate = [ICRMScorer(model, PairEncoder(tok, 32, 8), batch_size=4).score_pairs(targets, s) for s in standards]
    scorer = ICRMScorer(model, PairEncoder(tok, 32, 8), batch_size=4)
    seen: list[int] = []
    hook = model.backbone.register_forward_hook(
        lambda _m, _args, kwargs, _o: seen.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True
    )
    try:
        together = scorer.score_pairs_under(targets, standards)
    finally:
        hook.remove()
    assert len(together) == 3
    for a, b in zip(separate, together, strict=True):
        np.testing.assert_array_equal(a.u_chosen, b.u_chosen)
        np.testing.assert_array_equal(a.s_rejected, b.s_rejected)
        np.testing.assert_array_equal(a.mu, b.mu)
    assert not np.allclose(together[1].mu, together[2].mu)  # the flipped standard scores otherwise
    assert sum(seen) == 2 * len(targets) + 2 * 2 * len(demos)  # targets once; each demonstrated standard's demos


def test_sampler_flip_fractions_and_determinism() -> None:
    pool = PairPool("src", _pairs(400))
    rng = np.random.default_rng(0)
    for p in (0.0, 0.25, 0.5, 1.0):
        flips = [not d.chosen_wins for _ in range(40) for d in draw_demos(pool, Standard("src", flip_rate=p), 64, rng)]
        assert abs(np.mean(flips) - p) < 0.04, p
    cfg = EpisodeConfig(sources=["src"], max_demos=16, flip_prob=0.5, mixture_prob=0.0)
    sampler = EpisodeSampler({"src": pool}, cfg, seed=3)
    batch = sampler.batch(7, 400)
    assert batch == sampler.batch(7, 400)  # a pure function of (seed, step): exact resume
    rates = [e.standard.flip_rate for e in batch]
    assert set(rates) <= {0.0, 1.0} and 0.4 < np.mean(rates) < 0.6
    for e in batch:
        assert 0 <= e.n_demos <= 16 and e.target not in {d.index for d in e.demos}
        # Flipped standard: every demonstration shows the stored rejected response as preferred.
        assert all(d.chosen_wins == (e.standard.flip_rate == 0.0) for d in e.demos)
        q_chosen = e.label if e.first_is_chosen else 1 - e.label
        assert q_chosen == (1.0 if e.standard.flip_rate == 0.0 else 0.0)


def test_mixture_labels_and_pku_helpful_labelling() -> None:
    pool = PairPool("src", _pairs(50), {"harmless": np.ones(50, bool), "helpful": np.arange(50) % 4 != 0})
    rng = np.random.default_rng(0)
    ep = target_episode(pool, pool, Standard("src", "helpful", 0.3), 4, 10, rng, first_is_chosen=True)
    assert ep.label == pytest.approx(0.3)  # pair 4: helpful prefers the stored rejected response
    ep = target_episode(pool, pool, Standard("src", "harmless", 0.3), 4, 10, rng, first_is_chosen=False)
    assert ep.label == pytest.approx(0.3)  # presented swapped: P(first = rejected preferred) = p


def test_split_keeps_conversations_apart() -> None:
    pairs = _pairs(200) + [
        PreferencePair(p.prompt, p.chosen + " again", p.rejected, pair_id=p.pair_id + "b") for p in _pairs(200)
    ]
    parts = split_pool("src", pairs, EpisodeConfig())
    keys = {name: {p.group_key() for p in pool.pairs} for name, pool in parts.items()}
    assert not keys["train"] & keys["test"] and not keys["train"] & keys["demo"] and not keys["demo"] & keys["test"]
    assert sum(len(p) for p in parts.values()) == 400


def test_save_load_round_trip(tiny_set, tmp_path) -> None:
    model, tok = tiny_set
    cfg = ICRMModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8, context_dim=8, hidden_dim=16)
    save_model(model, tok, tmp_path / "m", cfg)
    loaded, tok2, meta = load_model(tmp_path / "m")
    assert meta["model_config"] == cfg
    demos, targets = _pairs(3, "d"), _pairs(4, "t")
    a = ICRMScorer(model, PairEncoder(tok, 32, 8)).score_pairs(targets, demos)
    b = ICRMScorer(loaded, PairEncoder(tok2, 32, 8)).score_pairs(targets, demos)
    np.testing.assert_allclose(a.mu, b.mu, atol=1e-6)
    np.testing.assert_allclose(a.tau, b.tau, atol=1e-5)


def test_concat_mode_scores_and_demos_change_them() -> None:
    cfg = ICRMModelConfig(
        backbone="tiny-llama", mode="concat", max_length=96, min_prompt_tokens=32, freeze_backbone=False
    )
    model, tok = build_model(cfg, seed=0)
    scorer = ICRMScorer(model, PairEncoder(tok, 96, 32))
    targets = _pairs(3, "t")
    plain = scorer.score_pairs(targets)
    steered = scorer.score_pairs(targets, _pairs(2, "d"))
    assert plain.mu.shape == (3,)
    assert not np.allclose(plain.u_chosen, steered.u_chosen)


def test_directional_reward() -> None:
    u, s = np.array([1.0, -1.0, 0.0, 3.0]), np.array([0.0, 0.0, 5.0, -20.0])
    r = directional_reward(u, s)
    assert r[0] > 0 > r[1] and r[0] == pytest.approx(-r[1]) and r[2] == pytest.approx(0.0)
    assert abs(r[3]) < 1e-6  # no evidence: no push, whatever the utility
    assert np.all(np.abs(r) < 1)
    # More evidence, same utility: a larger reward.
    assert directional_reward(np.array([1.0]), np.array([3.0]))[0] > r[0]


def test_grpo_reward_signature(tiny_set) -> None:
    model, tok = tiny_set
    reward = ICRMReward(ICRMScorer(model, PairEncoder(tok, 32, 8)), _pairs(2, "d"))
    out = reward(
        prompts=["hello", "hello", "bye", "bye"],
        completions=["a", "b", "c", "d"],
        completion_ids=[[1]] * 4,
        trainer_state=None,
    )
    assert len(out) == 4 and all(isinstance(x, float) for x in out)
    # Group baseline: rewards of one prompt's completions straddle zero.
    assert out[0] * out[1] <= 0
    conversational = reward(
        prompts=[[{"role": "user", "content": "hello"}]] * 2,
        completions=[[{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "b"}]],
    )
    assert conversational == pytest.approx(out[:2], abs=1e-6)


def test_scorer_matches_episode_path(tiny_set) -> None:
    """Scoring with ICRMScorer equals scoring the same episode from cached pool embeddings."""
    from rewardsmith.data.collate import PairEncoder
    from rewardsmith.icrm.episodes import Demo, Episode
    from rewardsmith.icrm.features import embed_pool, set_episode_tensors, to_numpy

    model, tok = tiny_set
    demos, targets = PairPool("d", _pairs(6, "d")), PairPool("d", _pairs(5, "t"))
    encoder = PairEncoder(tok, 32, 8)
    tables = {"d": embed_pool(model, encoder, targets)}
    demo_tables = {"d": embed_pool(model, encoder, demos)}
    flips = [True, False, True, True, False, True]
    shown = [p if keep else p.swapped() for p, keep in zip(demos.pairs, flips, strict=True)]
    episodes = [Episode(Standard("d"), i, True, 1.0, tuple(Demo(k, f) for k, f in enumerate(flips))) for i in range(5)]
    with torch.no_grad():
        via_episodes = to_numpy(model(set_episode_tensors(episodes, tables, demo_tables)))["mu"]
    via_scorer = ICRMScorer(model, PairEncoder(tok, 32, 8)).score_pairs(targets.pairs, shown).mu
    np.testing.assert_allclose(via_scorer, via_episodes, atol=1e-5)


def test_a_pairs_posterior_spread_is_the_sd_of_its_beta() -> None:
    from scipy.stats import beta

    from rewardsmith.icrm.scoring import pair_scores
    from rewardsmith.inference import TextScores, item_results

    u = np.array([1.5, -0.5, 0.2, 0.2, 3.0])
    s = np.array([0.1, 2.0, -3.0, -3.0, 4.0])
    results = item_results([False, False, True], TextScores(u, s))
    post = pair_scores(u[[0, 2]], u[[1, 3]], s[[0, 2]], s[[1, 3]])
    for result, mu, tau in zip(results[:2], post.mu, post.tau, strict=True):
        assert result["p_chosen"] == pytest.approx(mu)
        assert result["p_chosen_sd"] == pytest.approx(beta(mu * tau, (1 - mu) * tau).std(), rel=1e-9)
    # Equal utilities and little confidence: the widest posterior; a single response has no pair to be unsure of.
    assert results[1]["p_chosen_sd"] > results[0]["p_chosen_sd"] and "p_chosen_sd" not in results[2]
