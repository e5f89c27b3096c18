"""Calibrated steerability: demonstrations with a fraction p flipped; the posterior mean mu should track the
demonstrated rate 1 - p. Reports, as N grows (moralchoice held-out pairs):

- the reliability of mu across the standards: the mean mu at each demonstrated rate against that rate, its
  least-squares slope (1 = mu tracks the rate exactly; 0 for a constant forecast and for BT, which cannot see
  the demonstrations) and its mean absolute error over the rates (a constant 0.5 scores about 0.27 on rates
  0, 0.1, ..., 1), beside the same for the constant 0.5 forecast and for BT;
- ECE (probability mode, 10 bins) with its companion, the per-pair mean absolute error |mu - (1 - p)|, both
  with bootstrap CIs over target pairs (a constant forecast passes ECE: it is kept for comparison with the paper).

The BT baseline's mu = sigmoid(margin). The posterior means go to per_pair (the job writes them to
per_pair.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rewardsmith.evaluate.charts import Chart, ReliabilityBins, Series
from rewardsmith.evaluate.metrics import expected_calibration_error, json_float, reliability_curve
from rewardsmith.icrm.episodes import Standard
from rewardsmith.icrm.protocols.base import N_LABEL, ICRMProtocol
from rewardsmith.icrm.protocols.context import MORAL, EvalContext, episodes_for, renamed
from rewardsmith.stats import bootstrap_indices, percentile_interval, sigmoid

_MAX_ECE_REPLICATES = 300  # ECE is re-binned per replicate: a few hundred replicates settle the interval


def _ece_and_mae(mu: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """mu, target: (R, K) posterior means and demonstrated rates (R rates x K pairs)."""
    return (
        expected_calibration_error(mu.ravel(), target.ravel(), mode="probability"),
        float(np.mean(np.abs(mu - target))),
    )


def reliability(mu: np.ndarray, rates: np.ndarray) -> dict[str, Any]:
    """Reliability of posterior means across standards: mu (R, K) for R demonstrated flip rates p (R,) and K target
    pairs. Returns {"rate": 1 - p (R,), "mean_mu": (R,) mean over pairs, "slope": least-squares slope of mean_mu on
    1 - p, "mae": mean over rates of |mean_mu - (1 - p)|}; slope NaN with one rate."""
    wanted = 1.0 - np.asarray(rates, dtype=np.float64)
    mean_mu = np.asarray(mu, dtype=np.float64).mean(axis=1)
    dx = wanted - wanted.mean()
    slope = float((dx * (mean_mu - mean_mu.mean())).sum() / (dx**2).sum()) if (dx**2).sum() > 0 else float("nan")
    return {
        "rate": wanted.tolist(),
        "mean_mu": mean_mu.tolist(),
        "slope": slope,
        "mae": float(np.mean(np.abs(mean_mu - wanted))),
    }


def calibration(ctx: EvalContext) -> dict[str, Any]:
    target = ctx.test_pool(MORAL)
    demos = renamed(ctx.demo_pool(MORAL), target.name)
    rates = list(ctx.cfg.eval.mixture_rates)
    rows: list[dict[str, Any]] = []
    per_pair: dict[str, Any] = {"pair_ids": [p.pair_id for p in target.pairs], "flip_rates": rates, "icrm_mu": {}}
    mean_mu: dict[str, list[float]] = {}
    curve: dict[str, Any] | None = None
    for n in ctx.cfg.eval.n_values:
        mus = np.stack(
            [
                ctx.score(
                    episodes_for(target, demos, Standard(target.name, "default", p), n, ctx.rng("cal", p, n)),
                    target,
                    demos,
                )["mu"]
                for p in rates
            ]
        )
        wanted = np.stack([np.full(len(target), 1.0 - p) for p in rates])  # (R, K)
        mean_mu[str(n)] = [float(m.mean()) for m in mus]
        per_pair["icrm_mu"][str(n)] = np.round(mus, 6).tolist()  # (R, K)
        ece, mae = _ece_and_mae(mus, wanted)
        rel = reliability(mus, np.asarray(rates))
        idx = bootstrap_indices(len(target), min(ctx.cfg.eval.n_boot, _MAX_ECE_REPLICATES), ctx.cfg.eval.seed)
        reps = np.array([_ece_and_mae(mus[:, i], wanted[:, i]) for i in idx]).reshape(-1, 2)
        ece_ci, mae_ci = percentile_interval(reps[:, 0]), percentile_interval(reps[:, 1])
        rows.append(
            {
                "demos": n,
                "ece": ece,
                "ece_ci": [json_float(v) for v in ece_ci],
                "mean_abs_error": mae,
                "mean_abs_error_ci": [json_float(v) for v in mae_ci],
                "reliability_slope": json_float(rel["slope"]),
                "reliability_mae": rel["mae"],
            }
        )
        curve = reliability_curve(mus.ravel(), wanted.ravel(), mode="probability").to_dict()
    constant = reliability(np.full((len(rates), len(target)), 0.5), np.asarray(rates))
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "test_pairs": len(target),
        **ctx.target_facts(MORAL),
        "flip_rates": rates,
        "ece": rows,
        "constant_reliability": {"slope": json_float(constant["slope"]), "mae": constant["mae"]},
        "mean_mu_by_rate": mean_mu,
        "reliability_max_n": curve,
    }
    bt = ctx.bt_margins(target)
    if bt is not None:
        bt_mu = np.stack([sigmoid(bt) for _ in rates])
        wanted = np.stack([np.full(len(target), 1.0 - p) for p in rates])
        ece, mae = _ece_and_mae(bt_mu, wanted)
        result["bt_ece"], result["bt_mean_abs_error"] = ece, mae
        bt_rel = reliability(bt_mu, np.asarray(rates))
        result["bt_reliability"] = {"slope": json_float(bt_rel["slope"]), "mae": bt_rel["mae"]}
        per_pair["bt_mu"] = np.round(sigmoid(bt), 6).tolist()  # (K,), the same for every rate
    result["per_pair"] = per_pair
    return result


def _rows(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """ECE and the mean |mu - rate| at each N, and BT's."""
    return [
        {
            "figure": figure,
            **{f"N={r['demos']}": f"{r[key]:.3f}" for r in m["ece"]},
            "BT": f"{m[f'bt_{key}']:.3f}" if f"bt_{key}" in m else "",
        }
        for figure, key in (("ECE", "ece"), ("mean |mu - rate|", "mean_abs_error"))
    ]


