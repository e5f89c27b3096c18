"""Deterministic splits by a stable hash of each pair's group key (first human turn by default)."""

from __future__ import annotations

from collections.abc import Sequence

from rewardsmith.data.schema import PreferencePair, stable_hash


def hash_fraction(key: str, salt: str = "") -> float:
    """Maps a key to [0, 1) the same way on every machine."""
    return int(stable_hash(f"{salt}:{key}")[:12], 16) / float(16**12)


def split_pairs(
    pairs: Sequence[PreferencePair],
    fractions: dict[str, float],
    salt: str = "split",
) -> dict[str, list[PreferencePair]]:
    """Splits pairs into named parts with the given fractions (summing to at most 1).

    Pairs sharing a group key (the same first human turn) always land in the same part, so a held-out
    conversation never appears in training. Parts are filled in the order of `fractions`.
    """
    total = sum(fractions.values())
    if total > 1.0 + 1e-9 or any(f < 0 for f in fractions.values()):
        raise ValueError(f"split fractions must be non-negative and sum to at most 1, got {fractions}")
    edges: list[tuple[str, float]] = []
    acc = 0.0
    for name, frac in fractions.items():
        acc += frac
        edges.append((name, acc))
    out: dict[str, list[PreferencePair]] = {name: [] for name in fractions}
    for pair in pairs:
        u = hash_fraction(pair.group_key(), salt)
        for name, edge in edges:
            if u < edge:
                out[name].append(pair)
                break
    return out
