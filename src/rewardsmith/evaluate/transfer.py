"""Transfer-aware weak-to-strong metrics (METHODS.md section 1) with paired bootstrap CIs.

All accuracies and gains are in percentage points; PGR is a fraction (1.0 = the whole teacher-to-ceiling
gap recovered). Inputs are per-pair correctness vectors, so every model is scored on the same pairs and a
bootstrap replicate resamples the ID pairs and each target's pairs once, jointly for all models and all
metrics (NTS mixes ID and target accuracies, so both are resampled in the same replicate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.evaluate.metrics import aggregate_seeds, json_float, percentile_interval

FloatOrArray = float | NDArray[np.float64]

# Below this teacher-to-ceiling gap (percentage points) PGR is reported as undefined (NaN).
DEFAULT_MIN_PGR_GAP = 1.0


def weak_to_strong_gain(student_id: FloatOrArray, teacher_id: FloatOrArray) -> FloatOrArray:
    """WRG = Acc_student(ID) - Acc_teacher(ID). Scalars or arrays of equal shape (broadcast)."""
    return np.subtract(student_id, teacher_id)


def ood_gain(student_target: FloatOrArray, teacher_target: FloatOrArray) -> FloatOrArray:
    """AOG(T) = Acc_student(T) - Acc_teacher(T). Scalars or arrays (broadcast)."""
    return np.subtract(student_target, teacher_target)


def net_transfer_score(student_target: FloatOrArray, teacher_target: FloatOrArray,
                       student_id: FloatOrArray, teacher_id: FloatOrArray) -> FloatOrArray:
    """NTS(T) = AOG(T) - max(0, Acc_teacher(ID) - Acc_student(ID)): the OOD gain, penalised by any ID loss
    against the teacher. Scalars or arrays (broadcast)."""
    return np.subtract(ood_gain(student_target, teacher_target),
                       np.maximum(0.0, np.subtract(teacher_id, student_id)))


def performance_gap_recovered(student: FloatOrArray, teacher: FloatOrArray, ceiling: FloatOrArray,
                              min_gap: float = DEFAULT_MIN_PGR_GAP) -> FloatOrArray:
    """PGR = (student - teacher) / (ceiling - teacher), NaN where |ceiling - teacher| < min_gap (same
    units as the accuracies) because the ratio is then dominated by noise. Scalars or arrays."""
    gap = np.subtract(ceiling, teacher)
    safe = np.abs(gap) >= min_gap
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(safe, np.subtract(student, teacher) / np.where(safe, gap, 1.0), np.nan)
    return ratio if np.ndim(ratio) else float(ratio)


def _correctness(values: ArrayLike, where: str) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{where}: correctness must be 1-D, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{where}: no pairs")
    return array


def _with_ci(out: dict[str, Any], key: str, value: float, replicates: FloatOrArray,
             confidence: float) -> None:
    """Writes `key` and `<key>_ci` (percentile interval of `replicates`, (n_boot,); None when empty)."""
    out[key] = json_float(value)
    low, high = percentile_interval(replicates, confidence) if np.isfinite(value) else (np.nan, np.nan)
    out[f"{key}_ci"] = [json_float(low), json_float(high)]


def transfer_metrics(correct: Mapping[str, Mapping[str, ArrayLike]], teacher: str = "teacher",
                     ceiling: str | None = "ceiling", *, id_split: str = "id", n_boot: int = 1000,
                     confidence: float = 0.95, seed: int = 0,
                     min_pgr_gap: float = DEFAULT_MIN_PGR_GAP) -> dict[str, dict[str, Any]]:
    """WRG, AOG, NTS and PGR of every model against the weak teacher, with paired bootstrap CIs.

    correct: {model (role or method name): {split: (N_split,) per-pair correctness}}, where split is
    `id_split` or a target name and correctness is bool or 0 / 0.5 / 1 (see `pairwise_correct`). All
    models must be scored on the same pairs of a split; targets are the teacher's non-ID splits.
    `ceiling` names the gold-label strong model used for PGR (None or absent: no PGR).

    Returns {model: flat dict}. Every model has `id_acc`, `ood_acc.<target>` and `n.<split>`; every
    model but the teacher also has `wrg`, `aog.<target>`, `nts.<target>` and, with a ceiling, `pgr.id`,
    `pgr.<target>` plus a bool `pgr.<split>_undefined` when |ceiling - teacher| < min_pgr_gap there.
    Each number has a `<key>_ci` [low, high] companion: percentile interval over `n_boot` replicates,
    each resampling the ID pairs and each target's pairs with replacement (shared by all models).
    """
    if teacher not in correct:
        raise ValueError(f"teacher {teacher!r} not among the models {sorted(correct)}")
    if id_split not in correct[teacher]:
        raise ValueError(f"teacher has no {id_split!r} split; splits: {sorted(correct[teacher])}")
    splits = [id_split, *sorted(s for s in correct[teacher] if s != id_split)]
    targets = splits[1:]
    sizes = {s: _correctness(correct[teacher][s], f"{teacher}/{s}").size for s in splits}

    rng = np.random.default_rng(seed)
    indices = {s: rng.integers(0, sizes[s], size=(max(n_boot, 0), sizes[s])) for s in splits}

    # Point accuracies and bootstrap replicates, percentage points: acc[model][split] -> (value, (n_boot,)).
    acc: dict[str, dict[str, tuple[float, NDArray[np.float64]]]] = {}
    for model, by_split in correct.items():
        acc[model] = {}
        for split in splits:
            if split not in by_split:
                continue
            values = _correctness(by_split[split], f"{model}/{split}")
            if values.size != sizes[split]:
                raise ValueError(f"{model}/{split} has {values.size} pairs, the teacher {sizes[split]}")
            acc[model][split] = (float(values.mean() * 100.0), values[indices[split]].mean(axis=1) * 100.0)

    ceiling_acc = acc.get(ceiling) if ceiling is not None else None
    t = acc[teacher]
    results: dict[str, dict[str, Any]] = {}
    for model, model_acc in acc.items():
        out: dict[str, Any] = {}
        for split, (value, reps) in model_acc.items():
            _with_ci(out, "id_acc" if split == id_split else f"ood_acc.{split}", value, reps, confidence)
        for split in model_acc:
            out[f"n.{split}"] = sizes[split]
        if model == teacher or id_split not in model_acc:
            results[model] = out
            continue
        s_id, s_id_reps = model_acc[id_split]
        t_id, t_id_reps = t[id_split]
        _with_ci(out, "wrg", float(weak_to_strong_gain(s_id, t_id)),
                 weak_to_strong_gain(s_id_reps, t_id_reps), confidence)
        for target in targets:
            if target not in model_acc:
                continue
            s_t, s_t_reps = model_acc[target]
            t_t, t_t_reps = t[target]
            _with_ci(out, f"aog.{target}", float(ood_gain(s_t, t_t)), ood_gain(s_t_reps, t_t_reps),
                     confidence)
            _with_ci(out, f"nts.{target}", float(net_transfer_score(s_t, t_t, s_id, t_id)),
                     net_transfer_score(s_t_reps, t_t_reps, s_id_reps, t_id_reps), confidence)
        if ceiling_acc is not None:
            for split in splits:
                if split not in model_acc or split not in ceiling_acc:
                    continue
                (s, s_reps), (tt, tt_reps) = model_acc[split], t[split]
                c, c_reps = ceiling_acc[split]
                point = float(performance_gap_recovered(s, tt, c, min_pgr_gap))
                _with_ci(out, f"pgr.{split}", point,
                         np.asarray(performance_gap_recovered(s_reps, tt_reps, c_reps, min_pgr_gap)),
                         confidence)
                out[f"pgr.{split}_undefined"] = bool(np.isnan(point))
        results[model] = out
    return results


def aggregate_transfer_seeds(per_seed: Sequence[Mapping[str, Mapping[str, Any]]],
                             confidence: float = 0.95) -> dict[str, dict[str, Any]]:
    """Aggregate `transfer_metrics` outputs from several seeds, model by model.

    per_seed: one {model: flat dict} per seed. For every model present in all seeds and each numeric key:
    `<key>` = mean over seeds, `<key>_std` (ddof=1), `<key>_ci` = t-based CI across seeds (replacing the
    per-seed bootstrap CI); `*_undefined` flags are OR-ed; `n_seeds` is added.
    """
    if not per_seed:
        return {}
    models = [m for m in per_seed[0] if all(m in run for run in per_seed)]
    return {m: aggregate_seeds([run[m] for run in per_seed], confidence) for m in models}
