"""The synthetic suite: determinism, and the properties the shift experiments rely on, checked with
simple rules (longer wins, fewer hedges wins, stock phrase wins) instead of a model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from rewardsmith.data.registry import load_dataset
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.synthetic import (
    DOMAINS,
    HEDGE_MARKERS,
    PADDING_SENTENCES,
    REFUSAL_MARKERS,
    STOCK_PHRASES,
    hedge_count,
    make_synthetic_pairs,
)

N = 600


def rule_accuracy(pairs: Sequence[PreferencePair], score: Callable[[str], float]) -> float:
    """Share of pairs where the rule scores chosen above rejected (ties count half)."""
    total = 0.0
    for pair in pairs:
        c, r = score(pair.chosen), score(pair.rejected)
        total += 1.0 if c > r else 0.5 if c == r else 0.0
    return total / len(pairs)


def length_rule(text: str) -> float:
    return float(len(text))


def keyword_rule(text: str) -> float:
    return float(-hedge_count(text) + 2 * sum(marker in text.lower() for marker in REFUSAL_MARKERS))


def phrase_rule(text: str) -> float:
    return float(text.startswith(STOCK_PHRASES))


@pytest.fixture(scope="module")
def suite() -> dict[str, list[PreferencePair]]:
    return {domain: make_synthetic_pairs(domain, N, seed=1) for domain in DOMAINS}


def test_length_rule_looks_good_on_source_and_bad_on_reversed(suite: dict[str, list[PreferencePair]]) -> None:
    assert rule_accuracy(suite["source"], length_rule) >= 0.85
    assert rule_accuracy(suite["target-reversed"], length_rule) <= 0.15
    assert 0.40 <= rule_accuracy(suite["target-clean"], length_rule) <= 0.60
    assert 0.40 <= rule_accuracy(suite["target-topics"], length_rule) <= 0.60
    assert rule_accuracy(suite["harmless"], length_rule) <= 0.30  # shorter wins, as in HH harmless


def test_stock_phrase_follows_the_domain_correlation(suite: dict[str, list[PreferencePair]]) -> None:
    assert rule_accuracy(suite["source"], phrase_rule) >= 0.85
    assert 0.40 <= rule_accuracy(suite["target-clean"], phrase_rule) <= 0.60
    assert rule_accuracy(suite["target-reversed"], phrase_rule) <= 0.15


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_keyword_rule_recovers_the_true_signal_in_every_domain(
    suite: dict[str, list[PreferencePair]], domain: str
) -> None:
    assert rule_accuracy(suite[domain], keyword_rule) >= 0.99


def test_without_artifacts_length_carries_no_signal() -> None:
    pairs = make_synthetic_pairs("source", 2000, seed=3, artifact_strength=0.0)
    assert 0.44 <= rule_accuracy(pairs, length_rule) <= 0.60
    assert rule_accuracy(pairs, phrase_rule) == 0.5  # no stock phrase anywhere
    assert all(p.metadata["length_artifact"] == "none" for p in pairs)


def test_metadata_names_the_side_that_carries_each_artifact() -> None:
    for pair in make_synthetic_pairs("target-clean", 200, seed=0, label_noise=0.2):
        texts = {"chosen": pair.chosen, "rejected": pair.rejected}
        for side, text in texts.items():
            assert text.startswith(STOCK_PHRASES) == (pair.metadata["phrase_artifact"] == side)
            padded = any(sentence.lower() in text.lower() for sentence in PADDING_SENTENCES)
            assert padded == (pair.metadata["length_artifact"] == side)


def test_label_noise_swaps_about_the_requested_share() -> None:
    pairs = make_synthetic_pairs("target-clean", 1000, seed=0, label_noise=0.2)
    flipped = sum(p.metadata["label_flipped"] for p in pairs)
    assert 150 <= flipped <= 250
    assert rule_accuracy(pairs, keyword_rule) == pytest.approx(1 - flipped / 1000)
    assert all(p.label == 1.0 for p in pairs)


def test_generation_is_deterministic_and_prefix_stable() -> None:
    a = make_synthetic_pairs("source", 50, seed=7)
    b = make_synthetic_pairs("source", 80, seed=7)
    assert a == b[:50] and [p.metadata for p in a] == [p.metadata for p in b[:50]]
    assert a != make_synthetic_pairs("source", 50, seed=8)
    assert len({p.pair_id for p in b}) == 80


def test_registered_splits_use_disjoint_seeds_and_respect_limit() -> None:
    train = load_dataset("synthetic/source", limit=100)
    test = load_dataset("synthetic/source", split="test", limit=100)
    assert len(train.pairs) == len(test.pairs) == 100 == train.n_rows
    assert not {p.pair_id for p in train.pairs} & {p.pair_id for p in test.pairs}
    responses = {(p.chosen, p.rejected) for p in train.pairs}
    assert sum((p.chosen, p.rejected) in responses for p in test.pairs) <= 2
    assert train.pairs == make_synthetic_pairs("source", 100, seed=0)
    assert len(load_dataset("synthetic/target-clean").pairs) == N
    assert {p.domain for p in train.pairs} == {"synthetic/source"}


def test_hedge_markers_only_appear_in_evasive_sentences() -> None:
    pairs = make_synthetic_pairs("source", 300, seed=0)
    for pair in pairs:
        good_chosen, good_rejected = pair.metadata["substantive"]
        size = pair.metadata["core_sentences"]
        assert hedge_count(pair.chosen) == size - good_chosen
        assert hedge_count(pair.rejected) == size - good_rejected
    assert "maybe" in HEDGE_MARKERS


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="unknown synthetic domain"):
        make_synthetic_pairs("nope", 3)
    with pytest.raises(ValueError, match="artifact_strength"):
        make_synthetic_pairs("source", 3, artifact_strength=1.5)
