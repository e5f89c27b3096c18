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


# ---------------------------------------------------------------------------------------------------------
# Small or templated sources: the row split, and a hash split that says why a part came out empty


def _first_turns_in(lo: float, hi: float, n: int) -> list[str]:
    """n opening questions whose split hash (train's salt "split") falls in [lo, hi): their pairs' part is known."""
    found = []
    for i in range(10_000):
        text = f"Question number {i} about the topic?"
        key = PreferencePair((Turn("user", text),), "a", "b").group_key()
        if lo <= hash_fraction(key, "split") < hi:
            found.append(text)
        if len(found) == n:
            return found
    raise AssertionError("no such opening turns")


def _write_pairs(path, openings: list[str], per_opening: int):  # type: ignore[no-untyped-def]
    import json

    rows = [
        {
            "prompt": f"\n\nHuman: {opening}\n\nAssistant: Which part?\n\nHuman: part {k}\n\nAssistant:",
            "chosen": f" A careful answer about part {k} of {opening}",
            "rejected": f" No idea ({k}).",
        }
        for opening in openings
        for k in range(per_opening)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _data_config(path, split: str = "hash"):  # type: ignore[no-untyped-def]
    from rewardsmith.config import DataConfig, DatasetConfig

    return DataConfig(train=DatasetConfig(name="file", path=str(path)), split=split)


def test_the_row_split_holds_its_fractions_when_every_pair_shares_one_opening() -> None:
    opening = (Turn("user", "Rate this reply."),)
    pairs = [PreferencePair(opening, f"good {i}", f"bad {i}", pair_id=str(i)) for i in range(200)]
    by_conversation = split_pairs(pairs, {"train": 0.8, "test": 0.2})
    assert sorted(len(v) for v in by_conversation.values()) == [0, 200]  # one conversation: one side
    by_row = split_pairs(pairs, {"train": 0.8, "test": 0.2}, by="row")
    assert len(by_row["train"]) + len(by_row["test"]) == 200 and 140 <= len(by_row["train"]) <= 180
    # A row's part is its position's: the same rows with other contents are cut the same way.
    other = [PreferencePair((Turn("user", f"q{i}"),), "x", "y") for i in range(200)]
    again = split_pairs(other, {"train": 0.8, "test": 0.2}, by="row")
    assert [pairs.index(p) for p in by_row["test"]] == [other.index(p) for p in again["test"]]


def test_the_split_choices_are_the_split_keys() -> None:
    import dataclasses

    from rewardsmith.config import DataConfig
    from rewardsmith.data.splits import SPLIT_KEYS

    field = next(f for f in dataclasses.fields(DataConfig) if f.name == "split")
    assert set(field.metadata["choices"]) == set(SPLIT_KEYS)


def test_no_training_pairs_says_why_and_offers_the_row_split(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rewardsmith.data.prepare import train_data
    from rewardsmith.errors import ConfigError

    # 60 pairs opening with one human turn whose hash falls in the held-out range.
    path = _write_pairs(tmp_path / "one.jsonl", _first_turns_in(0.8, 1.0, 1), 60)
    with pytest.raises(ConfigError) as raised:
        train_data(_data_config(path))
    message = str(raised.value)
    assert "\n" not in message and "0 in the training split" in message
    assert "first human turn" in message and "60 pairs share 1 distinct first turn;" in message
    assert "--split-by row" in message
    data = train_data(_data_config(path, "row"))
    held = data.eval_sets["one.jsonl (held-out)"]
    assert len(data.train) + len(held) == 60 and data.train and held and not data.warnings


def test_an_empty_held_out_part_is_a_warning(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rewardsmith.data.prepare import train_data

    # 24 pairs of 8 opening turns, all hashed into the training range.
    path = _write_pairs(tmp_path / "eight.jsonl", _first_turns_in(0.0, 0.8, 8), 3)
    data = train_data(_data_config(path))
    assert len(data.train) == 24 and data.eval_sets == {}
    assert len(data.warnings) == 1
    warning = data.warnings[0]
    assert warning.startswith("warning: the held-out part of eight.jsonl is empty") and "\n" not in warning
    assert "24 pairs share 8 distinct first turns" in warning and "--split-by row" in warning
    # With no held-out share asked for, an empty held-out part is no surprise.
    from dataclasses import replace

    assert train_data(replace(_data_config(path), train_fraction=1.0)).warnings == []
    by_row = train_data(_data_config(path, "row"))
    assert by_row.eval_sets["eight.jsonl (held-out)"] and not by_row.warnings
