"""The metrics of a shift run: accuracy, WRG, AOG, NTS and PGR of every model with hierarchical bootstrap CIs
(seeds, then pairs; rewardsmith.evaluate.transfer), the same on length-controlled accuracy, every method's
difference to naive, the length rule, how often each model prefers the longer response, and the teacher's
labels (accuracy, confidence and calibration against gold on the W2S pool)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.evaluate.metrics import (
    expected_calibration_error,
    length_rule_accuracy,
    pairwise_correct,
    prefers_longer_rate,
)
from rewardsmith.evaluate.protocols import response_lengths
from rewardsmith.evaluate.transfer import (
    SlotAccuracies,
    net_transfer_score,
    ood_gain,
    paired_differences,
    transfer_metrics,
    weak_to_strong_gain,
)
from rewardsmith.stats import Interval, json_float, replicate_interval
from rewardsmith.w2s.reference import ReferenceStateCache

ID_SPLIT = "id"
VAL_SPLIT = "val"
TEACHER = "teacher"
CEILING = "ceiling"
NAIVE = "naive"

# margins[model][seed][split] -> (N_split,) margins r(chosen) - r(rejected); the teacher's seed is -1.
Margins = Mapping[str, Mapping[int, Mapping[str, np.ndarray]]]


def correctness(margins: Margins) -> dict[str, dict[str, np.ndarray]]:
    """correct[model][split]: (S, N) per-pair correctness, seeds in ascending order."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for model, by_seed in margins.items():
        seeds = sorted(by_seed)
        splits = by_seed[seeds[0]].keys()
        out[model] = {s: np.stack([pairwise_correct(by_seed[k][s]) for k in seeds]) for s in splits}
    return out


def teacher_label_stats(labels: np.ndarray) -> dict[str, Any]:
    """The teacher's soft labels q on the W2S pool against gold (chosen preferred): how often q sides with
    gold, how confident it is (mean max(q, 1 - q)), the median |logit q|, and its top-label ECE."""
    q = np.asarray(labels, dtype=np.float64)
    margin = np.log(np.clip(q, 1e-9, 1.0)) - np.log(np.clip(1.0 - q, 1e-9, 1.0))
    return {
        "accuracy_on_w2s_pool": float(np.mean(q > 0.5) * 100.0),
        "mean": float(q.mean()),
        "mean_confidence": float(np.mean(np.maximum(q, 1.0 - q))),
        "median_abs_margin": float(np.median(np.abs(margin))),
        "ece": json_float(expected_calibration_error(q)),
    }


def validation_summary(val_margins: Margins) -> dict[str, dict[str, Any]]:
    """Accuracy (%) of every model on the validation split: the mean over seeds and the per-seed values."""
    out = {}
    for model, by_seed in val_margins.items():
        per_seed = [float(pairwise_correct(by_seed[s][VAL_SPLIT]).mean() * 100.0) for s in sorted(by_seed)]
        if per_seed:
            out[model] = {"accuracy": float(np.mean(per_seed)), "per_seed": per_seed}
    return out


