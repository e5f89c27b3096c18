"""metrics.json and report.md/html for a shift run. The numbers come from rewardsmith.evaluate (accuracy,
WRG, AOG, NTS, PGR with paired bootstrap CIs, seed aggregation); this module arranges them.

Seeds. For each model the per-pair correctness is averaged over student seeds before the bootstrap, so a
reported accuracy is the mean over seeds and its CI resamples pairs (shared by all models, so method
differences are paired). The spread over seeds is reported beside it as `<key>_seed_std`.

Length control. The length-controlled accuracy is the mean of the accuracy on pairs whose chosen
response is longer and on pairs whose chosen response is shorter (equal lengths dropped). Weighting each
pair's correctness by 0.5 * n / n_group turns it into a plain mean, so the same transfer metrics
(WRG/AOG/NTS/PGR with CIs) are computed on it under `length_controlled`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.evaluate.metrics import json_float, length_rule_accuracy, pairwise_correct, prefers_longer_rate
from rewardsmith.evaluate.transfer import aggregate_transfer_seeds, transfer_metrics
from rewardsmith.report.plots import Series, plot_id_vs_ood, plot_lines_with_ci
from rewardsmith.report.render import fold_intervals, markdown_table, markdown_to_html

ID_SPLIT = "id"
TEACHER = "teacher"
CEILING = "ceiling"
NAIVE = "naive"


def _lengths(pairs: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([len(p.chosen) for p in pairs], dtype=np.float64),
        np.array([len(p.rejected) for p in pairs], dtype=np.float64),
    )


def length_control_weights(chosen_len: np.ndarray, rejected_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keep (N,) bool, weights (n_keep,)) so that mean(weights * correct[keep]) is the length-controlled
    accuracy (mean of the chosen-longer and chosen-shorter group accuracies)."""
    longer, shorter = chosen_len > rejected_len, chosen_len < rejected_len
    keep = longer | shorter
    n_keep, n_long, n_short = int(keep.sum()), int(longer.sum()), int(shorter.sum())
    if n_long == 0 or n_short == 0:
        return keep, np.ones(n_keep)
    w = np.where(longer, 0.5 * n_keep / n_long, 0.5 * n_keep / n_short)
    return keep, w[keep]


def _seed_average(
    margins: Mapping[str, Mapping[int, Mapping[str, np.ndarray]]],
) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {}
    for model, by_seed in margins.items():
        splits = next(iter(by_seed.values())).keys()
        out[model] = {s: np.mean([pairwise_correct(m[s]) for m in by_seed.values()], axis=0) for s in splits}
    return out


def _add_seed_spread(
    records: dict[str, dict[str, Any]],
    margins: Mapping[str, Mapping[int, Mapping[str, np.ndarray]]],
    transform: Any,
    kwargs: dict[str, Any],
) -> None:
    seeds = sorted({s for m, by in margins.items() if m != TEACHER for s in by})
    if len(seeds) < 2:
        return
    teacher = next(iter(margins[TEACHER].values()))
    per_seed = []
    for seed in seeds:
        correct = {TEACHER: transform({s: pairwise_correct(v) for s, v in teacher.items()})}
        for model, by_seed in margins.items():
            if model != TEACHER and seed in by_seed:
                correct[model] = transform({s: pairwise_correct(v) for s, v in by_seed[seed].items()})
        per_seed.append(transfer_metrics(correct, **{**kwargs, "n_boot": 2}))
    agg = aggregate_transfer_seeds(per_seed)
    for model, rec in records.items():
        if model not in agg or model == TEACHER:
            continue
        rec["n_seeds"] = agg[model]["n_seeds"]
        for key in list(rec):
            if f"{key}_std" in agg[model] and not key.endswith("_ci"):
                rec[f"{key}_seed_std"] = agg[model][f"{key}_std"]


