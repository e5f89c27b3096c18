"""RM-Bench easy / normal / hard / avg accuracy with bootstrap CIs over prompts as N grows, per subset (chat,
code, safety-refuse, safety-response; a subset missing from the data directory is reported as missing) and
overall, against BT (each subset's own demonstrations; a prompt's three style pairs share one draw of
demonstrations). Per-prompt accuracies go to per_pair (the job writes them to per_pair.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import DataError
from rewardsmith.evaluate.charts import Chart, Series
from rewardsmith.evaluate.formatting import with_interval
from rewardsmith.evaluate.rmbench import rmbench_accuracy
from rewardsmith.icrm.episodes import Episode, PairPool, Standard, draw_demos
from rewardsmith.icrm.protocols.base import ICRMProtocol
from rewardsmith.icrm.protocols.context import RMBENCH_SUBSETS, EvalContext, renamed

_KEYS = ("easy", "normal", "hard", "avg")


def variant_pool(pool: PairPool) -> PairPool:
    """3 pairs per RM-Bench prompt: (chosen style i, rejected style i) for i = 0, 1, 2."""
    pairs = []
    for p in pool.pairs:
        cv, rv = p.metadata["chosen_variants"], p.metadata["rejected_variants"]
        pairs += [PreferencePair(p.prompt, cv[i], rv[i], 1.0, p.domain, f"{p.pair_id}:{i}") for i in range(3)]
    return PairPool(pool.name, pairs)


def _accuracy(chosen: np.ndarray, rejected: np.ndarray, n_boot: int) -> dict[str, Any]:
    """easy / normal / hard / avg (%) with their 95% CIs over prompts; chosen, rejected: (P, 3) scores."""
    acc = rmbench_accuracy(chosen, rejected, n_boot=n_boot)
    return {**{k: acc[k] for k in _KEYS}, **{f"{k}_ci": acc[f"{k}_ci"] for k in _KEYS}, "n_prompts": acc["n"]}


def per_prompt(chosen: np.ndarray, rejected: np.ndarray) -> dict[str, list[float]]:
    """easy / normal / hard / avg (%) of each prompt alone (their means over prompts are the set's figures);
    chosen, rejected: (P, 3) scores. Returns {key: (P,) list}."""
    rows = [rmbench_accuracy(chosen[k : k + 1], rejected[k : k + 1], n_boot=0) for k in range(len(chosen))]
    return {key: [round(float(r[key]), 4) for r in rows] for key in _KEYS}


def rmbench(ctx: EvalContext) -> dict[str, Any]:
    n_boot = ctx.cfg.eval.n_boot
    result: dict[str, Any] = {"n_values": list(ctx.cfg.eval.n_values), "subsets": {}}
    per_pair: dict[str, Any] = {
        "prompt_ids": [],
        "subset": [],
        "icrm": {str(n): [] for n in ctx.cfg.eval.n_values},
        "bt": [],
    }
    totals: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {n: ([], []) for n in ctx.cfg.eval.n_values}
    bt_all: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    read: list[str] = []
    for subset in RMBENCH_SUBSETS:
        try:
            ctx.pools(subset)
        except DataError as exc:  # a subset missing from this data directory is reported, not fatal
            result["subsets"][subset] = {"missing": str(exc)}
            continue
        base = ctx.test_pool(subset)  # outside the try: missing training data is an error, not a missing subset
        read.append(subset)
        if not len(base):
            result["subsets"][subset] = {"prompts": 0}
            continue
        per_pair["prompt_ids"] += [p.pair_id for p in base.pairs]
        per_pair["subset"] += [subset] * len(base)
        target = variant_pool(base)
        demos = renamed(ctx.demo_pool(subset), target.name)
        rows = []
        for n in ctx.cfg.eval.n_values:
            rng = ctx.rng("rmbench", subset, n)
            eps = []
            for k in range(len(base)):
                shared = draw_demos(demos, Standard(target.name), n, rng)
                eps += [Episode(Standard(target.name), 3 * k + i, True, 1.0, shared) for i in range(3)]
            s = ctx.score(eps, target, demos)
            chosen, rejected = s["u_first"].reshape(-1, 3), s["u_second"].reshape(-1, 3)
            totals[n][0].append(chosen)
            totals[n][1].append(rejected)
            per_pair["icrm"][str(n)].append(per_prompt(chosen, rejected))
            rows.append({"demos": n, **_accuracy(chosen, rejected, n_boot)})
        entry: dict[str, Any] = {"prompts": len(base), "icrm": rows}
        bt = ctx.bt_scores(target)
        if bt is not None:
            bt_c, bt_r = bt[0].reshape(-1, 3), bt[1].reshape(-1, 3)
            bt_all[0].append(bt_c)
            bt_all[1].append(bt_r)
            entry["bt"] = _accuracy(bt_c, bt_r, n_boot)
            per_pair["bt"].append(per_prompt(bt_c, bt_r))
        result["subsets"][subset] = entry
    result["overall"] = [
        {"demos": n, **_accuracy(np.concatenate(cs), np.concatenate(rs), n_boot)}
        for n, (cs, rs) in totals.items()
        if cs
    ]
    if bt_all[0]:
        result["bt_overall"] = _accuracy(np.concatenate(bt_all[0]), np.concatenate(bt_all[1]), n_boot)
    result.update(ctx.target_facts(*read))
    # One list per key over every subset's prompts, in the order of prompt_ids.
    per_pair["icrm"] = {n: _joined(parts) for n, parts in per_pair["icrm"].items()}
    if per_pair["bt"]:
        per_pair["bt"] = _joined(per_pair["bt"])
    else:
        del per_pair["bt"]
    result["per_pair"] = per_pair
    return result


def _joined(parts: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    return {key: [v for part in parts for v in part[key]] for key in _KEYS}


def _rows(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The overall average accuracy (%) at each N, then each scored subset's; BT's beside each."""
    rows = [
        {
            "figure": "RM-Bench avg",
            **{f"N={r['demos']}": with_interval(r["avg"], None, 1) for r in m.get("overall", [])},
            "BT": with_interval(m.get("bt_overall", {}).get("avg"), None, 1),
        }
    ]
    return rows + [
        {
            "figure": f"avg, {subset.split('/')[-1]}",
            **{f"N={r['demos']}": with_interval(r["avg"], None, 1) for r in e["icrm"]},
            "BT": with_interval(e.get("bt", {}).get("avg"), None, 1),
        }
        for subset, e in m["subsets"].items()
        if e.get("icrm")
    ]


def _charts(m: Mapping[str, Any]) -> list[Chart]:
    """Overall easy / normal / hard / avg accuracy as N grows (BT's avg flat beside it), then each subset's avg;
    none when nothing was scored."""
    overall = m.get("overall") or []
    if not overall:
        return []
    x = [r["demos"] for r in overall]
    series = [Series(f"ICRM {k}", x, [r[k] for r in overall]) for k in ("easy", "normal", "hard")]
    series.append(
        Series(
            "ICRM avg",
            x,
            [r["avg"] for r in overall],
            [r["avg_ci"][0] for r in overall],
            [r["avg_ci"][1] for r in overall],
        )
    )
    if "bt_overall" in m:
        series.append(Series("BT avg", x, [m["bt_overall"]["avg"]] * len(x)))
    charts = [
        Chart(
            "accuracy_vs_n",
            "rmbench_accuracy_vs_n.png",
            title="RM-Bench held-out",
            caption="RM-Bench easy / normal / hard accuracy (%) as N grows; average with its 95% CI",
            series=series,
        )
    ]
    subsets = {name.split("/")[-1]: e["icrm"] for name, e in m["subsets"].items() if e.get("icrm")}
    if subsets:
        lines = [
            Series(
                f"ICRM {name}",
                [r["demos"] for r in rows],
                [r["avg"] for r in rows],
                [r["avg_ci"][0] for r in rows],
                [r["avg_ci"][1] for r in rows],
            )
            for name, rows in subsets.items()
        ]
        charts.append(
            Chart(
                "accuracy_vs_n",
                "rmbench_subsets_vs_n.png",
                title="RM-Bench held-out, per subset",
                caption="RM-Bench average accuracy (%) per subset as N grows, 95% CIs over prompts",
                series=lines,
            )
        )
    return charts


PROTOCOL = ICRMProtocol("rmbench", rmbench, _rows, _charts)
