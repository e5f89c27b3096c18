"""Transfer-aware weak-to-strong metrics (METHODS.md section 1) with hierarchical bootstrap CIs.

Accuracies and gains are in percentage points; PGR is a fraction (1.0 = the whole teacher-to-ceiling gap
recovered). Inputs are per-pair correctness arrays of shape (S, N): S seeds of a model (1 for the teacher)
by the N pairs of a split, every model scored on the same pairs.

Point estimates are per-seed metrics averaged over seeds: WRG_s = Acc_s(ID) - Acc_t(ID), AOG_s(T),
NTS_s(T) = AOG_s(T) - max(0, Acc_t(ID) - Acc_s(ID)) and PGR_s = (Acc_s - Acc_t) / (Acc_c,s - Acc_t), with the
ceiling's seed s beside the student's seed s (max(0, .) is not linear, so NTS of the seed-averaged student
would differ).

Each bootstrap replicate resamples seed slots with replacement, once for every model: the models share their seeds
(seed s of every method is trained from the same seed and data), so slot j holds the same seed s of each, and a model
with one seed (the teacher) holds it in every slot. Within slot j, pairs are resampled with replacement, with the
same pair draw for every model. Comparisons between models are thus paired over seeds and over pairs; a model's own
figures use its own slots (one for a one-seed model). The CI is the percentile interval of the replicates. With one
seed this is the ordinary paired bootstrap over pairs. Length control: the length-controlled accuracy (mean
of the chosen-longer and chosen-shorter accuracies, equal lengths dropped) is recomputed inside every
replicate, so its CI stays inside [0, 100].
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.stats import (
    HELD,
    NOT_HELD,
    Interval,
    json_float,
    length_controlled_value,
    percentile_interval,
    replicate_interval,
)

FloatArray = NDArray[np.float64]
FloatOrArray = float | FloatArray

# Below this teacher-to-ceiling gap (percentage points) PGR is reported as undefined.
DEFAULT_MIN_PGR_GAP = 2.0


def weak_to_strong_gain(student_id: FloatOrArray, teacher_id: FloatOrArray) -> FloatOrArray:
    """WRG = Acc_student(ID) - Acc_teacher(ID). Scalars or arrays of equal shape (broadcast)."""
    return np.subtract(student_id, teacher_id)


def ood_gain(student_target: FloatOrArray, teacher_target: FloatOrArray) -> FloatOrArray:
    """AOG(T) = Acc_student(T) - Acc_teacher(T). Scalars or arrays (broadcast)."""
    return np.subtract(student_target, teacher_target)


def net_transfer_score(
    student_target: FloatOrArray, teacher_target: FloatOrArray, student_id: FloatOrArray, teacher_id: FloatOrArray
) -> FloatOrArray:
    """NTS(T) = AOG(T) - max(0, Acc_teacher(ID) - Acc_student(ID)). Scalars or arrays (broadcast)."""
    return np.subtract(ood_gain(student_target, teacher_target), np.maximum(0.0, np.subtract(teacher_id, student_id)))


def performance_gap_recovered(
    student: FloatOrArray, teacher: FloatOrArray, ceiling: FloatOrArray, min_gap: float = DEFAULT_MIN_PGR_GAP
) -> FloatOrArray:
    """PGR = (student - teacher) / (ceiling - teacher), NaN unless the ceiling beats the teacher by at least
    min_gap (same units as the accuracies): with a smaller gap the ratio is dominated by noise, and with the
    ceiling below the teacher there is no gap to recover. Scalars or arrays."""
    gap = np.subtract(ceiling, teacher)
    safe = gap >= min_gap
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(safe, np.subtract(student, teacher) / np.where(safe, gap, 1.0), np.nan)
    return ratio if np.ndim(ratio) else float(ratio)


def _as_seeds(values: ArrayLike, where: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(f"{where}: correctness must be (seeds, pairs) with at least one pair, got {array.shape}")
    return array


class SlotAccuracies:
    """Per-seed accuracies of every model on every split, at the point and in each bootstrap replicate.

    point[model][split]: (S_model,) accuracies of the model's seeds (percentage points).
    reps[model][split]: (n_boot, S) accuracies in seed slot j of each replicate, S the seed count of the models with
    several seeds: slot j is the same drawn seed of every such model, and uses pair draw j for every model; a model
    with one seed fills every slot with it. seeds[model]: its seed count (its own slots are the first that many).
    """

    def __init__(
        self,
        correct: Mapping[str, Mapping[str, ArrayLike]],
        splits: list[str],
        n_boot: int,
        seed: int,
        lengths: Mapping[str, tuple[ArrayLike, ArrayLike]] | None = None,
    ):
        arrays = {m: {s: _as_seeds(c[s], f"{m}/{s}") for s in splits if s in c} for m, c in correct.items()}
        sizes: dict[str, int] = {}
        for m, by_split in arrays.items():
            for s, a in by_split.items():
                if sizes.setdefault(s, a.shape[1]) != a.shape[1]:
                    raise ValueError(f"{m}/{s} has {a.shape[1]} pairs, others {sizes[s]}")
        self.n_pairs = sizes
        self.n_units: dict[str, int] = {}  # the pairs resampled per split (length control drops equal lengths)
        self.seeds: dict[str, int] = {}
        for m, by_split in arrays.items():
            counts = {a.shape[0] for a in by_split.values()} or {1}
            if len(counts) > 1:
                raise ValueError(f"{m}: every split needs the same seeds, got seed counts {sorted(counts)}")
            self.seeds[m] = counts.pop()
        several = {m: s for m, s in self.seeds.items() if s > 1}
        if len(set(several.values())) > 1:
            raise ValueError(f"models compared over seeds need the same seeds, got seed counts {several}")
        width = max(several.values(), default=1)
        rng = np.random.default_rng(seed)
        n_boot = max(n_boot, 0)
        self.n_boot = n_boot
        self.point: dict[str, dict[str, FloatArray]] = {m: {} for m in arrays}
        self.reps: dict[str, dict[str, FloatArray]] = {m: {} for m in arrays}
        # One seed draw for every model and split: slot j is the same seed of every model (the seeds are shared, so
        # differences stay paired over seeds) and of every split (means over splits keep a seed's results together).
        shared = rng.integers(0, width, size=(n_boot, width))
        one_seed = np.zeros((n_boot, width), dtype=np.int64)
        for split in splits:
            if split not in sizes:
                continue
            keep, longer = self._length_mask(lengths, split, sizes[split])
            n = int(keep.sum())
            self.n_units[split] = n
            units = rng.integers(0, max(n, 1), size=(n_boot, width, n))
            for m in arrays:
                if split not in arrays[m]:
                    continue
                values = arrays[m][split][:, keep]
                seeds = shared if self.seeds[m] == width else one_seed
                resampled = values[seeds[..., None], units]
                if longer is None:
                    self.point[m][split] = values.mean(axis=1) * 100.0
                    self.reps[m][split] = resampled.mean(axis=2) * 100.0
                else:
                    self.point[m][split] = length_controlled_value(values, longer) * 100.0
                    self.reps[m][split] = length_controlled_value(resampled, longer[units]) * 100.0

    def slots(self, *models: str) -> int:
        """The seed slots a statistic of these models averages over: the largest seed count among them (a one-seed
        model alone: one slot, not the same seed counted in every slot)."""
        return max(self.seeds[m] for m in models)

    @staticmethod
    def _length_mask(
        lengths: Mapping[str, tuple[ArrayLike, ArrayLike]] | None, split: str, n: int
    ) -> tuple[NDArray[np.bool_], NDArray[np.bool_] | None]:
        if lengths is None:
            return np.ones(n, dtype=bool), None
        chosen, rejected = (np.asarray(x, dtype=np.float64) for x in lengths[split])
        keep = chosen != rejected
        return keep, (chosen > rejected)[keep]


def _put(
    out: dict[str, Any],
    key: str,
    point: float,
    reps: FloatArray,
    n: int,
    confidence: float,
    per_seed: FloatArray | None = None,
) -> Interval:
    """Writes `key` and `<key>_ci` (and `<key>_seed_std` with several seeds) of an estimate and its replicates;
    returns the Interval (NaN ends where the estimate is not finite)."""
    if np.isfinite(point):
        interval = replicate_interval(point, reps, n, confidence)
    else:
        interval = Interval(float("nan"), float("nan"), float("nan"), n, confidence)
    out[key] = json_float(interval.estimate)
    out[f"{key}_ci"] = interval.ci
    if per_seed is not None and per_seed.size > 1:
        out[f"{key}_seed_std"] = json_float(float(np.nanstd(per_seed, ddof=1)))
    return interval


def transfer_metrics(
    correct: Mapping[str, Mapping[str, ArrayLike]],
    teacher: str = "teacher",
    ceiling: str | None = "ceiling",
    *,
    id_split: str = "id",
    lengths: Mapping[str, tuple[ArrayLike, ArrayLike]] | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    min_pgr_gap: float = DEFAULT_MIN_PGR_GAP,
) -> dict[str, dict[str, Any]]:
    """WRG, AOG, NTS and PGR of every model against the weak teacher, with hierarchical bootstrap CIs.

    correct: {model: {split: (S, N) or (N,) per-pair correctness}}, split = `id_split` or a target name.
    lengths: {split: (chosen_len (N,), rejected_len (N,))} computes everything on length-controlled accuracy.
    Returns {model: flat dict}: `id_acc`, `ood_acc.<target>`, `n.<split>`, `n_seeds`; for every model but the
    teacher also `wrg`, `aog.<target>`, `nts.<target>` and, with a ceiling, `pgr.<split>` plus a bool
    `pgr.<split>_undefined` when ceiling - teacher < min_pgr_gap. Each number has `<key>_ci` and, with
    several seeds, `<key>_seed_std` (standard deviation of the per-seed values).
    """
    if teacher not in correct:
        raise ValueError(f"teacher {teacher!r} not among the models {sorted(correct)}")
    if id_split not in correct[teacher]:
        raise ValueError(f"teacher has no {id_split!r} split; splits: {sorted(correct[teacher])}")
    splits = [id_split, *sorted(s for s in correct[teacher] if s != id_split)]
    acc = SlotAccuracies(correct, splits, n_boot, seed, lengths)
    t_point = {s: float(acc.point[teacher][s][0]) for s in splits}
    results: dict[str, dict[str, Any]] = {}
    for model in correct:
        out: dict[str, Any] = {}
        own = acc.slots(model)
        for split in splits:
            if split not in acc.point[model]:
                continue
            p, r = acc.point[model][split], acc.reps[model][split][:, :own]
            key = "id_acc" if split == id_split else f"ood_acc.{split}"
            _put(out, key, float(p.mean()), r.mean(axis=1), acc.n_units[split], confidence, p)
            out[f"n.{split}"] = acc.n_pairs[split]
        out["n_seeds"] = int(next(iter(acc.point[model].values())).size) if acc.point[model] else 0
        if model == teacher or id_split not in acc.point[model]:
            results[model] = out
            continue
        # Against the one-seed teacher, slot by slot: the teacher's pairs drawn as the student's in each slot.
        s_id, s_id_r = acc.point[model][id_split], acc.reps[model][id_split][:, :own]
        t_id_r = acc.reps[teacher][id_split][:, :own]
        n_id = acc.n_units[id_split]
        wrg = s_id - t_point[id_split]
        _put(out, "wrg", float(wrg.mean()), (s_id_r - t_id_r).mean(axis=1), n_id, confidence, wrg)
        id_loss_point = np.maximum(0.0, t_point[id_split] - s_id)
        id_loss_reps = np.maximum(0.0, t_id_r - s_id_r)
        for target in splits[1:]:
            if target not in acc.point[model]:
                continue
            s_t, s_t_r = acc.point[model][target], acc.reps[model][target][:, :own]
            t_t_r = acc.reps[teacher][target][:, :own]
            n_t = acc.n_units[target]
            aog = s_t - t_point[target]
            _put(out, f"aog.{target}", float(aog.mean()), (s_t_r - t_t_r).mean(axis=1), n_t, confidence, aog)
            nts = aog - id_loss_point
            nts_reps = (s_t_r - t_t_r - id_loss_reps).mean(axis=1)
            _put(out, f"nts.{target}", float(nts.mean()), nts_reps, min(n_t, n_id), confidence, nts)
        if ceiling is not None and ceiling in acc.point:
            k = acc.slots(model, ceiling)  # the ceiling's seed s beside the student's seed s, slot by slot
            for split in splits:
                if split not in acc.point[model] or split not in acc.point[ceiling]:
                    continue
                s_p, s_r = acc.point[model][split], acc.reps[model][split][:, :k]
                c_p, c_r = acc.point[ceiling][split], acc.reps[ceiling][split][:, :k]
                t_r = acc.reps[teacher][split][:, :k]
                c_aligned = np.array([c_p[j % c_p.size] for j in range(s_p.size)])
                per_seed = np.asarray(performance_gap_recovered(s_p, t_point[split], c_aligned, min_pgr_gap))
                undefined = bool(float(c_p.mean()) - t_point[split] < min_pgr_gap)
                point = float("nan") if undefined or np.all(np.isnan(per_seed)) else float(np.nanmean(per_seed))
                rep_seed = np.asarray(performance_gap_recovered(s_r, t_r, c_r, min_pgr_gap))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: PGR undefined there
                    reps = np.nanmean(rep_seed, axis=1)
                _put(out, f"pgr.{split}", point, reps, acc.n_units[split], confidence, per_seed)
                out[f"pgr.{split}_undefined"] = undefined
        results[model] = out
    return results


def _difference(acc: SlotAccuracies, model: str, reference: str, split: str) -> tuple[float, FloatArray]:
    """model minus reference on one split: the difference of their seed means and its replicates (n_boot,), slot by
    slot over the slots of the two (the same seed and pairs of both in each)."""
    k = acc.slots(model, reference)
    a_p, a_r = acc.point[model][split], acc.reps[model][split][:, :k]
    b_p, b_r = acc.point[reference][split], acc.reps[reference][split][:, :k]
    return float(a_p.mean() - b_p.mean()), (a_r - b_r).mean(axis=1)


def paired_differences(
    correct: Mapping[str, Mapping[str, ArrayLike]],
    reference: str,
    *,
    lengths: Mapping[str, tuple[ArrayLike, ArrayLike]] | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    means: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Accuracy of each model minus the reference model's, per split (seed means, percentage points), with
    hierarchical bootstrap CIs paired over seeds and pairs (SlotAccuracies: one seed draw for every model, one pair
    draw per slot; the models share their seeds).

    means: {name: splits}: also the mean of the differences over those splits ("d.<name>"), its replicates the
    means of the splits' replicates (one seed draw serves every split).
    Returns {model: {"d.<split>", "d.<split>_ci", "significant.<split>"}} for every model but the reference;
    significant: the CI's verdict is held or not held (rewardsmith.stats.Interval.verdict: it excludes 0, on at least
    MIN_UNITS pairs).
    """
    if reference not in correct:
        raise ValueError(f"reference {reference!r} not among the models {sorted(correct)}")
    splits = list(correct[reference])
    acc = SlotAccuracies(correct, splits, n_boot, seed, lengths)
    out: dict[str, dict[str, Any]] = {}
    for model in correct:
        if model == reference:
            continue
        rec: dict[str, Any] = {}
        for split in splits:
            if split not in acc.point[model]:
                continue
            interval = _put(
                rec, f"d.{split}", *_difference(acc, model, reference, split), acc.n_units[split], confidence
            )
            rec[f"significant.{split}"] = interval.verdict() in (HELD, NOT_HELD)
        for name, group in (means or {}).items():
            diffs = [_difference(acc, model, reference, g) for g in group]
            if not diffs:
                continue
            point = float(np.mean([d for d, _ in diffs]))
            reps = np.mean([r for _, r in diffs], axis=0)
            interval = _put(rec, f"d.{name}", point, reps, min(acc.n_units[g] for g in group), confidence)
            rec[f"significant.{name}"] = interval.verdict() in (HELD, NOT_HELD)
        out[model] = rec
    return out