def anchor_selection(config: Any, validation: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For each group of anchor methods that share depths and normalisation, the weight with the best mean
    validation accuracy (the validation split is never reported as a result, so the choice does not look at
    the test sets)."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for m in config.methods:
        if m.objective == "anchor" and m.name in validation:
            groups.setdefault((tuple(m.anchor.layers), m.anchor.normalise), []).append(m)
    out = []
    for (layers, normalise), members in groups.items():
        scores = {m.name: validation[m.name]["accuracy"] for m in members}
        best = max(scores, key=lambda name: scores[name])
        out.append(
            {
                "layers": list(layers),
                "normalise": normalise,
                "chosen": best,
                "weight": next(m.anchor.weight for m in members if m.name == best),
                "by": "mean validation accuracy over seeds",
                "candidates": scores,
            }
        )
    return out


def reference_mean_square(cache: ReferenceStateCache) -> dict[int, float]:
    """The anchor's normaliser per cached layer: the mean over sequences (both sides of every pair) of each
    sequence's mean over response tokens of mean_h s^2, s the reference state (what `anchor_loss(normalise=True)`
    divides a batch's MSE by, averaged over the data). A raw-MSE weight lambda_raw is the normalised weight
    lambda_raw * this value. Returns {hidden-state index: mean square}."""
    counts = cache.counts.reshape(-1)
    offsets = cache.offsets.reshape(-1)
    out: dict[int, float] = {}
    for j, layer in enumerate(cache.layers):
        per_sequence = [
            float(np.mean(np.square(np.asarray(cache.states[o : o + c, j], dtype=np.float64))))
            for o, c in zip(offsets, counts, strict=True)
            if c > 0
        ]
        out[layer] = float(np.mean(per_sequence))
    return out


# Methods that are not weak-to-strong methods of the paper's comparison (b): debiased variants of naive.
def _is_paper_method(method: Any) -> bool:
    return method.debias in ("inherit", "none") and method.name != CEILING


def _draws(
    correct: Mapping[str, Mapping[str, np.ndarray]], n_boot: int, seed: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, np.ndarray]], dict[str, int]]:
    """WRG and NTS of every student at the point (mean over its seeds) and in each hierarchical bootstrap replicate,
    on the same draws for every model (rewardsmith.evaluate.transfer.SlotAccuracies: one seed draw, one pair draw
    per slot), so contrasts between models stay paired over seeds and pairs. Returns (point[model][key],
    reps[model][key] (n_boot,), pairs[key]: the pairs resampled), key "wrg", "aog.<T>" or "nts.<T>"."""
    splits = [ID_SPLIT, *sorted(s for s in correct[TEACHER] if s != ID_SPLIT)]
    acc = SlotAccuracies(correct, splits, n_boot, seed)
    t_point = {s: float(acc.point[TEACHER][s][0]) for s in splits}
    pairs = {"wrg": acc.n_units[ID_SPLIT]}
    for target in splits[1:]:
        pairs[f"aog.{target}"] = acc.n_units[target]
        pairs[f"nts.{target}"] = min(acc.n_units[target], acc.n_units[ID_SPLIT])
    point: dict[str, dict[str, float]] = {}
    reps: dict[str, dict[str, np.ndarray]] = {}
    for model in correct:
        if model == TEACHER:
            continue
        slots = acc.slots(model)
        s_id, s_id_r = acc.point[model][ID_SPLIT], acc.reps[model][ID_SPLIT][:, :slots]
        t_id_r = acc.reps[TEACHER][ID_SPLIT][:, :slots]  # the one-seed teacher fills every slot
        point[model] = {"wrg": float(np.mean(weak_to_strong_gain(s_id, t_point[ID_SPLIT])))}
        reps[model] = {"wrg": np.asarray(weak_to_strong_gain(s_id_r, t_id_r)).mean(axis=1)}
        for target in splits[1:]:
            s_t, s_t_r = acc.point[model][target], acc.reps[model][target][:, :slots]
            t_t_r = acc.reps[TEACHER][target][:, :slots]
            point[model][f"aog.{target}"] = float(np.mean(ood_gain(s_t, t_point[target])))
            reps[model][f"aog.{target}"] = np.asarray(ood_gain(s_t_r, t_t_r)).mean(axis=1)
            point[model][f"nts.{target}"] = float(
                np.mean(net_transfer_score(s_t, t_point[target], s_id, t_point[ID_SPLIT]))
            )
            reps[model][f"nts.{target}"] = np.asarray(net_transfer_score(s_t_r, t_t_r, s_id_r, t_id_r)).mean(axis=1)
    return point, reps, pairs


def _record(interval: Interval) -> dict[str, Any]:
    """An interval as the claim statistics hold it: {"value", "ci"} (NaN as None)."""
    return {"value": json_float(interval.estimate), "ci": interval.ci}


