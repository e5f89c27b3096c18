"""RLVR-style check: the reference solution against corrupted ones (changed final answer, a wrong step) on
held-out math-500 problems, with and without demonstrations, against BT. Per-pair correctness goes to
per_pair (the job writes it to per_pair.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rewardsmith.evaluate.charts import Chart
from rewardsmith.evaluate.formatting import with_interval
from rewardsmith.evaluate.metrics import pairwise_correct
from rewardsmith.icrm.episodes import Standard
from rewardsmith.icrm.protocols.base import ICRMProtocol, ci_series, flat_series
from rewardsmith.icrm.protocols.context import MATH, EvalContext, episodes_for, renamed


def math500(ctx: EvalContext) -> dict[str, Any]:
    target = ctx.test_pool(MATH)
    demos = renamed(ctx.demo_pool(MATH), target.name)
    kinds = np.array([str(p.metadata.get("corruption", "")) for p in target.pairs])
    rows = []
    per_pair: dict[str, Any] = {"pair_ids": [p.pair_id for p in target.pairs], "icrm": {}}
    for n in ctx.cfg.eval.n_values:
        d = ctx.score(episodes_for(target, demos, Standard(target.name), n, ctx.rng("math", n)), target, demos)
        margins = d["u_first"] - d["u_second"]
        per_pair["icrm"][str(n)] = pairwise_correct(margins).tolist()
        row: dict[str, Any] = {"demos": n, **ctx.accuracy(margins)}
        for kind in sorted(set(kinds)):
            row[kind] = float(pairwise_correct(margins[kinds == kind]).mean() * 100.0)
        rows.append(row)
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "test_pairs": len(target),
        **ctx.target_facts(MATH),
        "icrm": rows,
    }
    bt = ctx.bt_margins(target)
    if bt is not None:
        result["bt"] = ctx.accuracy(bt)
        for kind in sorted(set(kinds)):
            result["bt"][kind] = float(pairwise_correct(bt[kinds == kind]).mean() * 100.0)
        per_pair["bt"] = pairwise_correct(bt).tolist()
    result["per_pair"] = per_pair
    return result


def _rows(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Accuracy (%) at each N, and BT's."""
    return [
        {
            "figure": "accuracy",
            **{f"N={r['demos']}": with_interval(r["estimate"], None, 1) for r in m["icrm"]},
            "BT": with_interval(m.get("bt", {}).get("estimate"), None, 1),
        }
    ]


def _charts(m: Mapping[str, Any]) -> list[Chart]:
    """Accuracy as N grows, BT flat beside it."""
    series = [ci_series("ICRM", m["icrm"])]
    if "bt" in m:
        series.append(flat_series("BT", m["n_values"], m["bt"]))
    return [
        Chart(
            "accuracy_vs_n",
            "math500_accuracy_vs_n.png",
            title="math-500: reference above corrupted solution",
            caption="Accuracy (%) of the reference solution above a corrupted one as N grows, 95% CIs",
            series=series,
        )
    ]


PROTOCOL = ICRMProtocol("math500", math500, _rows, _charts)
