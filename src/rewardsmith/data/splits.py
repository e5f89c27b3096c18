"""Deterministic splits by a stable hash of each pair's split key: its conversation (the first human turn, so one
conversation never sits on two sides; the default) or its row (for data whose pairs share few opening turns)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rewardsmith.data.schema import PreferencePair, stable_hash

# The split key of the pair at row i of its source, by split kind (DataConfig.split).
SPLIT_KEYS: dict[str, Callable[[int, PreferencePair], str]] = {
    "hash": lambda _, pair: pair.group_key(),
    "row": lambda i, _: f"row {i}",
}


def hash_fraction(key: str, salt: str = "") -> float:
    """Maps a key to [0, 1) the same way on every machine."""
    return int(stable_hash(f"{salt}:{key}")[:12], 16) / float(16**12)


def split_pairs(
    pairs: Sequence[PreferencePair],
    fractions: dict[str, float],
    salt: str = "split",
    by: str = "hash",
) -> dict[str, list[PreferencePair]]:
    """Splits pairs into named parts with the given fractions (summing to at most 1).

    by "hash": pairs sharing a group key (the same first human turn) always land in the same part, so a held-out
    conversation never appears in training, and a pair's part does not depend on its position. by "row": each row
    is placed by a hash of its position (salted), so the parts hold their fractions of the rows even when many pairs
    share an opening turn. Parts are filled in the order of `fractions`.
    """
    total = sum(fractions.values())
    if total > 1.0 + 1e-9 or any(f < 0 for f in fractions.values()):
        raise ValueError(f"split fractions must be non-negative and sum to at most 1, got {fractions}")
    key = SPLIT_KEYS[by]
    edges: list[tuple[str, float]] = []
    acc = 0.0
    for name, frac in fractions.items():
        acc += frac
        edges.append((name, acc))
    out: dict[str, list[PreferencePair]] = {name: [] for name in fractions}
    for i, pair in enumerate(pairs):
        u = hash_fraction(key(i, pair), salt)
        for name, edge in edges:
            if u < edge:
                out[name].append(pair)
                break
    return out


def first_turns(pairs: Sequence[PreferencePair]) -> int:
    """How many distinct first human turns (the hash split's keys) the pairs have."""
    return len({p.group_key() for p in pairs})
