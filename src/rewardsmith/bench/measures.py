"""Per-unit values behind every benchmark number, kept so that a number has a bootstrap CI and two models can be
compared with a paired bootstrap over the same units.

A base measure is `Units`: unit ids (usually row ids) (N,), values (N, C) and the name of the statistic that
turns them into the measure (a key of STATISTICS: "mean" of column 0, "ratio" of the column sums, RewardBench 2's
"ties" formula, ...). A `Composite` is a fixed weighted mean of other measures (RewardBench's sections, the
overall scores); its bootstrap replicates combine the replicates of its parts, each part resampled on its own
(a stratified bootstrap, as the parts are disjoint samples).

Both are JSON-ready through to_dict / from_dict, so a run's per-unit values can be saved and compared later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rewardsmith.bench.metrics import pooled_auc, ties_statistic
from rewardsmith.data.schema import stable_hash
from rewardsmith.stats import Interval, bootstrap_indices, percentile_interval, replicate_interval

FloatArray = NDArray[np.float64]


# ------------------------------------------------------------------------------------------------ statistics


def _mean(values: FloatArray) -> float:
    return float(values[:, 0].mean()) if len(values) else float("nan")


def _ratio(values: FloatArray) -> float:
    total = float(values[:, 1].sum())
    return float(values[:, 0].sum()) / total if total > 0 else float("nan")


def _max_of_means(values: FloatArray) -> float:
    return float(values.mean(axis=0).max()) if len(values) else float("nan")


def _pooled_auc_replicates(values: FloatArray, idx: NDArray[np.int64]) -> FloatArray:
    """pooled_auc on each row of resampled units, idx (B, N) -> (B,), without re-sorting: the responses are
    grouped by reward once, and a replicate weights each response by how often its unit was drawn."""
    k = values.shape[1] // 2
    rewards, labels = values[:, :k].ravel(), values[:, k:].ravel()
    unit = np.repeat(np.arange(values.shape[0]), k)
    keep = np.isfinite(labels)
    rewards, positive, unit = rewards[keep], labels[keep] > 0.5, unit[keep]
    _, group = np.unique(rewards, return_inverse=True)  # tie groups, ascending reward
    n_groups = int(group.max()) + 1 if group.size else 0
    out = np.empty(idx.shape[0])
    for b, draw in enumerate(idx):
        weight = np.bincount(draw, minlength=values.shape[0])[unit].astype(np.float64)
        pos = np.bincount(group, weights=weight * positive, minlength=n_groups)
        neg = np.bincount(group, weights=weight * ~positive, minlength=n_groups)
        below = np.cumsum(neg) - neg  # negative weight strictly below each group
        total = pos.sum() * neg.sum()
        out[b] = float((pos * (below + 0.5 * neg)).sum() / total) if total > 0 else float("nan")
    return out


# Statistic name -> function of the unit values (N, C) returning a fraction (or a correlation, an AUC).
STATISTICS: dict[str, Callable[[FloatArray], float]] = {
    "mean": _mean,
    "ratio": _ratio,
    "ties": ties_statistic,
    "max_of_means": _max_of_means,
    "pooled_auc": pooled_auc,
}


# --------------------------------------------------------------------------------------------------- measures


@dataclass(frozen=True)
class Units:
    """Per-unit values of one base measure. ids: (N,); values: (N, C); statistic: a key of STATISTICS; the
    measure is scale * statistic(values) (scale 100 for percentage points)."""

    ids: tuple[str, ...]
    values: FloatArray
    statistic: str = "mean"
    scale: float = 100.0

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "ids", tuple(self.ids))
        if values.shape[0] != len(self.ids):
            raise ValueError(f"{len(self.ids)} ids for {values.shape[0]} rows of values")
        if self.statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {self.statistic!r}; known: {', '.join(STATISTICS)}")

    @property
    def n(self) -> int:
        return len(self.ids)

    def value(self) -> float:
        """scale * statistic(values); NaN without units."""
        return self.scale * STATISTICS[self.statistic](self.values) if self.n else float("nan")

    def replicates(self, idx: NDArray[np.int64]) -> FloatArray:
        """The measure on resampled units: idx (B, N) -> (B,)."""
        if self.statistic == "mean":
            return np.asarray(self.values[idx, 0].mean(axis=1) * self.scale, dtype=np.float64)
        if self.statistic == "ratio":
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.asarray(
                    self.values[idx, 0].sum(axis=1) / self.values[idx, 1].sum(axis=1) * self.scale, dtype=np.float64
                )
        if self.statistic == "pooled_auc":
            return _pooled_auc_replicates(self.values, idx) * self.scale
        statistic = STATISTICS[self.statistic]
        return np.array([statistic(self.values[row]) for row in idx], dtype=np.float64) * self.scale

    def select(self, ids: Sequence[str]) -> Units:
        """The units with these ids, in this order (each must be present)."""
        position = {unit: i for i, unit in enumerate(self.ids)}
        rows = [position[unit] for unit in ids]
        return Units(tuple(ids), self.values[rows], self.statistic, self.scale)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ids": list(self.ids),
            "values": [[_json(v) for v in row] for row in self.values],
            "statistic": self.statistic,
            "scale": self.scale,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Units:
        values = np.array([[np.nan if v is None else v for v in row] for row in data["values"]], dtype=np.float64)
        return cls(
            tuple(data["ids"]),
            values.reshape(len(data["ids"]), -1),
            str(data["statistic"]),
            float(data.get("scale", 100.0)),
        )


@dataclass(frozen=True)
class Composite:
    """A weighted mean of other measures of the same suite: sum_k w_k m_k / sum_k w_k. weights: measure key -> w."""

    weights: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"weights": {k: float(w) for k, w in self.weights.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Composite:
        return cls({str(k): float(w) for k, w in data["weights"].items()})


MeasureUnits = Units | Composite


def _json(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def units_from_dict(data: Mapping[str, Any]) -> MeasureUnits:
    """A Units or Composite from its to_dict form."""
    return Composite.from_dict(data) if "weights" in data else Units.from_dict(data)


def key_seed(seed: int, key: str) -> np.random.Generator:
    """The generator for one measure's resampling: a function of (seed, key) only, so every model resamples a
    measure's units the same way."""
    return np.random.default_rng([seed, int(stable_hash(key)[:12], 16)])


