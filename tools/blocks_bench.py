"""Result blocks of the report card of the shipped models, from docs/results/bench.json (the slimmed metrics.json of
a `rewardsmith bench` run): `bench-card` (README.md: each suite's headline per model, the length rule and the paired
difference), `bench` (docs/benchmarks.md: every subset) and `bench-speed` (docs/benchmarks.md: the scoring speed
of benchmarks/results/suites.json)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from blocks_common import BENCH, ci_text, load, source, table

from rewardsmith.evaluate.formatting import with_range

NAME = "bench"
# Secondary measures the card shows beside each suite's primary ones: RM-Bench's difficulty split and style gap.
SHOWN_SECONDARY = {("rm-bench", "overall", metric) for metric in ("easy", "normal", "hard", "hard - easy")}


def _decimals(record: dict[str, Any]) -> int:
    return 3 if record.get("unit") == "" else 1


def _records(metrics: dict[str, Any], model: str, suite: str) -> dict[tuple[str, str], dict[str, Any]]:
    found = metrics["results"][model]["suites"].get(suite, {}).get("measures", [])
    return {(m["subset"], m["metric"]): m for m in found}


def _trained(metrics: dict[str, Any], model: str, suite: str, subset: str) -> bool:
    sets = metrics.get("model_info", {}).get(model, {}).get("training_sets") or []
    return any(s["suite"] == suite and s["subset"] == subset for s in sets)


def _training_subsets(metrics: dict[str, Any], model: str, suite: str) -> list[str]:
    sets = metrics.get("model_info", {}).get(model, {}).get("training_sets") or []
    return [s["subset"] for s in sets if s["suite"] == suite]


def _trained_in_suite(metrics: dict[str, Any], model: str, suite: str) -> bool:
    return bool(_training_subsets(metrics, model, suite))


def _suites(metrics: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for result in metrics["results"].values():
        names += [s for s in result["suites"] if s not in names]
    return names


def _measures(metrics: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(suite, its layout, {model: its records}, measure) for every measure of every suite run, in order."""
    models = metrics["models"]
    for suite in _suites(metrics):
        layout = next(r["suites"][suite] for r in metrics["results"].values() if suite in r["suites"])
        per_model = {name: _records(metrics, name, suite) for name in models}
        for head in layout["measures"]:
            yield suite, layout, per_model, head


def _differences(metrics: dict[str, Any]) -> dict[str, dict[tuple[str, str, str], dict[str, Any]]]:
    """{later model: {(suite, subset, metric): its paired comparison with the first model}}."""
    base = metrics["models"][0]
    return {
        name: {(r["suite"], r["subset"], r["metric"]): r for r in metrics["comparisons"].get(f"{name} vs {base}", [])}
        for name in metrics["models"][1:]
    }


def _difference_cells(
    diffs: dict[str, dict[tuple[str, str, str], dict[str, Any]]], key: tuple[str, str, str], decimals: int
) -> list[str]:
    """Each later model's difference from the first on measure `key` (suite, subset, metric), [95% CI], and its
    verdict ("n/a" for a measure not compared)."""
    cells: list[str] = []
    for comparisons in diffs.values():
        found = comparisons.get(key, {})
        cells += [ci_text(found.get("difference"), found.get("difference_ci"), decimals), found.get("verdict") or "n/a"]
    return cells


