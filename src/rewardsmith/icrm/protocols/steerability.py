"""Directional steerability: accuracy against each standard's labels as N grows, on held-out pku-saferlhf
pairs (harmless and helpful labellings, as given and flipped), against a BT model of the same backbone, which
cannot adapt. Per-pair correctness goes to per_pair (the job writes it to per_pair.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rewardsmith.evaluate.charts import Chart
from rewardsmith.evaluate.formatting import with_interval
from rewardsmith.evaluate.metrics import pairwise_correct
from rewardsmith.icrm.episodes import Standard
from rewardsmith.icrm.protocols.base import ICRMProtocol, ci_series, flat_series
from rewardsmith.icrm.protocols.context import PKU, EvalContext, episodes_for, oriented, renamed


def steerability(ctx: EvalContext) -> dict[str, Any]:
    target = ctx.test_pool(PKU)
    demos = renamed(ctx.demo_pool(PKU), target.name)
    bt = ctx.bt_margins(target)
    disagree = ~target.labellings["helpful"]
    standards = {
        "harmless": Standard(target.name, "harmless", 0.0),
        "harmless-flipped": Standard(target.name, "harmless", 1.0),
        "helpful": Standard(target.name, "helpful", 0.0),
        "helpful-flipped": Standard(target.name, "helpful", 1.0),
    }
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "test_pairs": len(target),
        **ctx.target_facts(PKU),
        "demo_pool": ctx.demo_pool(PKU).name,
        "labels_disagree": int(disagree.sum()),
        "standards": {},
    }
    per_pair: dict[str, Any] = {
        "pair_ids": [p.pair_id for p in target.pairs],
        "labels_disagree": disagree.tolist(),
        "standards": {},
    }
    for name, std in standards.items():
        rows, rows_disagree = [], []
        correct: dict[str, Any] = {"icrm": {}}
        for n in ctx.cfg.eval.n_values:
            eps = episodes_for(target, demos, std, n, ctx.rng("steer", name, n))
            labels = np.array([e.label for e in eps])
            margins = oriented(ctx.score(eps, target, demos), labels)
            rows.append({"demos": n, **ctx.accuracy(margins)})
            rows_disagree.append({"demos": n, **ctx.accuracy(margins[disagree])})
            correct["icrm"][str(n)] = pairwise_correct(margins).tolist()
        entry: dict[str, Any] = {"icrm": rows, "icrm_labels_disagree": rows_disagree}
        if bt is not None:
            preferred = target.labellings[std.labelling] != (std.flip_rate > 0.5)
            bt_oriented = np.where(preferred, bt, -bt)
            entry["bt"] = ctx.accuracy(bt_oriented)
            entry["bt_labels_disagree"] = ctx.accuracy(bt_oriented[disagree])
            correct["bt"] = pairwise_correct(bt_oriented).tolist()
        result["standards"][name] = entry
        per_pair["standards"][name] = correct
    result["per_pair"] = per_pair
    return result


def _rows(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Accuracy (%) against each standard at each N, and BT's."""
    return [
        {
            "figure": f"accuracy, {std}",
            **{f"N={r['demos']}": with_interval(r["estimate"], None, 1) for r in e["icrm"]},
            "BT": with_interval(e.get("bt", {}).get("estimate"), None, 1),
        }
        for std, e in m["standards"].items()
    ]


def _charts(m: Mapping[str, Any]) -> list[Chart]:
    """Accuracy against the flipped harmless and the helpful standard as N grows, BT flat beside each."""
    series = []
    for name in ("harmless-flipped", "helpful"):
        entry = m["standards"][name]
        series.append(ci_series(f"ICRM, {name}", entry["icrm"]))
        if "bt" in entry:
            series.append(flat_series(f"BT, {name}", m["n_values"], entry["bt"]))
    return [
        Chart(
            "accuracy_vs_n",
            "steerability_accuracy_vs_n.png",
            title="pku-saferlhf held-out: accuracy against the demonstrated standard",
            caption="Accuracy (%) against the demonstrated standard as N grows, 95% CIs; dashed: chance",
            series=series,
        )
    ]


PROTOCOL = ICRMProtocol("steerability", steerability, _rows, _charts)