def claim_statistics(
    config: Any,
    correct: Mapping[str, Mapping[str, np.ndarray]],
    selection: Sequence[Mapping[str, Any]],
    n_boot: int,
    confidence: float,
) -> dict[str, Any]:
    """The paired contrasts the paper's claims are judged on (rewardsmith.w2s.claims), per target, each with its
    95% hierarchical bootstrap CI on one set of draws:

    - `gain_lost`: WRG - AOG(T) of the naive student (claim a);
    - `anchor_vs_best_other`: NTS(ANCHOR at the validation strength) - max over naive, confidence, SEAM of NTS (b);
    - `trade_off`: min(NTS(l*) - NTS(naive), NTS(l*) - NTS(l_max)) and `too_strong`: WRG(l_max) - WRG(naive) (c),
      with two or more last-layer anchor strengths;
    - `last_minus_middle`: NTS(last layer, l*) - NTS(depth-0.5 layer, l*) when a middle-layer method at l* ran (d).

    selection: anchor_selection(...) (the validation choices). Returns {name: {scope: {"value", "ci"}}} plus
    `anchor` (the method judged, its weight) and `anchor_grid` (the last-layer strengths and l_max)."""
    if NAIVE not in correct:
        return {}
    point, reps, pairs = _draws(correct, n_boot, 0)

    def contrast(key: str, point: float, reps: np.ndarray) -> dict[str, Any]:
        """A contrast of the draws on `key`'s pairs, as {"value", "ci"}."""
        return _record(replicate_interval(point, reps, pairs[key], confidence))

    targets = [k.removeprefix("nts.") for k in point[NAIVE] if k.startswith("nts.")]
    methods = {m.name: m for m in config.methods if m.name in point}
    out: dict[str, Any] = {
        "gain_lost": {
            t: contrast(
                f"nts.{t}", point[NAIVE]["wrg"] - point[NAIVE][f"aog.{t}"], reps[NAIVE]["wrg"] - reps[NAIVE][f"aog.{t}"]
            )
            for t in targets
        }
    }
    last = next((s for s in selection if s["layers"] == [1.0]), None)
    if last is None:
        return out
    chosen = last["chosen"]
    out["anchor"] = {"method": chosen, "weight": last["weight"]}
    others = [n for n, m in methods.items() if m.objective != "anchor" and _is_paper_method(m)]
    if others:
        out["anchor_vs_best_other"] = {"others": others}
        for t in targets:
            key = f"nts.{t}"
            best_point = max(point[n][key] for n in others)
            best_reps = np.max(np.stack([reps[n][key] for n in others]), axis=0)
            out["anchor_vs_best_other"][t] = contrast(
                key, point[chosen][key] - best_point, reps[chosen][key] - best_reps
            )
    grid = sorted(
        (m.anchor.weight, n)
        for n, m in methods.items()
        if m.objective == "anchor" and list(m.anchor.layers) == [1.0] and m.anchor.normalise
    )
    if len(grid) >= 2:
        strongest = grid[-1][1]
        out["anchor_grid"] = {"weights": [w for w, _ in grid], "strongest": strongest}
        out["too_strong"] = {
            ID_SPLIT: contrast(
                "wrg", point[strongest]["wrg"] - point[NAIVE]["wrg"], reps[strongest]["wrg"] - reps[NAIVE]["wrg"]
            )
        }
        out["trade_off"] = {}
        for t in targets:
            key = f"nts.{t}"
            p = min(point[chosen][key] - point[NAIVE][key], point[chosen][key] - point[strongest][key])
            r = np.minimum(reps[chosen][key] - reps[NAIVE][key], reps[chosen][key] - reps[strongest][key])
            out["trade_off"][t] = contrast(key, p, r)
    middle = next(
        (
            n
            for n, m in methods.items()
            if m.objective == "anchor"
            and list(m.anchor.layers) == [0.5]
            and m.anchor.normalise
            and m.anchor.weight == last["weight"]
        ),
        None,
    )
    if middle is not None:
        out["last_minus_middle"] = {
            "middle": middle,
            **{
                t: contrast(
                    f"nts.{t}",
                    point[chosen][f"nts.{t}"] - point[middle][f"nts.{t}"],
                    reps[chosen][f"nts.{t}"] - reps[middle][f"nts.{t}"],
                )
                for t in targets
            },
        }
    return out