def block_bench() -> str:
    """Per suite and subset: each model's score [95% CI] (marked where the model was trained on that set), the
    length rule, each model's length-controlled accuracy where the metric is pairwise, and each later model minus
    the first with its paired CI and verdict."""
    m = load(NAME)
    models = m["models"]
    base, others = models[0], models[1:]
    diffs = _differences(m)
    rows = []
    marked = False
    for suite, layout, per_model, head in _measures(m):
        if not head["primary"] and (suite, head["subset"], head["metric"]) not in SHOWN_SECONDARY:
            continue
        key = (head["subset"], head["metric"])
        dec = _decimals(head)
        row = [layout["title"], head["subset"], head["metric"], f"{head['n']:,}"]
        for name in models:
            record = per_model[name].get(key)
            cell = ci_text(record.get("score"), record.get("score_ci"), dec) if record else "not run"
            if record and _trained(m, name, suite, head["subset"]):
                cell += " †"
                marked = True
            row.append(cell)
        row.append(ci_text(head.get("length_rule"), None, dec))
        for name in models:
            record = per_model[name].get(key) or {}
            row.append(ci_text(record.get("length_controlled"), record.get("length_controlled_ci"), 1))
        row += _difference_cells(diffs, (suite, *key), dec)
        rows.append(row)
    header = [
        "suite",
        "subset",
        "metric",
        "n",
        *models,
        "length rule",
        *[f"{n}: length-controlled" for n in models],
    ] + [c for n in others for c in (f"{n} - {base}", "verdict")]
    info = m.get("model_info", {})
    described = "; ".join(
        f"**{n}**: `{info[n]['source']}` ({info[n]['kind']}, {info[n]['template']} template, "
        f"{info[n]['max_length']} tokens, {info[n]['precision']}, trained on "
        f"{info[n].get('trained_on') or 'n/a'})"
        for n in models
        if n in info
    )
    texts = m["results"][base]["texts"]
    skipped = ", ".join(f"`{x['suite']}`" for x in m.get("missing", []))
    intro = (
        f"The shipped models on the benchmark data present here ({described}). Scores in % with 95% bootstrap "
        "CIs over the benchmark's units; the length rule is the same metric with the response length as the "
        "reward; the length-controlled accuracy averages the pairs whose preferred response is longer and those "
        "where it is shorter (50 for a length scorer); differences are paired bootstrap CIs: **better** / "
        "**worse** when the CI excludes 0, else inconclusive. Each model scored "
        f"{texts['scored']:,} distinct texts of {texts['requested']:,} requested ({texts['reused']:,} reused). "
        + (f"Not run (no data here): {skipped}." if skipped else "")
    )
    note = (
        "\n\n† Trained on this set (its pairs may include the model's training pairs): not a held-out score."
        if marked
        else ""
    )
    return intro + "\n\n" + table(header, rows) + note + "\n\n" + source(NAME)


# Rows of the README card beyond each suite's overall headline: RM-Bench's style gap.
CARD_EXTRA = {("rm-bench", "overall", "hard - easy")}


def block_bench_card() -> str:
    """Per suite run: its overall headline (and RM-Bench's style gap) per model with 95% CIs, the length rule,
    each later model minus the first with its paired CI and verdict; then the texts counter and the suites not
    run."""
    m = load(NAME)
    models = m["models"]
    base, others = models[0], models[1:]
    diffs = _differences(m)
    rows: list[list[str]] = []
    marked: list[str] = []
    for suite, layout, per_model, head in _measures(m):
        wanted = (head["level"] == "overall" and head["primary"]) or (
            suite,
            head["subset"],
            head["metric"],
        ) in CARD_EXTRA
        if not wanted:
            continue
        key, dec = (head["subset"], head["metric"]), _decimals(head)
        row = [layout["title"], f"{head['subset']}: {head['metric']}", f"{head['n']:,}"]
        for name in models:
            record = per_model[name].get(key)
            cell = ci_text(record.get("score"), record.get("score_ci"), dec) if record else "not run"
            if record and _trained_in_suite(m, name, suite):
                cell += " †"
                marked.append(f"{name} on {', '.join(_training_subsets(m, name, suite))}")
            row.append(cell)
        row.append(ci_text(head.get("length_rule"), None, dec))
        row += _difference_cells(diffs, (suite, *key), dec)
        rows.append(row)
    header = [
        "suite",
        "measure",
        "n",
        *models,
        "length rule",
        *[c for n in others for c in (f"{n} - {base}", "verdict")],
    ]
    texts = m["results"][base]["texts"]
    skipped = ", ".join(f"`{x['suite']}`" for x in m.get("missing", []))
    return (
        "Scores in % with 95% bootstrap CIs; the length rule scores the longer response higher; differences "
        "are paired bootstrap CIs (**better** / **worse** when the CI excludes 0); RM-Bench's *hard - easy* is "
        "the style gap in points (below 0: a more styled wrong response wins over a plainer correct one). Each "
        f"model scored {texts['scored']:,} distinct texts of {texts['requested']:,} requested "
        f"({texts['reused']:,} reused)."
        + (f" Not run (no data here): {skipped}." if skipped else "")
        + " Every subset, the length-controlled accuracies and the sets each model was trained on: "
        "`docs/benchmarks.md`.\n\n"
        + table(header, rows)
        + (
            "\n\n† The suite holds a set the model was trained on ("
            + "; ".join(dict.fromkeys(marked))
            + "): that part of the score is not held out."
            if marked
            else ""
        )
        + "\n\n"
        + source(NAME)
    )


