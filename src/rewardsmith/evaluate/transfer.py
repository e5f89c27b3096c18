"""Transfer-aware weak-to-strong metrics (METHODS.md section 1) with hierarchical bootstrap CIs.

Accuracies and gains are in percentage points; PGR is a fraction (1.0 = the whole teacher-to-ceiling gap
recovered). Inputs are per-pair correctness arrays of shape (S, N): S seeds of a model (1 for the teacher)
by the N pairs of a split, every model scored on the same pairs.

Point estimates are per-seed metrics averaged over seeds: WRG_s = Acc_s(ID) - Acc_t(ID), AOG_s(T),
NTS_s(T) = AOG_s(T) - max(0, Acc_t(ID) - Acc_s(ID)) and PGR_s = (Acc_s - Acc_t) / (Acc_c,s - Acc_t), with the
ceiling's seed s beside the student's seed s (max(0, .) is not linear, so NTS of the seed-averaged student
would differ).

Each bootstrap replicate resamples seeds with replacement, separately for each model, then pairs with
replacement within each drawn seed slot; slot j uses the same pair draw for every model (and the teacher),
so comparisons between models stay paired. The CI is the percentile interval of the replicates. With one
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

from rewardsmith.evaluate.metrics import json_float
from rewardsmith.stats import length_controlled_value, percentile_interval

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
    reps[model][split]: (n_boot, S_model) accuracies in seed slot j of each replicate (slot j of every model
    uses pair draw j; the teacher, with one seed, fills every slot of the widest model).
    """

    def __init__(
        self,
        correct: Mapping[str, Mapping[str, ArrayLike]],
        splits: list[str],
        n_boot: int,
        seed: int,
        lengths: Mapping[str, tuple[ArrayLike, ArrayLike]] | None = None,
        single_seed_models: tuple[str, ...] = (),
    ):
        arrays = {m: {s: _as_seeds(c[s], f"{m}/{s}") for s in splits if s in c} for m, c in correct.items()}
        sizes: dict[str, int] = {}
        for m, by_split in arrays.items():
            for s, a in by_split.items():
                if sizes.setdefault(s, a.shape[1]) != a.shape[1]:
                    raise ValueError(f"{m}/{s} has {a.shape[1]} pairs, others {sizes[s]}")
        self.n_pairs = sizes
        width = max([a.shape[0] for by in arrays.values() for a in by.values()] + [1])
        rng = np.random.default_rng(seed)
        n_boot = max(n_boot, 0)
        self.n_boot = n_boot
        self.point: dict[str, dict[str, FloatArray]] = {m: {} for m in arrays}
        self.reps: dict[str, dict[str, FloatArray]] = {m: {} for m in arrays}
        # One seed draw per model, shared by every split: a replicate's seed s is the same model on every split,
        # so means over splits keep the correlation between a seed's results on different splits.
        seed_draws: dict[str, NDArray[np.int64]] = {}
        for m, by_split in arrays.items():
            counts = {a.shape[0] for a in by_split.values()} or {1}
            if len(counts) > 1:
                raise ValueError(f"{m}: every split needs the same seeds, got seed counts {sorted(counts)}")
            s = counts.pop()
            slots = width if m in single_seed_models or s == 1 else s
            seed_draws[m] = rng.integers(0, s, size=(n_boot, slots))
        for split in splits:
            if split not in sizes:
                continue
            keep, longer = self._length_mask(lengths, split, sizes[split])
            n = int(keep.sum())
            units = rng.integers(0, max(n, 1), size=(n_boot, width, n))
            for m in arrays:
                if split not in arrays[m]:
                    continue
                values = arrays[m][split][:, keep]
                seeds = seed_draws[m]
                slots = seeds.shape[1]
                resampled = values[seeds[..., None], units[:, :slots]]
                if longer is None:
                    self.point[m][split] = values.mean(axis=1) * 100.0
                    self.reps[m][split] = resampled.mean(axis=2) * 100.0
                else:
                    self.point[m][split] = length_controlled_value(values, longer) * 100.0
                    self.reps[m][split] = length_controlled_value(resampled, longer[units[:, :slots]]) * 100.0

    @staticmethod
    def _length_mask(
        lengths: Mapping[str, tuple[ArrayLike, ArrayLike]] | None, split: str, n: int
    ) -> tuple[NDArray[np.bool_], NDArray[np.bool_] | None]:
        if lengths is None:
            return np.ones(n, dtype=bool), None
        chosen, rejected = (np.asarray(x, dtype=np.float64) for x in lengths[split])
        keep = chosen != rejected
        return keep, (chosen > rejected)[keep]


def _slot(values: FloatArray, k: int) -> FloatArray:
    """Column k of (n_boot, S) replicates, or the single column of a one-seed model."""
    return values[:, k if values.shape[1] > k else 0]


