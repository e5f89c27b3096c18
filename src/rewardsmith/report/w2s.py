"""The report of a shift run: the teacher-to-ceiling gap first, then the transfer tables (accuracy, WRG /
NTS, AOG, PGR), the same on length-controlled accuracy, each method's difference to naive with its
significance, the length rule, and ID-versus-OOD plots and anchor-weight sweeps."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.plots import Series, plot_id_vs_ood, plot_lines_with_ci
from rewardsmith.report.render import Figure, Report, decimals_for, markdown_table, with_interval, write_report

TEACHER, CEILING, NAIVE, ID_SPLIT = "teacher", "ceiling", "naive", "id"


def _cell(rec: Mapping[str, Any], key: str, decimals: int) -> str:
    if key not in rec:
        return ""
    text = with_interval(rec[key], rec.get(f"{key}_ci"), decimals)
    if rec.get(f"{key}_undefined"):
        return "undefined (no gap)"
    std = rec.get(f"{key}_seed_std")
    if isinstance(std, float) and math.isfinite(std):
        text += f" ±{std:.{decimals}f}"
    return text


def transfer_table(
    records: Mapping[str, Mapping[str, Any]], columns: list[tuple[str, str]], order: list[str], digits: int = 1
) -> str:
    """Rows = models in `order`, columns = (header, key); one number of decimals for the whole table."""
    values = [records[m].get(k) for m in order if m in records for _, k in columns]
    decimals = decimals_for(values, digits)
    rows = [{"model": m, **{h: _cell(records[m], k, decimals) for h, k in columns}} for m in order if m in records]
    return markdown_table(rows, ["model", *[h for h, _ in columns]])


def _difference_table(diffs: Mapping[str, Mapping[str, Any]], splits: list[str], order: list[str]) -> str:
    rows = []
    for m in order:
        if m not in diffs:
            continue
        row = {"model": m}
        for split in splits:
            cell = with_interval(diffs[m].get(f"d.{split}"), diffs[m].get(f"d.{split}_ci"), 1)
            row[split] = cell + (" *" if diffs[m].get(f"significant.{split}") else "")
        rows.append(row)
    return markdown_table(rows, ["model", *splits])


def _sweep_figures(config: Any, metrics: Mapping[str, Any], folder: RunFolder) -> list[Figure]:
    """Anchor-weight sweeps: accuracy and NTS against log10 weight for anchor methods sharing their layers."""
    groups: dict[tuple[float, ...], list[Any]] = {}
    methods = metrics["methods"]
    for m in config.methods:
        if m.objective == "anchor" and m.anchor.weight > 0 and m.name in methods:
            groups.setdefault((*m.anchor.layers, float(m.anchor.normalise)), []).append(m)
    figures: list[Figure] = []
    for key, group in groups.items():
        if len({m.anchor.weight for m in group}) < 2:
            continue
        group = sorted(group, key=lambda m: m.anchor.weight)
        x = [math.log10(m.anchor.weight) for m in group]
        layers = list(key[:-1])

        def series(label: str, k: str, group: list[Any] = group, x: list[float] = x) -> Series:
            cis = [methods[m.name].get(f"{k}_ci") or [None, None] for m in group]
            return Series(label, x, [methods[m.name].get(k) for m in group], [c[0] for c in cis], [c[1] for c in cis])

        suffix = "-".join(str(v) for v in layers) + ("-normalised" if key[-1] else "")
        acc = [series("ID accuracy", "id_acc"), *[series(f"OOD {t}", f"ood_acc.{t}") for t in metrics["targets"]]]
        path = plot_lines_with_ci(
            acc,
            folder.path / "plots" / f"anchor_sweep_accuracy_{suffix}.png",
            xlabel="log10 anchor weight",
            ylabel="accuracy (%)",
            title=f"anchor weight sweep (depths {layers}; dashed: naive ID)",
            reference=methods.get(NAIVE, {}).get("id_acc"),
        )
        figures.append(Figure(path, f"Anchor weight sweep at depths {layers}: accuracy (%) with 95% CIs"))
        nts = [series(f"NTS {t}", f"nts.{t}") for t in metrics["targets"]]
        path = plot_lines_with_ci(
            nts,
            folder.path / "plots" / f"anchor_sweep_nts_{suffix}.png",
            xlabel="log10 anchor weight",
            ylabel="NTS (points)",
            title="NTS against the anchor weight",
            reference=0.0,
        )
        figures.append(Figure(path, f"Anchor weight sweep at depths {layers}: NTS per target (points)"))
    return figures


def shift_report(config: Any, metrics: Mapping[str, Any], folder: RunFolder, title: str | None = None) -> None:
    """report.md / report.html of a shift run: shift_sections plus the ID-versus-OOD and sweep plots."""
    report = shift_sections(config, metrics, title)
    methods, targets = metrics["methods"], metrics["targets"]
    order = [TEACHER, *[m.name for m in config.methods], CEILING]
    for target in targets:
        labels = [m for m in order if m in methods]
        path = plot_id_vs_ood(
            labels,
            [methods[m]["id_acc"] for m in labels],
            [methods[m].get(f"ood_acc.{target}") for m in labels],
            folder.path / "plots" / f"id_vs_ood_{target.replace('/', '_').replace(':', '_')}.png",
            id_ci=[methods[m]["id_acc_ci"] for m in labels],
            ood_ci=[methods[m].get(f"ood_acc.{target}_ci") for m in labels],
            title=f"ID vs OOD: {target}",
            ylabel=f"accuracy on {target} (%)",
        )
        report.figures.append(Figure(path, f"ID against OOD accuracy on {target} (%, 95% CIs)"))
    report.figures += _sweep_figures(config, metrics, folder)
    write_report(report, folder.path, folder.write_text)


def shift_sections(config: Any, metrics: Mapping[str, Any], title: str | None = None) -> Report:
    """The text and tables of a shift run's report (no figures): what report.md shows and what the docs'
    generated result blocks show, from metrics.json alone."""
    methods = metrics["methods"]
    targets = metrics["targets"]
    order = [TEACHER, *[m.name for m in config.methods], CEILING]
    sizes = metrics.get("sizes", {})
    report = Report(title or f"Weak-to-strong under preference shift: {config.name}")
    near = set(metrics.get("near_domain_targets", []))
    named = ", ".join(f"`{t}`" + (" (near-domain: a sibling of the source)" if t in near else "") for t in targets)
    report.intro = (
        f"Source `{metrics['source']}`; targets {named}. Student seeds "
        f"{metrics['seeds']}. Accuracies are means over seeds; `[a, b]` is a 95% hierarchical bootstrap CI "
        "(seeds, then pairs within seed); `±s` the standard deviation over seeds. Sizes: "
        + ", ".join(f"{k} {v}" for k, v in sizes.items())
        + "."
    )
    removed = {k: v for k, v in metrics.get("target_overlap_removed", {}).items() if v}
    if removed:
        report.intro += (
            " Target pairs sharing a conversation with training were removed: "
            + ", ".join(f"{k} {v}" for k, v in removed.items())
            + "."
        )
    gap = metrics.get("gap_ceiling_minus_teacher", {})
    if gap:
        rows = [{"split": s, "gap (points)": with_interval(g["value"], g["ci"], 1)} for s, g in gap.items()]
        report.add("Ceiling minus teacher (the gap a student can recover)", markdown_table(rows))
    tl = metrics["teacher_labels"]
    text = (
        f"Teacher kind `{tl.get('kind', 'model')}`. Its soft labels side with gold on "
        f"{tl['accuracy_on_w2s_pool']:.1f}% of the W2S pool; mean confidence {tl['mean_confidence']:.3f}; "
        f"median |logit q| {tl['median_abs_margin']:.3f}; ECE against gold "
        f"{with_interval(tl.get('ece'), None, 3)}."
    )
    if "temperature" in tl:
        raw = tl.get("raw_label_stats", {})
        text += (
            f" The labels are sigmoid(margin / T) with T = {tl['temperature']:.3g}, fitted by cross-fitting on "
            f"the gold pool (out-of-fold accuracy {tl['gold_out_of_fold_accuracy']:.1f}%, ECE "
            f"{tl['gold_out_of_fold_ece_raw']:.3f} before and {tl['gold_out_of_fold_ece_calibrated']:.3f} after); "
            f"before calibration their mean confidence was {raw.get('mean_confidence', float('nan')):.3f} and "
            f"their ECE {raw.get('ece', float('nan')):.3f}."
        )
    report.add("Teacher labels on the W2S pool", text)
    acc_cols = [("ID", "id_acc"), *[(t, f"ood_acc.{t}") for t in targets]]
    report.add("Transfer table: accuracy (%)", transfer_table(methods, acc_cols, order))
    report.add(
        "WRG and NTS (points)",
        transfer_table(methods, [("WRG", "wrg"), *[(f"NTS {t}", f"nts.{t}") for t in targets]], order),
    )
    report.add("AOG (points)", transfer_table(methods, [(f"AOG {t}", f"aog.{t}") for t in targets], order))
    if CEILING in methods:
        pgr_cols = [("PGR ID", "pgr.id"), *[(f"PGR {t}", f"pgr.{t}") for t in targets]]
        report.add(
            "PGR (fraction of the teacher-to-ceiling gap)",
            "Undefined unless the ceiling beats the teacher by at least 2 points.\n\n"
            + transfer_table(methods, pgr_cols, order, digits=2),
        )
    lc = metrics["length_controlled"]
    report.add("Length-controlled accuracy (%)", transfer_table(lc, acc_cols, order))
    report.add(
        "Length-controlled WRG and NTS (points)",
        transfer_table(lc, [("WRG", "wrg"), *[(f"NTS {t}", f"nts.{t}") for t in targets]], order),
    )
    splits = [ID_SPLIT, *targets]
    if metrics.get("vs_naive"):
        report.add(
            "Difference to naive (points; * = CI excludes 0)", _difference_table(metrics["vs_naive"], splits, order)
        )
        report.add(
            "Difference to naive, length-controlled (points; * = CI excludes 0)",
            _difference_table(metrics["vs_naive_length_controlled"], splits, order),
        )
    if metrics.get("validation"):
        rows = [
            {
                "model": m,
                "validation accuracy %": with_interval(v["accuracy"], None, 1),
                "per seed": ", ".join(f"{x:.1f}" for x in v["per_seed"]),
            }
            for m, v in metrics["validation"].items()
        ]
        text = markdown_table(rows)
        for sel in metrics.get("anchor_selection", []):
            text += (
                f"\n\nAnchor weight chosen on validation (depths {sel['layers']}, normalised "
                f"{'yes' if sel['normalise'] else 'no'}): `{sel['chosen']}` (weight {sel['weight']:g})."
            )
        report.add("Validation split (for choosing settings only; not a result)", text)
    rule = [{"split": s, "accuracy": with_interval(r["value"], r["ci"], 1)} for s, r in metrics["length_rule"].items()]
    report.add("Length rule (the longer response wins), % of pairs", markdown_table(rule))
    return report
