"""The demo's pages: the steering step's report, and index.html, one page with every step's key number and one
plot, linking the four reports. Local files only (the page works offline)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.plots import plot_bars
from rewardsmith.report.render import Figure, Report, markdown_table, markdown_to_html, with_interval, write_report

HELDOUT = "hh-rlhf/harmless-base (held-out)"
HELPFUL = "hh-rlhf/helpful-base"
PEBS = "PEBS (per-rater empirical-Bayes shrinkage)"
NOT_RUN = "not run"


def helpful_note(train_eval: Mapping[str, Any]) -> str:
    """One sentence on step 1's accuracy on helpful pairs, which a harmless-trained model is not expected to lift
    above chance: HH's harmless and helpful preferences are anti-correlated, and the model's length preference
    (measured) goes against the helpful raters' (the length rule). "" when the demo did not score helpful-base."""
    block = train_eval.get(HELPFUL)
    if not block or block.get("accuracy") is None:
        return ""
    ci = block.get("accuracy_ci")
    acc = with_interval(block["accuracy"], ci, 1)
    below = ", below chance," if ci and ci[1] < 50.0 else ""
    return (
        f"On {HELPFUL} it scores {acc}%{below} as a model trained on harmless preferences may: HH's harmless and "
        "helpful preferences are anti-correlated (the harmless rater's chosen reply is often the less helpful "
        f"one), and the model prefers the longer response in {block['prefers_longer_rate']:.0f}% of these pairs, "
        f"where the longer one wins {block['length_rule_accuracy']:.1f}% of them. The number measures the shift "
        "between the two preferences, not a broken model."
    )


def calibration_gains(cal: Mapping[str, Any]) -> str:
    """PEBS's held-out RMSE gain against one pooled map and against per-rater OLS (each rater's own least-squares
    map, unshrunk), in %, with their CIs; "not run" for a comparison the demo's metrics do not hold."""

    def gain(against: str) -> str:
        value = cal.get(f"gain_vs_{against}_pct.pebs")
        return NOT_RUN if value is None else with_interval(value, cal.get(f"gain_vs_{against}_ci.pebs"), 2) + "%"

    return f"RMSE gain vs pooled {gain('pooled')}; vs per-rater OLS {gain('ols')}"


def steering_agreement(metrics: Mapping[str, Any]) -> list[tuple[str, float, list[float] | None]]:
    """(label, agreement %, its CI) of every condition of the steering step: how often a model's preference agrees
    with the standard its demonstrations show. As labelled (and with none) that is the accuracy against the pairs'
    own labels; flipped it is 100 minus it, so success reads as a high bar for both. Step 1's BT model, which takes
    no demonstrations, is scored against both standards."""

    def flip(c: Mapping[str, Any]) -> tuple[float, list[float] | None]:
        ci = c.get("accuracy_ci")
        return 100.0 - c["accuracy"], [100.0 - ci[1], 100.0 - ci[0]] if ci else None

    conds, bt = metrics["check"]["conditions"], metrics["bt"]
    out: list[tuple[str, float, list[float] | None]] = []
    for name, c in conds.items():
        value, ci = flip(c) if name == "flipped" else (c["accuracy"], c.get("accuracy_ci"))
        out.append((f"ICRM, {name}" if name != "none" else "ICRM, no demonstrations", value, ci))
    out.append(("BT, as labelled", bt["accuracy"], bt.get("accuracy_ci")))
    out.append(("BT, flipped", *flip(bt)))
    return out


def model_depth(train: Mapping[str, Any]) -> str:
    """ " (its first k of 6 layers)" when step 1's MiniLM keeps k layers (model.num_layers), else nothing."""
    layers = (train.get("config") or {}).get("model", {}).get("num_layers")
    return f" (its first {layers} of 6 layers)" if layers else ""


