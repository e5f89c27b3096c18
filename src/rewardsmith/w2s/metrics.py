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
    json_float,
    length_rule_accuracy,
    pairwise_correct,
    prefers_longer_rate,
)
from rewardsmith.evaluate.transfer import paired_differences, transfer_metrics

ID_SPLIT = "id"
VAL_SPLIT = "val"
TEACHER = "teacher"
CEILING = "ceiling"
NAIVE = "naive"

# margins[model][seed][split] -> (N_split,) margins r(chosen) - r(rejected); the teacher's seed is -1.
Margins = Mapping[str, Mapping[int, Mapping[str, np.ndarray]]]


def response_lengths(pairs: Sequence[PreferencePair]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([len(p.chosen) for p in pairs], dtype=np.float64),
            np.array([len(p.rejected) for p in pairs], dtype=np.float64))


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
    return {"accuracy_on_w2s_pool": float(np.mean(q > 0.5) * 100.0), "mean": float(q.mean()),
            "mean_confidence": float(np.mean(np.maximum(q, 1.0 - q))),
            "median_abs_margin": float(np.median(np.abs(margin))),
            "ece": json_float(expected_calibration_error(q))}


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
        out.append({"layers": list(layers), "normalise": normalise, "chosen": best,
                    "weight": next(m.anchor.weight for m in members if m.name == best),
                    "by": "mean validation accuracy over seeds", "candidates": scores})
    return out


def compute_metrics(config: Any, eval_pairs: Mapping[str, Sequence[PreferencePair]], teacher_labels: np.ndarray,
                    margins: Margins, label_stats: Mapping[str, Any] | None = None,
                    val_margins: Margins | None = None) -> dict[str, Any]:
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
        targets = {"targets": [s for s in eval_pairs if s != ID_SPLIT]}  # also the mean over targets
        vs_naive = paired_differences(students, NAIVE, means=targets, **kwargs)
        vs_naive_lc = paired_differences(students, NAIVE, lengths=lengths, means=targets, **kwargs)

    length_rule = {}
    for split, (cl, rl) in lengths.items():
        est = length_rule_accuracy(cl, rl, n_boot=ev.n_boot)
        length_rule[split] = {"value": json_float(est.value), "ci": est.ci}
    prefers_longer = {model: {split: json_float(float(np.mean([prefers_longer_rate(m[split], *lengths[split],
                                                                                   n_boot=0).value
                                                                for m in by_seed.values()])))
                              for split in lengths}
                      for model, by_seed in margins.items()}
    validation = validation_summary(val_margins or {})
    return {
        "name": config.name,
        "source": config.source.label,
        "targets": [s for s in eval_pairs if s != ID_SPLIT],
        "near_domain_targets": [t for t in config.near_domain if t in eval_pairs],
        "validation": validation,
        "anchor_selection": anchor_selection(config, validation) if validation else [],
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
        "method_settings": {m.name: {"objective": m.objective, "refiner": m.refiner,
                                     **({"anchor": m.anchor} if m.objective == "anchor" else {}),
                                     **({"confidence": m.confidence} if m.objective == "confidence" else {}),
                                     **({"seam": m.seam} if m.refiner == "seam" else {})}
                            for m in config.methods},
    }
