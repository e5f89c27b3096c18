"""The reports of `rewardsmith train` and `rewardsmith eval`: the accuracy table (accuracy, length rule,
length-controlled accuracy with CIs, preference for the longer response, ECE), the training-loss curve and a
reliability diagram per evaluated set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.plots import Series, plot_grouped_bars, plot_lines_with_ci, plot_reliability_diagram
from rewardsmith.report.render import Figure, Report, markdown_table, with_interval, write_report

INTRO = (
    "Accuracies in % with 95% bootstrap CIs over pairs. The length rule (the longer response wins) and the "
    "length-controlled accuracy (mean of the accuracies on pairs whose preferred response is longer and "
    "shorter) stand beside every accuracy: small reward models often learn length. corr(reward, length) is the "
    "Spearman correlation between the reward and the response's length over every response of the set."
)


def eval_rows(eval_results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per evaluated set, every cell a formatted string (one decimal for %, three for ECE)."""
    rows = []
    for name, b in eval_results.items():
        if not b.get("n"):
            continue
        row = {
            "dataset": name,
            "n": str(b["n"]),
            "accuracy": with_interval(b.get("accuracy"), b.get("accuracy_ci"), 1),
            "length rule": with_interval(b.get("length_rule_accuracy"), None, 1),
            "length-controlled": with_interval(
                b.get("length_controlled_accuracy"), b.get("length_controlled_accuracy_ci"), 1
            ),
            "prefers longer %": with_interval(b.get("prefers_longer_rate"), None, 1),
            "corr(reward, length)": with_interval(b.get("length_correlation"), b.get("length_correlation_ci"), 2),
            "ECE": with_interval(b.get("ece"), None, 3),
        }
        if "rmbench" in b:
            rb = b["rmbench"]
            row["RM-Bench easy/normal/hard"] = f"{rb['easy']:.1f} / {rb['normal']:.1f} / {rb['hard']:.1f}"
        rows.append(row)
    return rows


def _reliability_figures(eval_results: Mapping[str, Any], folder: RunFolder) -> list[Figure]:
    figures = []
    for name, block in eval_results.items():
        curve = block.get("reliability")
        if not curve:
            continue
        slug = "".join(c if c.isalnum() else "_" for c in name).strip("_")
        path = plot_reliability_diagram(
            curve["confidence"],
            curve["accuracy"],
            curve["counts"],
            folder.path / "plots" / f"reliability_{slug}.png",
            edges=curve["edges"],
            title=name,
            ece=block.get("ece"),
        )
        figures.append(
            Figure(
                path,
                f"Reliability of p = sigmoid(margin) on {name}: accuracy against confidence "
                "(top-label, 10 bins), bin counts below",
            )
        )
    return figures


def _length_figure(eval_results: Mapping[str, Any], folder: RunFolder) -> Figure | None:
    sets = [name for name, b in eval_results.items() if b.get("n")]
    if not sets:
        return None

    def series(label: str, key: str, with_ci: bool = True) -> Series:
        values = [eval_results[s].get(key) for s in sets]
        cis = [eval_results[s].get(f"{key}_ci") or [None, None] for s in sets] if with_ci else None
        return Series(label, sets, values, [c[0] for c in cis] if cis else None, [c[1] for c in cis] if cis else None)

    groups = [s.replace(" (held-out)", "\n(held-out)").replace("/", "/\n", 1) for s in sets]
    path = plot_grouped_bars(
        groups,
        [
            series("accuracy", "accuracy"),
            series("length rule (longer wins)", "length_rule_accuracy", False),
            series("length-controlled accuracy", "length_controlled_accuracy"),
        ],
        folder.path / "plots" / "accuracy_and_length.png",
        ylabel="accuracy (%)",
        title="accuracy beside what length alone explains",
        reference=50.0,
    )
    return Figure(
        path, "Accuracy, the length rule and the length-controlled accuracy per evaluated set (%, 95% CIs over pairs)"
    )