def stress_test_note(shift: Mapping[str, Any]) -> str:
    """One plain sentence on what the stress test at the demo's size can show: a weak-to-strong gain needs the
    strong ceiling to beat the weak teacher in domain; when its CI does not lie above 0, the sentence says so."""
    gap = shift["gap_ceiling_minus_teacher"]["id"]
    text = with_interval(gap["value"], gap["ci"], 1)
    low, high = (gap.get("ci") or [None, None])[:2]
    if low is not None and low > 0:
        return f"The ceiling beats the teacher in domain by {text} points: there is a gap for the students to recover."
    seen = (
        "falls below the teacher's"
        if high is not None and high < 0
        else "is not told apart from the teacher's (the CI covers 0)"
    )
    return (
        f"At the demo's size the ceiling's in-domain accuracy {seen}: {text} points, with "
        f"{shift['sizes']['w2s']} training pairs and one epoch against a weak probe on {shift['sizes']['gold']} "
        "gold pairs. So this step shows the protocol running, not a weak-to-strong gain (docs/w2s.md has the "
        "full-size runs)."
    )


def steer_report(metrics: Mapping[str, Any], folder: RunFolder) -> None:
    check = metrics["check"]
    rows = [
        {"model": "in-context (ICRM)", "demonstrations": name, **_acc(c)} for name, c in check["conditions"].items()
    ]
    rows.append({"model": "Bradley-Terry (step 1)", "demonstrations": "cannot take any", **_acc(metrics["bt"])})
    bars = steering_agreement(metrics)
    path = plot_bars(
        [label.replace(", ", "\n") for label, _, _ in bars],
        [v for _, v, _ in bars],
        folder.path / "plots" / "steering.png",
        ci=[ci for _, _, ci in bars],
        ylabel="agreement with the demonstrated standard (%)",
        reference=50.0,
        title=f"{check['pairs']} held-out harmless pairs, {check['n_demos']} demonstrations",
    )
    report = Report(
        "Steering with demonstrations",
        f"{check['pairs']} held-out HH-RLHF harmless pairs (step 1's held-out set) scored by an in-context "
        f"reward model with no demonstrations, with {check['n_demos']} demonstrations of the harmless "
        "standard, and with the same demonstrations flipped (the less harmless response shown as "
        "preferred). The plot shows agreement with the standard the demonstrations show (for the flipped "
        "ones, how often the model prefers the less harmless response), 95% bootstrap CIs over pairs; "
        "the dashed line is chance, and a model that follows its demonstrations is above it under both. "
        "Step 1's Bradley-Terry model takes no demonstrations, so it is scored against both standards.",
    )
    report.add("Accuracy by condition (against the pairs' own labels)", markdown_table(rows))
    report.add(
        "Agreement with the demonstrated standard",
        markdown_table([{"condition": label, "agreement %": with_interval(v, ci, 1)} for label, v, ci in bars]),
    )
    report.add(
        "Training",
        f"{metrics['icrm_train']['steps']} steps, {metrics['icrm_train']['episodes_seen']} "
        f"episodes, {metrics['icrm_train']['seconds']:.0f} s; the frozen encoder is step 1's.",
    )
    report.figures.append(
        Figure(path, "Agreement with the demonstrated standard: " + "; ".join(label for label, _, _ in bars))
    )
    write_report(report, folder.path, folder.write_text)


def _acc(block: Mapping[str, Any]) -> dict[str, str]:
    out = {"accuracy %": with_interval(block["accuracy"], block["accuracy_ci"], 1)}
    if "mean_mu" in block:
        out["mean P(chosen)"] = f"{block['mean_mu']:.3f}"
    return out


def _first(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.glob(pattern))
    return found[0] if found else None