def unpaired_difference(
    first: ArrayLike,
    second: ArrayLike,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    first_longer: ArrayLike | None = None,
    second_longer: ArrayLike | None = None,
) -> dict[str, Any]:
    """Accuracy of `second` minus accuracy of `first` (percentage points) for one model on two different pair
    sets (e.g. a shift target minus the ID test): per-pair correctness (N1,) and (N2,), each set resampled on its
    own. With the chosen-longer flags of both sets, also the length-controlled difference (equal lengths excluded
    from the flags' sets by the caller). Returns {"value", "ci"} (+ "length_controlled", "length_controlled_ci")."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), size=(n_boot, len(a)))
    ib = rng.integers(0, len(b), size=(n_boot, len(b)))
    reps = 100.0 * (b[ib].mean(axis=1) - a[ia].mean(axis=1))
    out: dict[str, Any] = {
        "value": json_float(100.0 * (b.mean() - a.mean())),
        "ci": [json_float(x) for x in percentile_interval(reps, confidence)],
    }
    if first_longer is not None and second_longer is not None:
        la, lb = np.asarray(first_longer, dtype=bool), np.asarray(second_longer, dtype=bool)
        point = length_controlled_value(b, lb) - length_controlled_value(a, la)
        lc_reps = length_controlled_value(b[ib], lb[ib]) - length_controlled_value(a[ia], la[ia])
        out["length_controlled"] = json_float(100.0 * float(point))
        out["length_controlled_ci"] = [json_float(100.0 * x) for x in percentile_interval(lc_reps, confidence)]
    return out
