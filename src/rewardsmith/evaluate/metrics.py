"""Pure evaluation metrics on numpy arrays: pairwise accuracy with bootstrap CIs, length controls,
calibration (ECE, Brier, reliability curves) and 2-D Pareto hypervolume. Comparisons of models across seeds
and pairs live in rewardsmith.evaluate.transfer (one hierarchical bootstrap).

Conventions used throughout:
- A margin is d = r(x, y_chosen) - r(x, y_rejected), shape (N,). A pair is scored 1 when d > 0, 0 when
  d < 0 and 0.5 on an exact tie.
- Accuracies and rates are in percentage points (0-100); ECE and Brier score are fractions (0-1).
- Bootstrap CIs resample pairs with replacement (seeded ``numpy.random.default_rng(seed)``) and take the
  percentile interval of the replicates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.stats import (
    Interval,
    bootstrap_indices,
    json_float,
    length_controlled_value,
    mean_interval,
    percentile_interval,
    sigmoid,
    spearman,
)

FloatArray = NDArray[np.float64]
CalibrationMode = Literal["top_label", "probability"]

# Per-pair score of a correct, wrong and tied comparison.
_TIE_CREDIT = 0.5


@dataclass(frozen=True)
class LengthControlled:
    """Length-controlled accuracy and its two subgroups (percentage points).

    `value` is the mean of `chosen_longer` (accuracy on pairs whose preferred response is longer) and
    `chosen_shorter` (pairs whose preferred response is shorter); `n_equal` pairs of equal length are
    excluded from all three.
    """

    value: Interval
    chosen_longer: Interval
    chosen_shorter: Interval
    n_equal: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value.to_dict(),
            "chosen_longer": self.chosen_longer.to_dict(),
            "chosen_shorter": self.chosen_shorter.to_dict(),
            "n_equal": int(self.n_equal),
        }


@dataclass(frozen=True)
class ReliabilityCurve:
    """Reliability-diagram data over `n_bins` equal-width bins.

    Shapes: `edges` (n_bins + 1,); `confidence`, `accuracy` (n_bins,) with NaN for empty bins; `counts`
    (n_bins,) integers. In "top_label" mode confidence is max(p, 1 - p) and accuracy the (soft) rate at
    which the side predicted more likely was preferred; in "probability" mode confidence is the mean p
    and accuracy the mean outcome.
    """

    edges: FloatArray
    confidence: FloatArray
    accuracy: FloatArray
    counts: NDArray[np.int64]
    mode: CalibrationMode

    def ece(self) -> float:
        """Count-weighted mean of |accuracy - confidence| over non-empty bins (a fraction)."""
        total = int(self.counts.sum())
        if total == 0:
            return float("nan")
        filled = self.counts > 0
        gaps = np.abs(self.accuracy[filled] - self.confidence[filled])
        return float(np.sum(gaps * self.counts[filled]) / total)

    def to_dict(self) -> dict[str, Any]:
        return {
            "edges": [json_float(v) for v in self.edges],
            "confidence": [json_float(v) for v in self.confidence],
            "accuracy": [json_float(v) for v in self.accuracy],
            "counts": [int(c) for c in self.counts],
            "mode": self.mode,
        }


# ----------------------------------------------------------------------------------------------------
# Bootstrap machinery


def _as_1d(values: ArrayLike, name: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    return array


def _check_same_length(**arrays: FloatArray) -> int:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"arrays differ in length: {lengths}")
    return next(iter(lengths.values()))


# ----------------------------------------------------------------------------------------------------
# Accuracy


def pairwise_correct(margins: ArrayLike) -> FloatArray:
    """Per-pair correctness of margins d = r_chosen - r_rejected: 1.0 if d > 0, 0.0 if d < 0, 0.5 if tied.

    margins: (N,). Returns (N,) float64.
    """
    d = _as_1d(margins, "margins")
    return np.where(d > 0, 1.0, np.where(d < 0, 0.0, _TIE_CREDIT))


def pairwise_accuracy(margins: ArrayLike, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> Interval:
    """Pairwise accuracy (percentage points) of margins d = r_chosen - r_rejected, ties counting 0.5,
    with a percentile bootstrap CI over pairs.

    margins: (N,). Returns Interval(value, low, high, N).
    """
    return mean_interval(pairwise_correct(margins), n_boot, seed, confidence=confidence, scale=100.0)


def _orientation(labels: ArrayLike | None, n: int) -> FloatArray:
    """+1 where the chosen side is preferred (label > 0.5), -1 where the rejected one is (label < 0.5),
    0 where the label is exactly 0.5 (no preference: the pair is ignored). labels: (N,) or None (all +1)."""
    if labels is None:
        return np.ones(n)
    lab = _as_1d(labels, "labels")
    if lab.size != n:
        raise ValueError(f"labels has {lab.size} entries for {n} pairs")
    if np.any((lab < 0) | (lab > 1)) or np.any(np.isnan(lab)):
        raise ValueError("labels must lie in [0, 1]")
    return np.sign(lab - 0.5)


def soft_label_correct(margins: ArrayLike, labels: ArrayLike) -> FloatArray:
    """Per-pair correctness against soft labels, with the pairs whose label is 0.5 dropped.

    margins, labels: (N,), labels = P(chosen preferred) in [0, 1]. The chosen side counts as preferred
    when label > 0.5 and the rejected side when label < 0.5; a tied margin scores 0.5.
    Returns (M,) float64 with M = number of pairs whose label is not 0.5.
    """
    d = _as_1d(margins, "margins")
    orient = _orientation(labels, d.size)
    keep = orient != 0
    return pairwise_correct(d[keep] * orient[keep])


def soft_label_accuracy(
    margins: ArrayLike, labels: ArrayLike, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """Pairwise accuracy (percentage points) against soft labels in [0, 1]: the chosen response is the
    preferred one when label > 0.5, the rejected one when label < 0.5; pairs with label == 0.5 are
    ignored (Interval.n counts the pairs used). Ties in margin score 0.5.

    margins, labels: (N,). Returns Interval(value, low, high, M).
    """
    return mean_interval(soft_label_correct(margins, labels), n_boot, seed, confidence=confidence, scale=100.0)


# ----------------------------------------------------------------------------------------------------
# Length controls


def _oriented_pairs(
    margins: ArrayLike, chosen_len: ArrayLike, rejected_len: ArrayLike, labels: ArrayLike | None
) -> tuple[FloatArray, FloatArray]:
    """(margin of preferred minus dispreferred, length of preferred minus dispreferred), each (M,), with
    label == 0.5 pairs dropped."""
    d = _as_1d(margins, "margins")
    lc = _as_1d(chosen_len, "chosen_len")
    lr = _as_1d(rejected_len, "rejected_len")
    _check_same_length(margins=d, chosen_len=lc, rejected_len=lr)
    orient = _orientation(labels, d.size)
    keep = orient != 0
    return d[keep] * orient[keep], (lc[keep] - lr[keep]) * orient[keep]


def length_rule_accuracy(
    chosen_len: ArrayLike,
    rejected_len: ArrayLike,
    labels: ArrayLike | None = None,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Accuracy (percentage points) of the rule "the longer response wins" (lengths in characters), equal
    lengths scoring 0.5, with a bootstrap CI over pairs.

    chosen_len, rejected_len: (N,); labels: optional (N,) soft labels (see soft_label_accuracy).
    """
    lc = _as_1d(chosen_len, "chosen_len")
    lr = _as_1d(rejected_len, "rejected_len")
    _check_same_length(chosen_len=lc, rejected_len=lr)
    if labels is None:
        return pairwise_accuracy(lc - lr, n_boot=n_boot, confidence=confidence, seed=seed)
    return soft_label_accuracy(lc - lr, labels, n_boot=n_boot, confidence=confidence, seed=seed)