def block_bench_speed() -> str:
    """The scoring phase of `rewardsmith bench` against the bare forward (benchmarks/results/suites.json)."""
    b = json.loads((BENCH / "suites.json").read_text(encoding="utf-8"))
    t = b["texts"]
    rows = []
    for r in b["results"]:
        speed = r["median_texts_per_s"]
        core = r.get("fraction_of_bare_fp32_core")
        rows.append(
            [
                r["precision"],
                f"{speed['bench']:.1f}",
                f"{speed['bare']:.1f}",
                with_range(r["fraction_of_bare"], percent=True),
                with_range(core, percent=True) if core else "same kernels",
                f"{r['median_load_seconds']['bench']:.1f}",
                f"{r['max_abs_diff_to_bench']:.1e}",
            ]
        )
    wait = b["load_wait"]
    if wait["settled"]:
        settled = f"{wait['when_measuring_started_1m']:.1f} (below {wait['target_1m']:g})"
    elif wait["waited_s"] > 0:
        settled = (
            f"still {wait['when_measuring_started_1m']:.1f} after {wait['waited_s'] / 60:.0f} min of waiting "
            "(other work shared the cores)"
        )
    else:
        settled = f"{wait['when_measuring_started_1m']:.1f}, measured at once on the shared machine"
    during = b.get("loadavg_1m_during")
    if during:
        settled += f"; {during['min']:.1f}-{during['max']:.1f} while measuring"
    return (
        f"{b['model']}; the distinct texts of {' and '.join(b['suites'])}, {b['limit_per_subset']} rows per "
        f"subset: {t['scored']:,} texts scored of {t['requested']:,} requested ({t['reused']:,} reused, each "
        "scored once). Texts/s of the scoring phase (model load timed apart; encoding included) against the "
        "bare forward (`AutoModel` + the head on the same token ids in the same batches, encoding done before "
        "the clock), and under bf16 against the same bare loop with rewardsmith's attention (its fp32 attention "
        "core for heads of at most 32 dims, `src/rewardsmith/models/attention.py`). Each ratio is the median of "
        f"the per-round ratios of {b['rounds']} rounds of fresh processes in rotating order, range in brackets "
        "(texts/s are the medians of each tool alone, so they need not divide to it); 1-minute load when measuring "
        f"started: {settled}.\n\n"
        + table(
            [
                "precision",
                "bench texts/s",
                "bare forward texts/s",
                "bench / bare",
                "bench / bare with the fp32 attention core",
                "model load s",
                "max abs reward difference",
            ],
            rows,
        )
        + f"\n\nCommand: `{b['command']}`; results: `benchmarks/results/suites.json`."
    )


BLOCKS: dict[str, Callable[[], str]] = {
    NAME: block_bench,
    "bench-card": block_bench_card,
    "bench-speed": block_bench_speed,
}
