"""Multi-objective steering: should-respond (rm-bench/safety-response) and should-refuse
(rm-bench/safety-refuse) demonstrations mixed with weight w; the (respond, refuse) accuracy points over w trace
a frontier whose hypervolume (accuracies as fractions, reference point (0, 0)) is reported per N. Per-pair
correctness of every (N, weight, target) goes to per_pair (the job writes it to per_pair.json), so a summary over
seeds can resample pairs and recompute the hypervolume (experiments/icrm.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rewardsmith.evaluate.charts import Chart, Series
from rewardsmith.evaluate.metrics import hypervolume_2d, pairwise_correct, pareto_front
from rewardsmith.icrm.episodes import Demo, Episode, PairPool, Standard
from rewardsmith.icrm.protocols.base import N_LABEL, ICRMProtocol
from rewardsmith.icrm.protocols.context import REFUSE, RESPOND, EvalContext, renamed


def pareto(ctx: EvalContext) -> dict[str, Any]:
    respond, refuse = ctx.test_pool(RESPOND), ctx.test_pool(REFUSE)
    respond_demos, refuse_demos = ctx.demo_pool(RESPOND), ctx.demo_pool(REFUSE)
    # One combined pool: should-respond demonstrations first, then should-refuse ones.
    mixed = PairPool("pareto-mix", respond_demos.pairs + refuse_demos.pairs)
    n_respond, n_refuse = len(respond_demos), len(refuse_demos)
    rows, points_by_n = [], {}
    per_pair: dict[str, Any] = {
        "respond_ids": [p.pair_id for p in respond.pairs],
        "refuse_ids": [p.pair_id for p in refuse.pairs],
        "weights": list(ctx.cfg.eval.pareto_weights),
        "icrm": {},
    }
    for n in ctx.cfg.eval.n_values:
        points = []
        correct: dict[str, list[list[float]]] = {"respond": [], "refuse": []}  # (W, K) per target
        for w in ctx.cfg.eval.pareto_weights:
            k_respond = round(w * n)
            accs = []
            for name, target in (("respond", respond), ("refuse", refuse)):
                rng = ctx.rng("pareto", n, w, name)
                eps = []
                for i in range(len(target)):
                    a = rng.choice(n_respond, size=min(k_respond, n_respond), replace=False)
                    b = rng.choice(n_refuse, size=min(n - k_respond, n_refuse), replace=False) + n_respond
                    demos = tuple(Demo(int(j), True) for j in np.concatenate([a, b]))
                    eps.append(Episode(Standard("pareto-target"), i, True, 1.0, demos))
                s = ctx.score(eps, renamed(target, "pareto-target"), mixed)
                hits = pairwise_correct(s["u_first"] - s["u_second"])
                correct[name].append(hits.tolist())
                accs.append(float(hits.mean()))
            points.append({"weight_respond": w, "respond": accs[0], "refuse": accs[1]})
        pts = np.array([[p["respond"], p["refuse"]] for p in points])
        rows.append({"demos": n, "hypervolume": hypervolume_2d(pts), "front": pareto_front(pts).tolist()})
        points_by_n[str(n)] = points
        per_pair["icrm"][str(n)] = correct
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "respond_pairs": len(respond),
        "refuse_pairs": len(refuse),
        **ctx.target_facts(RESPOND, REFUSE),
        "hypervolume": rows,
        "points": points_by_n,
    }
    bt_respond, bt_refuse = ctx.bt_margins(respond), ctx.bt_margins(refuse)
    if bt_respond is not None and bt_refuse is not None:
        br, bf = float(pairwise_correct(bt_respond).mean()), float(pairwise_correct(bt_refuse).mean())
        result["bt"] = {"respond": br, "refuse": bf, "hypervolume": hypervolume_2d([[br, bf]])}
        per_pair["bt"] = {
            "respond": pairwise_correct(bt_respond).tolist(),
            "refuse": pairwise_correct(bt_refuse).tolist(),
        }
    result["per_pair"] = per_pair
    return result


def _rows(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The frontier's hypervolume at each N, and BT's."""
    return [
        {
            "figure": "hypervolume",
            **{f"N={r['demos']}": f"{r['hypervolume']:.3f}" for r in m["hypervolume"]},
            "BT": f"{m['bt']['hypervolume']:.3f}" if "bt" in m else "",
        }
    ]


def _charts(m: Mapping[str, Any]) -> list[Chart]:
    """Hypervolume as N grows (BT flat beside it), then the accuracy points over the mixes, one line per N."""
    rows = m["hypervolume"]
    x = [r["demos"] for r in rows]
    series = [Series("ICRM", x, [r["hypervolume"] for r in rows])]
    if "bt" in m:
        series.append(Series("BT", x, [m["bt"]["hypervolume"]] * len(x)))
    points = [
        Series(f"N={n}", [p["respond"] for p in m["points"][str(n)]], [p["refuse"] for p in m["points"][str(n)]])
        for n in m["n_values"]
    ]
    return [
        Chart(
            "lines",
            "pareto_hypervolume_vs_n.png",
            title="respond vs refuse frontier",
            caption="Hypervolume of the respond / refuse frontier as N grows",
            series=series,
            xlabel=N_LABEL,
            ylabel="hypervolume (accuracy fractions)",
            xscale="symlog",
        ),
        Chart(
            "lines",
            "pareto_points.png",
            title="accuracy over demonstration mixes",
            caption="Accuracy on both objectives over the demonstration mixes, one line per N",
            series=points,
            xlabel="should-respond accuracy (fraction)",
            ylabel="should-refuse accuracy (fraction)",
        ),
    ]


PROTOCOL = ICRMProtocol("pareto", pareto, _rows, _charts)