def demo_index(results: Mapping[str, Any], folder: RunFolder, quick: bool) -> tuple[list[dict[str, str]], Path]:
    """Writes index.html; returns the console rows (one per step) and the page's path."""
    out = folder.path
    train, shift, steer, cal = (results[k] for k in ("train", "shift", "steer", "calibrate"))
    held = train["eval"][HELDOUT]
    sizes = "quick sizes: every number is a smoke test's" if quick else "sizes are a demo's: CIs are wide"
    lines = [
        "# rewardsmith demo",
        "",
        "The four jobs of rewardsmith on real preference data shipped with the package (HH-RLHF, MoralChoice, "
        f"PluriHarms; MIT), on the CPU, in minutes. The {sizes}; every number carries a 95% CI.",
        "",
    ]
    rows: list[dict[str, str]] = []

    def section(number: int, title: str, key: str, body: str, image: Path | None, link: str, caption: str) -> None:
        lines.extend([f"## {number}. {title}", "", f"**{key}**", "", body, ""])
        if image is not None:
            lines.extend([f"![{caption}]({image.relative_to(out).as_posix()})", ""])
        lines.extend([f"[Full report: {link}]({link})", ""])
        rows.append({"step": f"{number}. {title}", "key number": key, "report": str(out / link)})

    acc = with_interval(held["accuracy"], held["accuracy_ci"], 1)
    lc = with_interval(held["length_controlled_accuracy"], held["length_controlled_accuracy_ci"], 1)
    section(
        1,
        "Train a reward model",
        f"held-out accuracy {acc}% (length rule {held['length_rule_accuracy']:.1f}%, length-controlled {lc}%)",
        f"MiniLM{model_depth(train)} trained on {train['train']['pairs']} HH-RLHF harmless pairs, scored on "
        f"{held['n']} held-out "
        f"conversations. It prefers the longer response in {held['prefers_longer_rate']:.0f}% of pairs: the "
        "length rule and the length-controlled accuracy show how much of what it learned is length. "
        + helpful_note(train["eval"]),
        out / "train" / "plots" / "accuracy_and_length.png",
        "train/report.html",
        "accuracy, length rule and length-controlled accuracy per set",
    )
    methods = shift["methods"]
    target = shift["targets"][0]
    key = ", ".join(
        f"{m} {methods[m]['id_acc']:.1f} / {methods[m][f'ood_acc.{target}']:.1f}"
        for m in ("teacher", "naive", "anchor", "ceiling")
        if m in methods
    )
    section(
        2,
        "Stress-test under preference shift",
        f"ID / {target} accuracy (%): {key}",
        f"A weak teacher (a probe on MiniLM's first layer) labels harmless pairs for MiniLM students; each is "
        f"scored in domain and on {target}. {stress_test_note(shift)}",
        _first(out / "shift" / "plots", "id_vs_ood_*.png"),
        "shift/report.html",
        "ID against OOD accuracy",
    )
    key = ", ".join(f"{label} {with_interval(v, None, 1)}%" for label, v, _ in steering_agreement(steer))
    section(
        3,
        "Steer with demonstrations",
        f"agreement with the demonstrated standard ({steer['check']['n_demos']} demonstrations): {key}",
        "An in-context model on step 1's frozen encoder scores step 1's held-out pairs with no demonstrations, "
        "as-labelled ones and flipped ones; agreement counts a flipped demonstration's standard as the one to "
        "follow, so a model that follows its demonstrations is above chance under both.",
        out / "steer" / "plots" / "steering.png",
        "steer/report.html",
        "agreement with the demonstrated standard by condition",
    )
    section(
        4,
        "Calibrate to each rater",
        f"{PEBS}, held-out: {calibration_gains(cal)}",
        f"PluriHarms: {cal['data']['raters']} raters, {cal['data']['ratings_kept']} harm ratings (0-100); each "
        "rater's affine map from the model score (per-rater OLS) is shrunk toward the population map by "
        "empirical Bayes, by as much as the rater's own ratings leave it uncertain.",
        out / "calibrate" / "plots" / "slopes_before_after.png",
        "calibrate/report.html",
        "per-rater slopes before and after shrinkage",
    )
    page = folder.write_text("index.html", markdown_to_html("\n".join(lines), "rewardsmith demo"))
    return rows, Path(page)
