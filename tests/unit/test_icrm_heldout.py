"""ICRM evaluation on data no training saw: no target pair shares a conversation (first human turn) with a
training pair of any training source; shared ones are dropped and counted; sources outside training are split
into demonstrations and targets only; training on an evaluation set is refused unless allowed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewardsmith.config import load_yaml
from rewardsmith.data.registry import PairDataset
from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.errors import ConfigError
from rewardsmith.icrm import episodes
from rewardsmith.icrm.config import EpisodeConfig, ICRMRunConfig
from rewardsmith.icrm.episodes import PairPool, without_conversations
from rewardsmith.icrm.protocols.context import (
    TRAINING_SOURCE_TARGETS,
    UNSEEN_SOURCE_TARGETS,
    EvalContext,
    check_training_sources,
)

ROOT = Path(__file__).resolve().parents[2]


def _pair(question: str, tag: str) -> PreferencePair:
    return PreferencePair(
        user_prompt(question), f"a careful answer ({tag})", f"a rude reply ({tag})", pair_id=f"{tag}:{question}"
    )


def _context(cfg: ICRMRunConfig) -> EvalContext:
    # test_pool / pools / demo_pool read data only; no model is needed to choose targets.
    return EvalContext(cfg, None, None, None, False, None)  # type: ignore[arg-type]


def _keys(pool: PairPool) -> set[str]:
    return {p.conversation_key() for p in pool.pairs}


def test_without_conversations_drops_counts_and_keeps_labellings_aligned() -> None:
    pairs = [_pair(f"question {i}", "t") for i in range(6)]
    helpful = np.array([True, False, True, False, True, False])
    pool = PairPool("src", pairs, {"harmless": np.ones(6, bool), "helpful": helpful})
    seen = {pairs[1].conversation_key(), pairs[4].conversation_key(), _pair("never asked", "x").conversation_key()}
    kept, removed = without_conversations(pool, seen)
    assert removed == 2
    assert [p.pair_id for p in kept.pairs] == [pairs[i].pair_id for i in (0, 2, 3, 5)]
    assert kept.labellings["helpful"].tolist() == helpful[[0, 2, 3, 5]].tolist()
    # The key is the first human turn, case and surrounding space aside: another response does not hide it.
    same_turn = PreferencePair(user_prompt("  QUESTION 1 "), "other", "responses")
    kept, removed = without_conversations(PairPool("e", [same_turn]), seen)
    assert (len(kept), removed) == (0, 1)
    assert without_conversations(pool, set()) == (pool, 0)


@pytest.fixture
def shared_conversations(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[PreferencePair]]:
    """Two training sources and an evaluation source, hand-built: eval/shared asks 60 of train/a's questions
    (with other responses) and 60 of its own."""
    data = {
        "train/a": [_pair(f"how do I fix thing {i}?", "a") for i in range(200)],
        "train/b": [_pair(f"what is word {i}?", "b") for i in range(120)],
        "eval/shared": [_pair(f"how do I fix thing {i}?", "e") for i in range(60)]
        + [_pair(f"why is colour {i} nice?", "e") for i in range(60)],
    }

    def fake_load(
        name: str, data_dir: object = None, split: object = None, limit: int | None = None, **_: object
    ) -> PairDataset:
        return PairDataset(name, data[name][:limit])

    monkeypatch.setattr(episodes, "load_dataset", fake_load)
    return data


def test_targets_never_share_a_conversation_with_training(shared_conversations) -> None:
    cfg = ICRMRunConfig()
    cfg.episodes = EpisodeConfig(sources=["train/a", "train/b"], source_splits={}, pairs_per_source=None)
    cfg.eval.max_test_pairs = None
    ctx = _context(cfg)
    training = set().union(*(_keys(ctx.pools(s)["train"]) for s in cfg.episodes.sources))
    assert training == ctx.training_keys() and len(training) > 200  # 70% of 320 conversations

    targets = ctx.test_pool("eval/shared")
    parts = ctx.pools("eval/shared")
    assert not _keys(targets) & training
    # The evaluation source is outside training: no train part; demonstrations and targets split it.
    assert len(parts["train"]) == 0 and not _keys(parts["demo"]) & _keys(parts["test"])
    assert len(parts["demo"]) + len(parts["test"]) == 120
    # Dropped and counted: the shared questions whose train/a copy is a training pair.
    expected = sum(p.conversation_key() in training for p in parts["test"].pairs)
    assert expected > 0 and ctx.overlap_removed["eval/shared"] == expected
    assert len(targets) + expected == len(parts["test"])
    # A shared question held out of train/a's training part is not training data: it stays a target.
    assert _keys(targets) & _keys(ctx.pools("train/a")["test"])
    facts = ctx.target_facts("eval/shared", "train/a")
    assert facts["targets_from"] == {"eval/shared": UNSEEN_SOURCE_TARGETS, "train/a": TRAINING_SOURCE_TARGETS}
    assert facts["overlap_removed"]["eval/shared"] == expected


def test_a_training_source_is_scored_on_its_test_part_only(shared_conversations) -> None:
    cfg = ICRMRunConfig()
    cfg.episodes = EpisodeConfig(sources=["train/a", "train/b"], source_splits={}, pairs_per_source=None)
    cfg.eval.max_test_pairs = 15
    ctx = _context(cfg)
    targets = ctx.test_pool("train/a")
    held_out = {p.pair_id for p in ctx.pools("train/a")["test"].pairs}
    assert len(targets) == 15 and {p.pair_id for p in targets.pairs} <= held_out
    assert not _keys(targets) & ctx.training_keys()
    # Demonstrations of a training source may come from its train part, never from its targets.
    assert not _keys(ctx.demo_pool("train/a")) & _keys(ctx.pools("train/a")["test"])


def test_unseen_target_share_follows_the_setting(shared_conversations) -> None:
    sizes = []
    for share in (0.2, 0.8):
        cfg = ICRMRunConfig()
        cfg.episodes = EpisodeConfig(sources=["train/b"], source_splits={}, pairs_per_source=None)
        cfg.eval.unseen_test_fraction = share
        sizes.append(len(_context(cfg).pools("eval/shared")["test"]))
    assert sizes[0] < 50 < sizes[1]


def test_synthetic_sources_sharing_prompts() -> None:
    """The synthetic suite draws prompts from one template pool: synthetic/target-clean asks the questions that
    synthetic/source trains on, so scoring it as an unseen source drops them."""
    cfg = ICRMRunConfig()
    cfg.episodes = EpisodeConfig(sources=["synthetic/source"], source_splits={}, pairs_per_source=300)
    cfg.eval.max_test_pairs = None
    ctx = _context(cfg)
    targets = ctx.test_pool("synthetic/target-clean")
    removed = ctx.overlap_removed["synthetic/target-clean"]
    assert removed > 0
    assert not _keys(targets) & _keys(ctx.pools("synthetic/source")["train"])
    assert len(targets) + removed == len(ctx.pools("synthetic/target-clean")["test"])


@pytest.mark.parametrize("source", ["rm-bench/chat", "rm-bench/safety", "moralchoice/high", "math-500"])
def test_training_on_an_evaluation_set_is_refused(source: str) -> None:
    cfg = EpisodeConfig(sources=["hh-rlhf/helpful-base", source])
    with pytest.raises(ConfigError, match="allow_eval_sources"):
        check_training_sources(cfg)
    cfg.allow_eval_sources = True
    check_training_sources(cfg)


def test_training_refuses_an_evaluation_set_before_any_work(tmp_path: Path) -> None:
    from rewardsmith.icrm.train import train_icrm

    cfg = ICRMRunConfig()
    cfg.episodes.sources = ["pku-saferlhf/harmless", "rm-bench/chat"]
    with pytest.raises(ConfigError, match="rm-bench/chat"):
        train_icrm(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_default_and_shipped_configs_train_on_no_evaluation_set() -> None:
    check_training_sources(EpisodeConfig())
    for path in [*sorted((ROOT / "configs").glob("icrm-*.yaml")), ROOT / "configs" / "testbed-icrm.yaml"]:
        cfg = load_yaml(ICRMRunConfig, path)
        check_training_sources(cfg.episodes)
        assert not cfg.episodes.allow_eval_sources, path