def _put(
    out: dict[str, Any], key: str, point: float, reps: FloatArray, confidence: float, per_seed: FloatArray | None = None
) -> None:
    out[key] = json_float(point)
    low, high = percentile_interval(reps, confidence) if np.isfinite(point) else (np.nan, np.nan)
    out[f"{key}_ci"] = [json_float(low), json_float(high)]
    if per_seed is not None and per_seed.size > 1:
        out[f"{key}_seed_std"] = json_float(float(np.nanstd(per_seed, ddof=1)))


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
    acc = SlotAccuracies(correct, splits, n_boot, seed, lengths, (teacher,))
    t_point = {s: float(acc.point[teacher][s][0]) for s in splits}
    results: dict[str, dict[str, Any]] = {}
    for model in correct:
        out: dict[str, Any] = {}
        for split in splits:
            if split not in acc.point[model]:
                continue
            p, r = acc.point[model][split], acc.reps[model][split]
            _put(
                out,
                "id_acc" if split == id_split else f"ood_acc.{split}",
                float(p.mean()),
                r.mean(axis=1),
                confidence,
                p,
            )
            out[f"n.{split}"] = acc.n_pairs[split]
        out["n_seeds"] = int(next(iter(acc.point[model].values())).size) if acc.point[model] else 0
        if model == teacher or id_split not in acc.point[model]:
            results[model] = out
            continue
        s_id, s_id_r = acc.point[model][id_split], acc.reps[model][id_split]
        t_id_r = acc.reps[teacher][id_split]
        slots = s_id_r.shape[1]
        t_id_slots = np.stack([_slot(t_id_r, k) for k in range(slots)], axis=1)
        wrg = s_id - t_point[id_split]
        _put(out, "wrg", float(wrg.mean()), (s_id_r - t_id_slots).mean(axis=1), confidence, wrg)
        id_loss_point = np.maximum(0.0, t_point[id_split] - s_id)
        id_loss_reps = np.maximum(0.0, t_id_slots - s_id_r)
        for target in splits[1:]:
            if target not in acc.point[model]:
                continue
            s_t, s_t_r = acc.point[model][target], acc.reps[model][target]
            t_t_slots = np.stack([_slot(acc.reps[teacher][target], k) for k in range(slots)], axis=1)
            aog = s_t - t_point[target]
            _put(out, f"aog.{target}", float(aog.mean()), (s_t_r - t_t_slots).mean(axis=1), confidence, aog)
            nts = aog - id_loss_point
            _put(
                out,
                f"nts.{target}",
                float(nts.mean()),
                (s_t_r - t_t_slots - id_loss_reps).mean(axis=1),
                confidence,
                nts,
            )
        if ceiling is not None and ceiling in acc.point:
            for split in splits:
                if split not in acc.point[model] or split not in acc.point[ceiling]:
                    continue
                s_p, s_r = acc.point[model][split], acc.reps[model][split]
                c_p, c_r = acc.point[ceiling][split], acc.reps[ceiling][split]
                t_r = np.stack([_slot(acc.reps[teacher][split], k) for k in range(slots)], axis=1)
                c_slots = np.stack([_slot(c_r, k) for k in range(slots)], axis=1)
                c_aligned = np.array([c_p[k % c_p.size] for k in range(s_p.size)])
                per_seed = np.asarray(performance_gap_recovered(s_p, t_point[split], c_aligned, min_pgr_gap))
                undefined = bool(float(c_p.mean()) - t_point[split] < min_pgr_gap)
                point = float("nan") if undefined or np.all(np.isnan(per_seed)) else float(np.nanmean(per_seed))
                rep_seed = np.asarray(performance_gap_recovered(s_r, t_r, c_slots, min_pgr_gap))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: PGR undefined there
                    reps = np.nanmean(rep_seed, axis=1)
                _put(out, f"pgr.{split}", point, reps, confidence, per_seed)
                out[f"pgr.{split}_undefined"] = undefined
        results[model] = out
    return results


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
    hierarchical bootstrap CIs (seeds resampled per model, pairs shared per slot).

    means: {name: splits}: also the mean of the differences over those splits ("d.<name>"), its replicates the
    means of the splits' replicates (one seed draw per model serves every split).
    Returns {model: {"d.<split>", "d.<split>_ci", "significant.<split>"}} for every model but the reference;
    significant means the CI excludes 0.
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
            a_p, a_r = acc.point[model][split], acc.reps[model][split]
            b_p, b_r = acc.point[reference][split], acc.reps[reference][split]
            _put(rec, f"d.{split}", float(a_p.mean() - b_p.mean()), a_r.mean(axis=1) - b_r.mean(axis=1), confidence)
            low, high = rec[f"d.{split}_ci"]
            rec[f"significant.{split}"] = bool(low is not None and high is not None and (low > 0 or high < 0))
        for name, group in (means or {}).items():
            diffs = [
                (
                    acc.point[model][g].mean() - acc.point[reference][g].mean(),
                    acc.reps[model][g].mean(axis=1) - acc.reps[reference][g].mean(axis=1),
                )
                for g in group
            ]
            if not diffs:
                continue
            _put(
                rec,
                f"d.{name}",
                float(np.mean([d for d, _ in diffs])),
                np.mean([r for _, r in diffs], axis=0),
                confidence,
            )
            low, high = rec[f"d.{name}_ci"]
            rec[f"significant.{name}"] = bool(low is not None and high is not None and (low > 0 or high < 0))
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