def _charts(m: Mapping[str, Any]) -> list[Chart]:
    """ECE beside the mean |mu - rate| as N grows; the reliability slope and MAE (where measured); mean mu against
    the demonstrated rate per N; the reliability diagram at the largest N (where recorded)."""
    rows = m["ece"]
    x = [r["demos"] for r in rows]
    series = [
        Series("ICRM ECE", x, [r["ece"] for r in rows], [r["ece_ci"][0] for r in rows], [r["ece_ci"][1] for r in rows]),
        Series(
            "ICRM mean |mu - rate|",
            x,
            [r["mean_abs_error"] for r in rows],
            [r["mean_abs_error_ci"][0] for r in rows],
            [r["mean_abs_error_ci"][1] for r in rows],
        ),
    ]
    if "bt_ece" in m:
        series.append(Series("BT ECE", x, [m["bt_ece"]] * len(x)))
        series.append(Series("BT mean |mu - rate|", x, [m["bt_mean_abs_error"]] * len(x)))
    charts = [
        Chart(
            "lines",
            "calibration_ece_vs_n.png",
            title="moralchoice: calibrated steerability",
            caption="ECE and mean absolute error of mu against the demonstrated rate, 95% CIs",
            series=series,
            xlabel=N_LABEL,
            ylabel="error (fraction)",
            xscale="symlog",
        )
    ]
    if all("reliability_slope" in r for r in rows):
        tracking = [
            Series("ICRM slope", x, [r["reliability_slope"] for r in rows]),
            Series("ICRM MAE", x, [r["reliability_mae"] for r in rows]),
        ]
        for label, rec in (("constant 0.5", m.get("constant_reliability")), ("BT", m.get("bt_reliability"))):
            if rec:
                tracking += [
                    Series(f"{label} slope", x, [rec["slope"]] * len(x)),
                    Series(f"{label} MAE", x, [rec["mae"]] * len(x)),
                ]
        charts.append(
            Chart(
                "lines",
                "calibration_tracking_vs_n.png",
                title="does mu track the demonstrated rate?",
                caption="Reliability across the demonstrated rates: the slope of the mean mu on the rate (1 = "
                "tracks it, 0 = ignores it) and its mean absolute error, beside a constant 0.5 forecast "
                "and BT, which a tracking model must beat (ECE does not separate them)",
                series=tracking,
                xlabel=N_LABEL,
                ylabel="slope / MAE",
                xscale="symlog",
            )
        )
    rates = [1.0 - p for p in m["flip_rates"]]
    charts.append(
        Chart(
            "lines",
            "calibration_mu_vs_rate.png",
            title="mean posterior preference against the demonstrated rate",
            caption="Mean mu against the demonstrated rate, one line per N (the diagonal is perfect)",
            series=[Series(f"N={n}", rates, m["mean_mu_by_rate"][str(n)]) for n in m["n_values"]],
            xlabel="demonstrated preference rate 1 - p",
            ylabel="mean mu",
        )
    )
    curve = m.get("reliability_max_n")
    if curve:
        charts.append(
            Chart(
                "reliability",
                "calibration_reliability_max_n.png",
                title=f"reliability at N={m['n_values'][-1]}",
                caption="Reliability of mu at the largest N (probability mode, 10 bins)",
                bins=ReliabilityBins(curve["confidence"], curve["accuracy"], curve["counts"], curve["edges"]),
            )
        )
    return charts


PROTOCOL = ICRMProtocol("calibration", calibration, _rows, _charts)