def length_controlled_accuracy(
    margins: ArrayLike,
    chosen_len: ArrayLike,
    rejected_len: ArrayLike,
    labels: ArrayLike | None = None,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> LengthControlled:
    """Length-controlled accuracy: the mean of the accuracy on pairs whose preferred response is longer
    and the accuracy on pairs whose preferred response is shorter (equal lengths excluded), so a model
    that only follows length scores 50 whatever the dataset's length balance.

    margins, chosen_len, rejected_len: (N,); labels: optional (N,) soft labels. The CI resamples the
    non-equal pairs with replacement and recomputes both subgroups per replicate (replicates where a
    subgroup is empty are dropped). Subgroup CIs are bootstraps within each subgroup.
    Returns LengthControlled, values in percentage points.
    """
    d, dlen = _oriented_pairs(margins, chosen_len, rejected_len, labels)
    unequal = dlen != 0
    correct = pairwise_correct(d[unequal])
    longer = dlen[unequal] > 0
    shorter = ~longer
    n = int(correct.size)
    value = float(length_controlled_value(correct, longer) * 100.0) if n else float("nan")
    if n and n_boot > 0:
        idx = bootstrap_indices(n, n_boot, seed)
        replicates = length_controlled_value(correct[idx], longer[idx]) * 100.0
        low, high = percentile_interval(replicates, confidence)
    else:
        low = high = float("nan")
    return LengthControlled(
        value=Interval(value, low, high, n, confidence),
        chosen_longer=mean_interval(correct[longer], n_boot, seed, confidence=confidence, scale=100.0),
        chosen_shorter=mean_interval(correct[shorter], n_boot, seed, confidence=confidence, scale=100.0),
        n_equal=int((~unequal).sum()),
    )


def prefers_longer_rate(
    margins: ArrayLike,
    chosen_len: ArrayLike,
    rejected_len: ArrayLike,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Rate (percentage points) at which the model scores the longer response of a pair higher; equal
    lengths are excluded and tied scores count 0.5. Independent of which side is preferred.

    margins, chosen_len, rejected_len: (N,). Returns Interval with n = number of unequal-length pairs.
    """
    d = _as_1d(margins, "margins")
    dlen = _as_1d(chosen_len, "chosen_len") - _as_1d(rejected_len, "rejected_len")
    _check_same_length(margins=d, lengths=dlen)
    unequal = dlen != 0
    # Margin of the longer minus the shorter response.
    longer_margin = d[unequal] * np.sign(dlen[unequal])
    return pairwise_accuracy(longer_margin, n_boot=n_boot, confidence=confidence, seed=seed)


def length_correlation(
    chosen_scores: ArrayLike,
    rejected_scores: ArrayLike,
    chosen_len: ArrayLike,
    rejected_len: ArrayLike,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Spearman correlation between reward and response length over every response of a set (both sides of
    each pair), with a bootstrap CI resampling pairs. How much a model still leans on length: 0 is none, +1
    a pure longer-is-better score, -1 a pure shorter-is-better one.

    chosen_scores, rejected_scores, chosen_len, rejected_len: (N,). Returns Interval (value in [-1, 1]).
    """
    sc, sr = _as_1d(chosen_scores, "chosen_scores"), _as_1d(rejected_scores, "rejected_scores")
    lc, lr = _as_1d(chosen_len, "chosen_len"), _as_1d(rejected_len, "rejected_len")
    n = _check_same_length(chosen_scores=sc, rejected_scores=sr, chosen_len=lc, rejected_len=lr)
    if n < 2:
        return Interval(float("nan"), float("nan"), float("nan"), n, confidence)
    value = float(spearman(np.concatenate([sc, sr]), np.concatenate([lc, lr])))
    if n_boot <= 0:
        return Interval(value, float("nan"), float("nan"), n, confidence)
    low = high = float("nan")
    replicates = []
    for start in range(0, n_boot, 100):  # chunks keep the (replicates, 2N) rank arrays small
        idx = bootstrap_indices(n, min(100, n_boot - start), np.random.default_rng([seed, start]))
        replicates.append(
            spearman(np.concatenate([sc[idx], sr[idx]], axis=1), np.concatenate([lc[idx], lr[idx]], axis=1))
        )
    low, high = percentile_interval(np.concatenate(replicates), confidence)
    return Interval(value, low, high, n, confidence)


# ----------------------------------------------------------------------------------------------------
# Calibration


def _check_probs_outcomes(probs: ArrayLike, outcomes: ArrayLike | None) -> tuple[FloatArray, FloatArray]:
    p = _as_1d(probs, "probs")
    y = np.ones_like(p) if outcomes is None else _as_1d(outcomes, "outcomes")
    _check_same_length(probs=p, outcomes=y)
    if np.any((p < 0) | (p > 1)) or np.any((y < 0) | (y > 1)):
        raise ValueError("probabilities and outcomes must lie in [0, 1]")
    return p, y


def reliability_curve(
    probs: ArrayLike, outcomes: ArrayLike | None = None, *, n_bins: int = 10, mode: CalibrationMode = "top_label"
) -> ReliabilityCurve:
    """Binned reliability data for preference probabilities.

    probs: (N,) p = P(chosen preferred); outcomes: (N,) binary or soft outcome in [0, 1] (None: all 1,
    i.e. gold labels where the chosen response is always preferred).
    Modes:
    - "top_label" (default): confidence c = max(p, 1 - p) in [0.5, 1] and correctness = y where p > 0.5,
      1 - y where p < 0.5, 0.5 where p == 0.5; `n_bins` equal-width bins over [0.5, 1]. Invariant to which
      side of a pair is listed first, so it suits gold data where the outcome is always "chosen".
    - "probability": p against y directly, `n_bins` equal-width bins over [0, 1] (e.g. a predicted mean
      against a demonstrated preference rate).
    Bins are left-closed, the last one closed on both sides.
    """
    p, y = _check_probs_outcomes(probs, outcomes)
    if n_bins < 1:
        raise ValueError("n_bins must be >= 1")
    if mode == "top_label":
        conf = np.maximum(p, 1.0 - p)
        hit = np.where(p > 0.5, y, np.where(p < 0.5, 1.0 - y, 0.5))
        edges = np.linspace(0.5, 1.0, n_bins + 1)
    elif mode == "probability":
        conf, hit = p, y
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        raise ValueError(f"unknown calibration mode {mode!r}")
    which = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, n_bins - 1)
    counts = np.bincount(which, minlength=n_bins).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(which, weights=conf, minlength=n_bins) / counts
        mean_hit = np.bincount(which, weights=hit, minlength=n_bins) / counts
    return ReliabilityCurve(
        edges, np.where(counts > 0, mean_conf, np.nan), np.where(counts > 0, mean_hit, np.nan), counts, mode
    )


def expected_calibration_error(
    probs: ArrayLike, outcomes: ArrayLike | None = None, *, n_bins: int = 10, mode: CalibrationMode = "top_label"
) -> float:
    """ECE = sum_b (n_b / N) |accuracy_b - confidence_b| over `n_bins` equal-width bins (a fraction in
    [0, 1]); binning and modes as in `reliability_curve`. probs, outcomes: (N,). NaN when N == 0."""
    return reliability_curve(probs, outcomes, n_bins=n_bins, mode=mode).ece()


def brier_score(probs: ArrayLike, outcomes: ArrayLike | None = None) -> float:
    """Mean squared error (p - y)^2 of preference probabilities against binary or soft outcomes
    (outcomes None: all 1). Symmetric in the order of a pair. probs, outcomes: (N,). Returns a fraction."""
    p, y = _check_probs_outcomes(probs, outcomes)
    return float(np.mean((p - y) ** 2)) if p.size else float("nan")


# ----------------------------------------------------------------------------------------------------
# Pareto frontier and hypervolume (maximisation in both objectives)


def pareto_front(points: ArrayLike) -> FloatArray:
    """Non-dominated points of a 2-D set under maximisation, duplicates removed.

    points: (N, 2). A point is dominated when another is >= in both coordinates and > in one.
    Returns (K, 2) sorted by the first coordinate ascending (so the second is descending).
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if pts.size == 0:
        return np.empty((0, 2))
    # Sort by x descending, then y descending; sweep keeping points that raise the best y seen so far.
    order = np.lexsort((-pts[:, 1], -pts[:, 0]))
    front = []
    best_y = -np.inf
    for x, y in pts[order]:
        if y > best_y:
            front.append((x, y))
            best_y = y
    return np.asarray(front[::-1], dtype=np.float64)


def hypervolume_2d(points: ArrayLike, reference: tuple[float, float] = (0.0, 0.0)) -> float:
    """Exact area dominated by a 2-D point set and bounded below by `reference` (maximisation).

    points: (N, 2). Points not strictly above the reference in both coordinates add nothing and are
    dropped; the rest are reduced to their Pareto front and the staircase area is summed:
    HV = sum_i (x_i - ref_x) * (y_i - y_{i-1}) over the front sorted by x descending, y_0 = ref_y.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    rx, ry = float(reference[0]), float(reference[1])
    pts = pts[(pts[:, 0] > rx) & (pts[:, 1] > ry)]
    front = pareto_front(pts)[::-1]  # x descending, y ascending
    area, prev_y = 0.0, ry
    for x, y in front:
        area += (x - rx) * (y - prev_y)
        prev_y = y
    return float(area)


# ----------------------------------------------------------------------------------------------------
# Standard block


def evaluate_margins(
    margins: ArrayLike,
    chosen_len: ArrayLike,
    rejected_len: ArrayLike,
    labels: ArrayLike | None = None,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    n_bins: int = 10,
) -> dict[str, Any]:
    """The accuracy block every evaluation reports, as a flat JSON-ready dict.

    margins: (N,) r_chosen - r_rejected; chosen_len, rejected_len: (N,) response lengths in characters;
    labels: optional (N,) P(chosen preferred) (None: gold labels, chosen always preferred).
    Keys (accuracies and rates in percentage points, each with a `<key>_ci` [low, high] bootstrap CI):
    accuracy, length_rule_accuracy, length_controlled_accuracy, chosen_longer_accuracy,
    chosen_shorter_accuracy, prefers_longer_rate; counts n (pairs scored), n_ignored (label == 0.5),
    chosen_longer_n, chosen_shorter_n, equal_length_n; calibration of p = sigmoid(margin) against the
    labels: ece (top-label, `n_bins` equal-width bins over [0.5, 1], a fraction) and brier (a fraction).
    """
    d = _as_1d(margins, "margins")
    kwargs: dict[str, Any] = {"n_boot": n_boot, "confidence": confidence, "seed": seed}
    acc = pairwise_accuracy(d, **kwargs) if labels is None else soft_label_accuracy(d, labels, **kwargs)
    rule = length_rule_accuracy(chosen_len, rejected_len, labels, **kwargs)
    controlled = length_controlled_accuracy(d, chosen_len, rejected_len, labels, **kwargs)
    longer = prefers_longer_rate(d, chosen_len, rejected_len, **kwargs)
    probs = sigmoid(d)
    outcomes = None if labels is None else _as_1d(labels, "labels")
    return {
        "accuracy": json_float(acc.estimate),
        "accuracy_ci": acc.ci,
        "length_rule_accuracy": json_float(rule.estimate),
        "length_rule_accuracy_ci": rule.ci,
        "length_controlled_accuracy": json_float(controlled.value.estimate),
        "length_controlled_accuracy_ci": controlled.value.ci,
        "chosen_longer_accuracy": json_float(controlled.chosen_longer.estimate),
        "chosen_longer_accuracy_ci": controlled.chosen_longer.ci,
        "chosen_longer_n": controlled.chosen_longer.n,
        "chosen_shorter_accuracy": json_float(controlled.chosen_shorter.estimate),
        "chosen_shorter_accuracy_ci": controlled.chosen_shorter.ci,
        "chosen_shorter_n": controlled.chosen_shorter.n,
        "equal_length_n": controlled.n_equal,
        "prefers_longer_rate": json_float(longer.estimate),
        "prefers_longer_rate_ci": longer.ci,
        "ece": json_float(expected_calibration_error(probs, outcomes, n_bins=n_bins)),
        "brier": json_float(brier_score(probs, outcomes)),
        "n": acc.n,
        "n_ignored": int(d.size - acc.n),
    }


# --------------------------------------------------------------------------------------------------------------
# Is a model's doubt worth anything? Selective accuracy and the AUROC of doubt for predicting an error.

COVERAGES = (0.5, 0.8, 1.0)


def _selected(doubt: FloatArray, coverage: float) -> NDArray[np.int64]:
    """Indices of the ceil(coverage N) pairs with the least doubt (ties: the earlier pair first)."""
    keep = max(1, math.ceil(coverage * doubt.size))
    return np.argsort(doubt, kind="stable")[:keep]


def selective_accuracy(
    correct: ArrayLike,
    doubt: ArrayLike,
    coverages: tuple[float, ...] = COVERAGES,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Accuracy (%) of the pairs a model doubts least, at each coverage (the share of pairs kept), with a percentile
    CI resampling pairs (the selection is made again inside each replicate). correct: (N,) in [0, 1]; doubt: (N,),
    larger = less sure."""
    c, u = _as_1d(correct, "correct"), _as_1d(doubt, "doubt")
    _check_same_length(correct=c, doubt=u)
    idx = bootstrap_indices(c.size, n_boot, seed)
    out: dict[str, dict[str, Any]] = {}
    for coverage in coverages:
        point = 100.0 * float(c[_selected(u, coverage)].mean())
        reps = np.array([100.0 * c[i][_selected(u[i], coverage)].mean() for i in idx])
        out[f"{coverage:g}"] = {"accuracy": point, "ci": list(percentile_interval(reps, confidence))}
    return out


def _auroc(errors: NDArray[np.bool_], doubt: FloatArray) -> float:
    """P(doubt of an error > doubt of a correct pair), ties counting one half (Mann-Whitney); NaN without both."""
    from scipy.stats import rankdata

    n_err, n_ok = int(errors.sum()), int((~errors).sum())
    if n_err == 0 or n_ok == 0:
        return float("nan")
    ranks = rankdata(doubt)
    return float((ranks[errors].sum() - n_err * (n_err + 1) / 2) / (n_err * n_ok))


def error_auroc(
    correct: ArrayLike, doubt: ArrayLike, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """AUROC of doubt for telling the pairs a model gets wrong (correct < 0.5) from the ones it gets right: 0.5 = the
    doubt says nothing, 1 = every error is doubted more than every correct pair; a percentile CI over pairs."""
    c, u = _as_1d(correct, "correct"), _as_1d(doubt, "doubt")
    n = _check_same_length(correct=c, doubt=u)
    errors = c < 0.5
    idx = bootstrap_indices(n, n_boot, seed)
    reps = np.array([_auroc(errors[i], u[i]) for i in idx])
    low, high = percentile_interval(reps, confidence)
    return Interval(_auroc(errors, u), low, high, n, confidence)


def error_auroc_difference(
    correct_a: ArrayLike,
    doubt_a: ArrayLike,
    correct_b: ArrayLike,
    doubt_b: ArrayLike,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """error_auroc of model a minus that of model b on the same N pairs (each judged on its own errors), with a
    percentile CI resampling the pairs jointly (a replicate where either model has no error or no right pair is
    dropped)."""
    ca, ua, cb, ub = (
        _as_1d(x, n)
        for x, n in ((correct_a, "correct_a"), (doubt_a, "doubt_a"), (correct_b, "correct_b"), (doubt_b, "doubt_b"))
    )
    n = _check_same_length(correct_a=ca, doubt_a=ua, correct_b=cb, doubt_b=ub)
    ea, eb = ca < 0.5, cb < 0.5
    idx = bootstrap_indices(n, n_boot, seed)
    reps = np.array([_auroc(ea[i], ua[i]) - _auroc(eb[i], ub[i]) for i in idx])
    low, high = percentile_interval(reps, confidence)
    return Interval(_auroc(ea, ua) - _auroc(eb, ub), low, high, n, confidence)


def doubt_block(
    correct: ArrayLike, doubt: ArrayLike, kind: str, *, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """{kind, selective (coverage -> accuracy, ci), error_auroc, error_auroc_ci}: is the doubt worth anything."""
    auroc = error_auroc(correct, doubt, n_boot=n_boot, seed=seed)
    return {
        "kind": kind,
        "selective": selective_accuracy(correct, doubt, n_boot=n_boot, seed=seed),
        "error_auroc": json_float(auroc.estimate),
        "error_auroc_ci": [json_float(auroc.low), json_float(auroc.high)],
    }