def compute_metrics(
    config: Any,
    eval_pairs: Mapping[str, Sequence[PreferencePair]],
    teacher_labels: np.ndarray,
    margins: Margins,
    label_stats: Mapping[str, Any] | None = None,
    val_margins: Margins | None = None,
) -> dict[str, Any]:
    """metrics.json content of a shift run (see the module docstring)."""
    ev = config.eval
    ceiling = CEILING if CEILING in margins else None
    lengths = {split: response_lengths(pairs) for split, pairs in eval_pairs.items()}
    correct = correctness(margins)
    kwargs: dict[str, Any] = {"n_boot": ev.n_boot, "confidence": ev.confidence, "seed": 0}
    methods = transfer_metrics(correct, TEACHER, ceiling, id_split=ID_SPLIT, **kwargs)
    controlled = transfer_metrics(correct, TEACHER, ceiling, id_split=ID_SPLIT, lengths=lengths, **kwargs)

    gap: dict[str, Any] = {}
    if ceiling is not None:
        c = methods[CEILING]
        gap[ID_SPLIT] = {"value": c["wrg"], "ci": c["wrg_ci"]}
        for split in eval_pairs:
            if split != ID_SPLIT:
                gap[split] = {"value": c[f"aog.{split}"], "ci": c[f"aog.{split}_ci"]}

    students = {m: c for m, c in correct.items() if m != TEACHER}
    vs_naive, vs_naive_lc = {}, {}
    if NAIVE in students:
        # Per split only: targets can reward opposite behaviour (rm-bench safety-refuse and safety-response), so
        # a mean over targets would let them cancel.
        vs_naive = paired_differences(students, NAIVE, **kwargs)
        vs_naive_lc = paired_differences(students, NAIVE, lengths=lengths, **kwargs)

    length_rule = {}
    for split, (cl, rl) in lengths.items():
        est = length_rule_accuracy(cl, rl, n_boot=ev.n_boot)
        length_rule[split] = {"value": json_float(est.estimate), "ci": est.ci}
    prefers_longer = {
        model: {
            split: json_float(
                float(
                    np.mean(
                        [prefers_longer_rate(m[split], *lengths[split], n_boot=0).estimate for m in by_seed.values()]
                    )
                )
            )
            for split in lengths
        }
        for model, by_seed in margins.items()
    }
    validation = validation_summary(val_margins or {})
    selection = anchor_selection(config, validation) if validation else []
    return {
        "name": config.name,
        "source": config.source.label,
        "targets": [s for s in eval_pairs if s != ID_SPLIT],
        "near_domain_targets": [t for t in config.near_domain if t in eval_pairs],
        "validation": validation,
        "anchor_selection": selection,
        "claim_statistics": claim_statistics(config, correct, selection, ev.n_boot, ev.confidence),
        "seeds": list(config.seeds),
        "teacher_id_acc": methods[TEACHER]["id_acc"],
        "teacher_id_acc_ci": methods[TEACHER]["id_acc_ci"],
        "ceiling_id_acc": methods[CEILING]["id_acc"] if ceiling else None,
        "ceiling_id_acc_ci": methods[CEILING]["id_acc_ci"] if ceiling else None,
        "gap_ceiling_minus_teacher": gap,
        "teacher_labels": {**teacher_label_stats(teacher_labels), **dict(label_stats or {})},
        "methods": methods,
        "length_controlled": controlled,
        "vs_naive": vs_naive,
        "vs_naive_length_controlled": vs_naive_lc,
        "length_rule": length_rule,
        "prefers_longer_rate": prefers_longer,
        "method_settings": {
            m.name: {
                "objective": m.objective,
                "refiner": m.refiner,
                **({"anchor": m.anchor} if m.objective == "anchor" else {}),
                **({"confidence": m.confidence} if m.objective == "confidence" else {}),
                **({"seam": m.seam} if m.refiner == "seam" else {}),
            }
            for m in config.methods
        },
    }