def train_report(metrics: Mapping[str, Any], folder: RunFolder) -> None:
    t = metrics["train"]
    report = Report(
        f"rewardsmith train: {folder.path.name}",
        f"Trained on {t['pairs']} pairs of `{t['dataset']}` for {t['steps']} steps "
        f"({t['pairs_per_s']} pairs/s). {INTRO}",
    )
    rows = eval_rows(metrics["eval"])
    accuracy = [markdown_table(rows) if rows else "No held-out pairs were scored."]
    accuracy += [w.removeprefix("warning: ") for w in metrics.get("warnings", [])]  # why a held-out part is empty
    report.add("Accuracy", "\n\n".join(accuracy))
    length = _length_figure(metrics["eval"], folder)
    if length is not None:
        report.figures.append(length)
    curve = t.get("curve") or {}
    if curve.get("step"):
        path = plot_lines_with_ci(
            [Series("training loss", curve["step"], curve["loss"])],
            folder.path / "plots" / "training_loss.png",
            xlabel="optimiser step",
            ylabel="loss (nats per pair)",
            title="training loss",
        )
        report.figures.append(Figure(path, "Training loss per optimiser step"))
    report.figures += _reliability_figures(metrics["eval"], folder)
    write_report(report, folder.path, folder.write_text)


def shift_rows(shift: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per shift target: its accuracy and length-controlled accuracy minus the ID test's, with CIs."""
    return [
        {
            "target": name,
            "accuracy: target - ID": with_interval(t["ood_minus_id"], t["ood_minus_id_ci"], 1),
            "length-controlled: target - ID": with_interval(
                t["length_controlled_ood_minus_id"], t["length_controlled_ood_minus_id_ci"], 1
            ),
            "pairs dropped (seen in the source's training pools)": str(shift["overlap_removed"].get(name, 0)),
        }
        for name, t in shift["targets"].items()
    ]


def eval_report(metrics: Mapping[str, Any], folder: RunFolder) -> None:
    report = Report(f"rewardsmith eval: {metrics['model']}", INTRO)
    report.add("Accuracy", markdown_table(eval_rows(metrics["eval"])))
    if metrics.get("shift"):
        shift = metrics["shift"]
        report.add(
            "Under preference shift",
            f"The source's ID test split and each target of `{shift['config']}`, split as `rewardsmith shift` "
            f"splits them; each target's accuracy minus the accuracy on {shift['id']} (percentage points, 95% "
            "bootstrap CIs, the two sets resampled on their own).\n\n" + markdown_table(shift_rows(shift)),
        )
    doubts = doubt_rows(metrics["eval"])
    if doubts:
        report.add(
            "Is the model's doubt worth anything?",
            "Accuracy (%) of the pairs the model doubts least, keeping 50, 80 and 100% of them, and the AUROC of its "
            "doubt for telling its errors from its right answers (0.5: the doubt says nothing); 95% bootstrap CIs "
            "over pairs. The doubt is -|margin| for one model and the members' sd of the margin for an ensemble.\n\n"
            + markdown_table(doubts),
        )
    length = _length_figure(metrics["eval"], folder)
    report.figures += [length] if length is not None else []
    report.figures += _reliability_figures(metrics["eval"], folder)
    write_report(report, folder.path, folder.write_text)


def doubt_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per evaluated set with a doubt block: its kind, selective accuracies and error AUROC with CIs."""
    rows = []
    for name, block in results.items():
        d = block.get("doubt") if isinstance(block, Mapping) else None
        if not d:
            continue
        row: dict[str, Any] = {"set": name, "doubt": d["kind"]}
        for coverage, label in (("0.5", "50%"), ("0.8", "80%"), ("1", "100%")):
            sel = d["selective"].get(coverage)
            if sel:
                row[f"accuracy at {label}"] = with_interval(sel["accuracy"], sel["ci"], 1)
        row["error AUROC"] = with_interval(d["error_auroc"], d["error_auroc_ci"], 3)
        rows.append(row)
    return rows
