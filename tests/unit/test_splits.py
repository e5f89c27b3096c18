"""Hash splits: conversations stay on one side, fractions hold, and assignment does not depend on order."""

from __future__ import annotations

import random

import pytest

from rewardsmith.data.schema import PreferencePair, Turn
from rewardsmith.data.splits import hash_fraction, split_pairs
from rewardsmith.data.synthetic import make_synthetic_pairs


def conversation_pairs(n_conversations: int = 300, per_conversation: int = 3) -> list[PreferencePair]:
    """Several pairs per conversation: same first human turn, different later turns and responses."""
    pairs = []
    for c in range(n_conversations):
        for k in range(per_conversation):
            prompt = (
                Turn("user", f"Question number {c}?"),
                Turn("assistant", f"Answer {k}."),
                Turn("user", f"Follow-up {k}"),
            )
            pairs.append(PreferencePair(prompt, f"good {c}.{k}", f"bad {c}.{k}", pair_id=f"{c}:{k}"))
    return pairs


def test_pairs_of_one_conversation_land_on_one_side() -> None:
    parts = split_pairs(conversation_pairs(), {"train": 0.7, "test": 0.3})
    keys = {name: {p.group_key() for p in part} for name, part in parts.items()}
    assert not keys["train"] & keys["test"]
    assert sum(len(part) for part in parts.values()) == 900


def test_group_key_ignores_case_and_surrounding_space() -> None:
    a = PreferencePair((Turn("user", "  Hello There "),), "x", "y")
    b = PreferencePair((Turn("user", "hello there"), Turn("assistant", "hi"), Turn("user", "more")), "x", "y")
    assert a.group_key() == b.group_key()


def test_fractions_are_respected_and_leftover_is_dropped() -> None:
    pairs = conversation_pairs(2000, 1)
    parts = split_pairs(pairs, {"train": 0.5, "demo": 0.1, "test": 0.2})
    sizes = {name: len(part) / len(pairs) for name, part in parts.items()}
    assert sizes["train"] == pytest.approx(0.5, abs=0.04)
    assert sizes["demo"] == pytest.approx(0.1, abs=0.03)
    assert sizes["test"] == pytest.approx(0.2, abs=0.03)
    assert sum(len(part) for part in parts.values()) < len(pairs)  # 20 % belongs to no part


def test_assignment_is_deterministic_order_free_and_salted() -> None:
    pairs = conversation_pairs(200, 2)
    shuffled = pairs[:]
    random.Random(0).shuffle(shuffled)
    a = split_pairs(pairs, {"train": 0.8, "test": 0.2})
    b = split_pairs(shuffled, {"train": 0.8, "test": 0.2})
    assert {p.pair_id for p in a["test"]} == {p.pair_id for p in b["test"]}
    c = split_pairs(pairs, {"train": 0.8, "test": 0.2}, salt="other")
    assert {p.pair_id for p in a["test"]} != {p.pair_id for p in c["test"]}


def test_growing_a_later_part_never_moves_pairs_out_of_earlier_ones() -> None:
    pairs = conversation_pairs(300, 1)
    small = split_pairs(pairs, {"train": 0.6, "test": 0.2})
    large = split_pairs(pairs, {"train": 0.6, "test": 0.4})
    assert small["train"] == large["train"]
    assert {p.pair_id for p in small["test"]} <= {p.pair_id for p in large["test"]}


def test_hash_fraction_is_stable_and_in_range() -> None:
    values = [hash_fraction(f"key {i}") for i in range(1000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert hash_fraction("abc", "s") == hash_fraction("abc", "s") != hash_fraction("abc", "t")
    assert 0.45 <= sum(values) / len(values) <= 0.55


def test_invalid_fractions_raise() -> None:
    with pytest.raises(ValueError, match="sum to at most 1"):
        split_pairs([], {"train": 0.8, "test": 0.3})
    with pytest.raises(ValueError, match="non-negative"):
        split_pairs([], {"train": -0.1})


def test_synthetic_pairs_sharing_a_prompt_stay_together() -> None:
    pairs = make_synthetic_pairs("source", 600, seed=0)
    assert len({p.group_key() for p in pairs}) < len(pairs)  # prompts repeat across pairs
    parts = split_pairs(pairs, {"train": 0.8, "test": 0.2})
    assert not {p.group_key() for p in parts["train"]} & {p.group_key() for p in parts["test"]}