def _base_replicates(measures: Mapping[str, MeasureUnits], key: str, n_boot: int, seed: int) -> FloatArray:
    units = measures[key]
    if isinstance(units, Composite):
        raise ValueError(f"measure {key!r} is a composite, not a base measure")
    idx = bootstrap_indices(units.n, n_boot, key_seed(seed, key))
    return units.replicates(idx)


def composite_value(values: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """sum_k w_k values[k] / sum_k w_k; NaN when the weights sum to 0."""
    total = float(sum(weights.values()))
    if total <= 0:
        return float("nan")
    return float(sum(w * values[k] for k, w in weights.items()) / total)


def measure_value(measures: Mapping[str, MeasureUnits], key: str) -> float:
    """The value of one measure (a composite from the values of its parts)."""
    units = measures[key]
    if isinstance(units, Units):
        return units.value()
    return composite_value({k: measure_value(measures, k) for k in units.weights}, units.weights)


def measure_replicates(measures: Mapping[str, MeasureUnits], key: str, n_boot: int, seed: int) -> FloatArray:
    """Bootstrap replicates (n_boot,) of one measure: its units resampled with replacement (seeded by
    key_seed(seed, key)); a composite combines its parts' replicates with its weights."""
    units = measures[key]
    if isinstance(units, Units):
        return _base_replicates(measures, key, n_boot, seed)
    total = float(sum(units.weights.values()))
    parts = [w * measure_replicates(measures, k, n_boot, seed) for k, w in units.weights.items()]
    return np.asarray(np.sum(parts, axis=0) / total, dtype=np.float64)


def interval(
    measures: Mapping[str, MeasureUnits], key: str, n_boot: int, seed: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of one measure; (nan, nan) when n_boot is 0."""
    if n_boot <= 0:
        return float("nan"), float("nan")
    return percentile_interval(measure_replicates(measures, key, n_boot, seed), confidence)


# ------------------------------------------------------------------------------------------ paired differences


def _common_ids(candidate: Units, baseline: Units) -> list[str]:
    present = set(baseline.ids)
    return [unit for unit in candidate.ids if unit in present]


def paired_replicates(
    candidate: Mapping[str, MeasureUnits], baseline: Mapping[str, MeasureUnits], key: str, n_boot: int, seed: int
) -> tuple[float, FloatArray, int]:
    """(point difference, replicates (n_boot,), units used) of candidate - baseline for one measure.

    A base measure is restricted to the unit ids both hold (in the candidate's order) and both are resampled
    with the same indices; a composite combines its parts' paired replicates with the candidate's weights.
    Raises KeyError when the baseline lacks the measure or one of its parts.
    """
    units = candidate[key]
    other = baseline[key]
    if isinstance(units, Composite):
        if not isinstance(other, Composite) or set(other.weights) != set(units.weights):
            raise KeyError(key)
        total = float(sum(units.weights.values()))
        point, reps, n = 0.0, np.zeros(max(n_boot, 0)), 0
        for part, weight in units.weights.items():
            p, r, m = paired_replicates(candidate, baseline, part, n_boot, seed)
            point, reps, n = point + weight * p / total, reps + weight * r / total, n + m
        return point, reps, n
    if not isinstance(other, Units):
        raise KeyError(key)
    common = _common_ids(units, other)
    if not common:
        return float("nan"), np.full(max(n_boot, 0), np.nan), 0
    a, b = units.select(common), other.select(common)
    point = a.value() - b.value()
    idx = bootstrap_indices(len(common), n_boot, key_seed(seed, key))
    return point, a.replicates(idx) - b.replicates(idx), len(common)


def paired_difference(
    candidate: Mapping[str, MeasureUnits],
    baseline: Mapping[str, MeasureUnits],
    key: str,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """candidate - baseline for one measure with a paired percentile bootstrap CI (see paired_replicates); n: the
    units used."""
    point, reps, n = paired_replicates(candidate, baseline, key, n_boot, seed)
    return replicate_interval(point, reps, n, confidence)
