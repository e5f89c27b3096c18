"""The report of `rewardsmith bon`: metrics.json (bon.estimate) -> report.md, report.html and plots/. Layout only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.bon.estimate import LENGTH, ORACLE
from rewardsmith.evaluate.charts import Series
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.plots import plot_best_of_n, plot_lines_with_ci
from rewardsmith.report.render import Figure, Report, markdown_table, slug, with_interval, write_report

REFERENCE_LABELS = {LENGTH: "length selector (longest)", ORACLE: "oracle (gold picks)"}


def _ci(entry: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not entry:
        return "n/a"
    return with_interval(entry.get("estimate"), [entry.get("low"), entry.get("high")], digits)


def _name(selector: str) -> str:
    return REFERENCE_LABELS.get(selector, selector)


def selector_rows(metrics: Mapping[str, Any], gold: str) -> list[dict[str, str]]:
    """One row per selector of one gold: gold at n = 1 (random choice) and at N, the gain and its verdict, the
    over-optimisation verdict, the rank correlation and the picked length at N."""
    block = metrics["golds"][gold]
    n_max = metrics["ns"][-1]
    rows = []
    for name, entry in block["selectors"].items():
        over = entry["overoptimisation"]
        drop = over.get("drop")
        gain, corr = entry["gain_over_random"], entry["rank_correlation"]
        rows.append(
            {
                "selector": _name(name),
                "gold@1 (random)": _ci(entry["gold_at_n"][0]),
                f"gold@{n_max}": _ci(entry["gold_at_n"][-1]),
                f"gold@{n_max} - gold@1": f"{_ci(gain)} {gain.get('verdict') or ''}".strip(),
                "peak n (validation)": str(over.get("peak_n")),
                f"gold@{n_max} - peak (test)": f"{_ci(drop)} {over['verdict']}" if drop else over["verdict"],
                "rank corr. with gold (prompts)": f"{_ci(corr, 2)} ({corr['prompts']})",
                f"length@{n_max} (chars)": _ci(entry["length_at_n"][-1], 0),
            }
        )
    return rows


def summary_rows(metrics: Mapping[str, Any]) -> list[dict[str, str]]:
    """The console table: per gold and proxy, gold@N against random choice and the over-optimisation verdict."""
    n_max = metrics["ns"][-1]
    rows = []
    for gold, block in metrics["golds"].items():
        for name, entry in block["selectors"].items():
            rows.append(
                {
                    "gold": gold,
                    "selector": _name(name),
                    "gold@1": _ci(entry["gold_at_n"][0]),
                    f"gold@{n_max}": _ci(entry["gold_at_n"][-1]),
                    "vs random": entry["gain_over_random"].get("verdict") or "n/a",
                    "over-optimised": entry["overoptimisation"]["verdict"],
                }
            )
    return rows


def _series(metrics: Mapping[str, Any], entry: Mapping[str, Any], key: str, label: str) -> Series:
    kl = metrics["kl_bound"]
    points = entry[key]
    return Series(
        label,
        kl,
        [p["estimate"] for p in points],
        [p["low"] for p in points],
        [p["high"] for p in points],
    )


def _figures(metrics: Mapping[str, Any], folder: RunFolder) -> list[Figure]:
    plots = folder.path / "plots"
    figures = []
    for gold, block in metrics["golds"].items():
        proxies = [name for name in block["selectors"] if name not in (LENGTH, ORACLE)]
        selectors = block["selectors"]
        path = plot_best_of_n(
            [_series(metrics, selectors[p], "gold_at_n", p) for p in proxies],
            [_series(metrics, selectors[p], "own_gain_in_sd_at_n", p) for p in proxies],
            plots / f"gold_vs_kl_{slug(gold)}.png",
            gold_label=f"gold: {gold}",
            references=[_series(metrics, selectors[r], "gold_at_n", _name(r)) for r in (LENGTH, ORACLE)],
            random_choice=selectors[proxies[0]]["gold_at_n"][0]["estimate"] if proxies else None,
            title=f"Best-of-n: gold {gold} and proxy against KL",
        )
        figures.append(
            Figure(
                path,
                f"gold {gold} (solid, 95% CI over prompts) and each proxy's own gain (dashed) against the KL bound",
            )
        )
        path = plot_lines_with_ci(
            [_series(metrics, selectors[s], "length_at_n", _name(s)) for s in selectors],
            plots / f"length_vs_kl_{slug(gold)}.png",
            xlabel="KL(best-of-n || policy) bound, nats",
            ylabel="length of the chosen response (characters)",
            title="Length drift of the chosen response",
        )
        figures.append(Figure(path, "Mean length of the response each selector chooses, against the KL bound"))
    return figures


def bon_report(metrics: Mapping[str, Any], folder: RunFolder) -> list[str]:
    """Writes report.md, report.html and plots/ into the run folder; returns the names written."""
    n_max = metrics["ns"][-1]
    sampling = metrics.get("sampling", {})
    report = Report(
        f"Best-of-n against a gold: {metrics['prompts']} prompts, {n_max} samples each",
        f"Prompts: {metrics.get('prompts_source')}. Samples: {sampling.get('policy') or sampling.get('source')}"
        f" (temperature {sampling.get('temperature')}, top-p {sampling.get('top_p')}, at most "
        f"{sampling.get('max_new_tokens')} new tokens). Every figure is the exact expectation over all n-subsets of "
        "each prompt's samples, averaged over prompts, with a 95% bootstrap CI over prompts. The peak n is chosen on "
        f"the validation half of the prompts ({metrics['validation_prompts']} of {metrics['prompts']}) and gold@N "
        "minus gold at that n is estimated on the other half: over-optimised only when its CI lies below 0.",
    )
    kl = ", ".join(f"n={n}: {k:.2f}" for n, k in zip(metrics["ns"], metrics["kl_bound"], strict=True))
    report.add("KL bound per n", f"log n - (n - 1) / n nats: {kl}.")
    for gold, block in metrics["golds"].items():
        title = metrics.get("gold_titles", {}).get(gold, gold)
        dropped = (
            f" ({block['dropped_prompts']} prompts the gold could not score left out)"
            if block["dropped_prompts"]
            else ""
        )
        report.add(
            f"Gold: {gold}",
            f"{title}; {block['prompts']} prompts{dropped}.\n\n" + markdown_table(selector_rows(metrics, gold)),
        )
        if block["paired"]:
            rows = [
                {
                    "a - b": f"{pair['a']} - {pair['b']}",
                    **{
                        f"n={n}": f"{_ci(d)} {d.get('verdict') or ''}".strip()
                        for n, d in zip(metrics["ns"], pair["gold_diff_at_n"], strict=True)
                    },
                }
                for pair in block["paired"]
            ]
            report.add(f"Paired differences of gold@n ({gold})", markdown_table(rows), level=3)
    report.figures = _figures(metrics, folder)
    write_report(report, folder.path, folder.write_text)
    return ["report.md", "report.html", "plots"]