def compute_metrics(
    config: Any,
    data: Any,
    teacher_labels: np.ndarray,
    margins: Mapping[str, Mapping[int, Mapping[str, np.ndarray]]],
    label_stats: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """metrics.json content. margins: model -> seed -> split -> (N_split,) margins (teacher under seed -1)."""
    ev = config.eval
    ceiling = CEILING if CEILING in margins else None
    kwargs = {
        "teacher": TEACHER,
        "ceiling": ceiling,
        "id_split": ID_SPLIT,
        "confidence": ev.confidence,
        "seed": 0,
    }
    identity = lambda c: c  # noqa: E731
    correct = _seed_average(margins)
    methods = transfer_metrics(correct, n_boot=ev.n_boot, **kwargs)
    _add_seed_spread(methods, margins, identity, kwargs)

    lengths = {split: _lengths(pairs) for split, pairs in data.eval.items()}
    weights = {split: length_control_weights(*lengths[split]) for split in lengths}

    def controlled(by_split: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {s: c[weights[s][0]] * weights[s][1] for s, c in by_split.items()}

    lc = transfer_metrics({m: controlled(c) for m, c in correct.items()}, n_boot=ev.n_boot, **kwargs)
    _add_seed_spread(lc, margins, controlled, kwargs)

    gap: dict[str, Any] = {}
    if ceiling is not None:
        c = methods[CEILING]
        gap[ID_SPLIT] = {"value": c["wrg"], "ci": c["wrg_ci"]}
        for split in data.eval:
            if split != ID_SPLIT:
                gap[split] = {"value": c[f"aog.{split}"], "ci": c[f"aog.{split}_ci"]}

    vs_naive: dict[str, Any] = {}
    if NAIVE in correct:
        diffs = transfer_metrics(
            {m: c for m, c in correct.items() if m != TEACHER},
            teacher=NAIVE,
            ceiling=None,
            id_split=ID_SPLIT,
            n_boot=ev.n_boot,
            confidence=ev.confidence,
            seed=0,
        )
        for model, rec in diffs.items():
            if model == NAIVE:
                continue
            out = {"d_id_acc": rec["wrg"], "d_id_acc_ci": rec["wrg_ci"]}
            for split in data.eval:
                if split != ID_SPLIT:
                    out[f"d_ood_acc.{split}"] = rec[f"aog.{split}"]
                    out[f"d_ood_acc.{split}_ci"] = rec[f"aog.{split}_ci"]
            vs_naive[model] = out

    length_rule = {}
    for split, (cl, rl) in lengths.items():
        est = length_rule_accuracy(cl, rl, n_boot=ev.n_boot)
        length_rule[split] = {"value": json_float(est.value), "ci": est.ci}
    prefers_longer: dict[str, dict[str, Any]] = {}
    for model, by_seed in margins.items():
        first = by_seed[min(by_seed)]
        prefers_longer[model] = {
            split: json_float(prefers_longer_rate(first[split], *lengths[split], n_boot=0).value) for split in first
        }

    gold_agree = float(np.mean(teacher_labels > 0.5) * 100.0)
    return {
        "name": config.name,
        "source": config.source.name,
        "targets": [s for s in data.eval if s != ID_SPLIT],
        "seeds": list(config.seeds),
        "teacher_id_acc": methods[TEACHER]["id_acc"],
        "teacher_id_acc_ci": methods[TEACHER]["id_acc_ci"],
        "ceiling_id_acc": methods[CEILING]["id_acc"] if ceiling else None,
        "ceiling_id_acc_ci": methods[CEILING]["id_acc_ci"] if ceiling else None,
        "gap_ceiling_minus_teacher": gap,
        "teacher_labels": {
            "accuracy_on_w2s_pool": gold_agree,
            "mean": float(np.mean(teacher_labels)),
            "mean_confidence": float(np.mean(np.abs(teacher_labels - 0.5)) + 0.5),
            **dict(label_stats or {}),
        },
        "methods": methods,
        "length_controlled": lc,
        "vs_naive": vs_naive,
        "length_rule": length_rule,
        "prefers_longer_rate": prefers_longer,
        "method_settings": {
            m.name: {
                "objective": m.objective,
                "refiner": m.refiner,
                "anchor_weight": m.anchor_weight if m.objective == "anchor" else None,
                "anchor_layers": m.anchor_layers if m.objective == "anchor" else None,
                "confidence_form": m.confidence_form if m.objective == "confidence" else None,
            }
            for m in config.methods
        },
    }


# ----------------------------------------------------------------------------------------------------
# Report


def _cell(rec: Mapping[str, Any], key: str, digits: int = 1) -> str:
    if key not in rec:
        return ""
    sub = {key: rec[key], f"{key}_ci": rec.get(f"{key}_ci")}
    text = fold_intervals(sub, digits)[key]
    std = rec.get(f"{key}_seed_std")
    if isinstance(std, float) and math.isfinite(std):
        text += f" ±{std:.{digits if abs(std) >= 1 else digits + 2}f}"
    return text


def _table(
    records: Mapping[str, Mapping[str, Any]],
    columns: list[tuple[str, str]],
    order: list[str],
    digits: int = 1,
) -> str:
    rows = []
    for model in order:
        if model in records:
            rows.append({"model": model, **{h: _cell(records[model], k, digits) for h, k in columns}})
    return markdown_table(rows, ["model", *[h for h, _ in columns]])


def write_report(config: Any, metrics: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """report.md, report.html and plots/*.png from a shift run's metrics."""
    out = Path(out_dir)
    plots = out / "plots"
    methods = metrics["methods"]
    targets = metrics["targets"]
    order = [TEACHER, *[m.name for m in config.methods], CEILING]
    figures: list[tuple[Path, str]] = []
    for target in targets:
        labels = [m for m in order if m in methods]
        path = plot_id_vs_ood(
            labels,
            [methods[m]["id_acc"] for m in labels],
            [methods[m].get(f"ood_acc.{target}") for m in labels],
            plots / f"id_vs_ood_{target.replace('/', '_')}.png",
            id_ci=[methods[m]["id_acc_ci"] for m in labels],
            ood_ci=[methods[m].get(f"ood_acc.{target}_ci") for m in labels],
            title=f"ID vs OOD: {target}",
            ylabel=f"accuracy on {target} (%)",
        )
        figures.append((path, f"ID vs OOD accuracy on {target} (95% CIs)"))
    figures += _sweep_plots(config, metrics, plots)

    acc_cols = [("ID", "id_acc"), *[(t, f"ood_acc.{t}") for t in targets]]
    nts_cols = [("WRG", "wrg"), *[(f"NTS {t}", f"nts.{t}") for t in targets]]
    aog_cols = [(f"AOG {t}", f"aog.{t}") for t in targets]
    pgr_cols = [("PGR ID", "pgr.id"), *[(f"PGR {t}", f"pgr.{t}") for t in targets]]
    sizes = metrics.get("sizes", {})
    lines = [
        f"# Weak-to-strong under preference shift: {config.name}",
        "",
        f"Source `{config.source.name}`; targets {', '.join(f'`{t}`' for t in targets)}. "
        f"Student seeds {metrics['seeds']} (accuracies are seed means; `[a, b]` is a 95% paired bootstrap "
        f"CI over pairs; `±s` the standard deviation over seeds). Sizes: "
        + ", ".join(f"{k} {v}" for k, v in sizes.items())
        + ".",
        "",
        f"Teacher: `{config.teacher.model.backbone}`, layers {config.teacher.model.num_layers or 'all'}, "
        f"{'frozen backbone (linear probe)' if config.teacher.model.freeze_backbone else 'fine-tuned'}; "
        f"student: `{config.student.backbone}`, {config.student.max_length} tokens.",
        "",
    ]
    gap = metrics.get("gap_ceiling_minus_teacher", {})
    if gap:
        lines += [
            "## Ceiling minus teacher (the gap a student can recover)",
            "",
            markdown_table(
                [
                    {"split": s, "gap (points)": fold_intervals({"g": g["value"], "g_ci": g["ci"]})["g"]}
                    for s, g in gap.items()
                ]
            ),
            "",
        ]
    tl = metrics["teacher_labels"]
    lines += [
        f"Teacher labels on the W2S pool: {tl['accuracy_on_w2s_pool']:.1f}% on the gold side, "
        f"mean confidence {tl['mean_confidence']:.3f}.",
        "",
    ]
    lines += ["## Transfer table: accuracy (%)", "", _table(methods, acc_cols, order), ""]
    lines += ["## WRG and NTS (points)", "", _table(methods, nts_cols, order), ""]
    lines += ["## AOG (points)", "", _table(methods, aog_cols, order), ""]
    if CEILING in methods:
        lines += [
            "## PGR (fraction of the teacher-to-ceiling gap)",
            "",
            _table(methods, pgr_cols, order, 2),
            "",
        ]
    lc = metrics["length_controlled"]
    lines += [
        "## Length-controlled accuracy (%)",
        "",
        _table(lc, acc_cols, order),
        "",
        "## Length-controlled WRG and NTS (points)",
        "",
        _table(lc, nts_cols, order),
        "",
    ]
    if metrics.get("vs_naive"):
        cols = [("d ID", "d_id_acc"), *[(f"d {t}", f"d_ood_acc.{t}") for t in targets]]
        lines += [
            "## Difference to naive (points, paired bootstrap CI)",
            "",
            _table(metrics["vs_naive"], cols, [m for m in order if m in metrics["vs_naive"]]),
            "",
        ]
    rule = metrics["length_rule"]
    lines += [
        "## Length rule (longer response wins), % of pairs",
        "",
        markdown_table(
            [{"split": s, "accuracy": fold_intervals({"a": r["value"], "a_ci": r["ci"]})["a"]} for s, r in rule.items()]
        ),
        "",
    ]
    lines += ["## Figures", ""]
    for path, caption in figures:
        lines += [f"![{caption}]({path.relative_to(out)})", "", f"*{caption}*", ""]
    text = "\n".join(lines).rstrip() + "\n"
    md, html = out / "report.md", out / "report.html"
    md.write_text(text, encoding="utf-8")
    html.write_text(markdown_to_html(text, f"shift: {config.name}"), encoding="utf-8")
    return md, html


def _sweep_plots(config: Any, metrics: dict[str, Any], plots: Path) -> list[tuple[Path, str]]:
    """A lambda sweep plot when two or more anchor methods share their layers and differ in lambda."""
    groups: dict[tuple[float, ...], list[Any]] = {}
    for m in config.methods:
        if m.objective == "anchor" and m.anchor_weight > 0 and m.name in metrics["methods"]:
            groups.setdefault(tuple(m.anchor_layers), []).append(m)
    out: list[tuple[Path, str]] = []
    methods = metrics["methods"]
    for layers, group in groups.items():
        if len({m.anchor_weight for m in group}) < 2:
            continue
        group = sorted(group, key=lambda m: m.anchor_weight)
        x = [math.log10(m.anchor_weight) for m in group]
        keys = [("ID accuracy", "id_acc"), *[(f"OOD {t}", f"ood_acc.{t}") for t in metrics["targets"]]]
        series = [
            Series(
                label,
                x,
                [methods[m.name].get(k) for m in group],
                [(methods[m.name].get(f"{k}_ci") or [None, None])[0] for m in group],
                [(methods[m.name].get(f"{k}_ci") or [None, None])[1] for m in group],
            )
            for label, k in keys
        ]
        suffix = "-".join(str(v) for v in layers)
        naive = methods.get(NAIVE, {}).get("id_acc")
        path = plot_lines_with_ci(
            series,
            plots / f"lambda_sweep_layers{suffix}.png",
            xlabel="log10 lambda",
            ylabel="accuracy (%)",
            title=f"anchor weight sweep (layers {list(layers)}; dashed: naive ID)",
            reference=naive,
        )
        out.append((path, f"Lambda sweep, anchored depths {list(layers)}: accuracy against log10 lambda"))
        nts = [
            Series(
                f"NTS {t}",
                x,
                [methods[m.name].get(f"nts.{t}") for m in group],
                [(methods[m.name].get(f"nts.{t}_ci") or [None, None])[0] for m in group],
                [(methods[m.name].get(f"nts.{t}_ci") or [None, None])[1] for m in group],
            )
            for t in metrics["targets"]
        ]
        path = plot_lines_with_ci(
            nts,
            plots / f"lambda_sweep_nts_layers{suffix}.png",
            xlabel="log10 lambda",
            ylabel="NTS (points)",
            title="NTS against the anchor weight",
            reference=0.0,
        )
        out.append((path, f"Lambda sweep, anchored depths {list(layers)}: NTS per target"))
    return out
