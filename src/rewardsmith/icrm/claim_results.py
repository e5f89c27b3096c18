"""The results of the ICRM claims (rewardsmith.icrm.claims) built from the summary of the runs over seeds
(experiments/icrm.py summarise -> docs/results/icrm.json, key `protocols`): each claim per standard or subset, its
estimate and hierarchical bootstrap CI as the summary holds them, the verdict against the bar declared there
(icrm/claims.py says when).

A summary written before a measure existed (the reliability across rates, the flipped-standard ceilings, the paired
per-subset RM-Bench and hypervolume changes) leaves that claim "not run" with the command that produces it; where
the summary holds the point (a difference of two means over the same seeds and pairs) but not its paired interval,
the point is shown and not judged (rewardsmith.claims.point_only). Nothing is filled in by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.claims import ClaimResult, exact_result, interval_result, not_run, point_only
from rewardsmith.icrm.claims import (
    CALIBRATION_WITH_N,
    DEFAULT_COST,
    FLIPPED_SHARE,
    FLIPPED_VS_BT,
    KL_INTERIOR,
    MATH500_PROXY,
    MATH500_RL,
    N_CALIBRATION_FROM,
    N_MAX,
    N_RMBENCH_FROM,
    PARETO_VS_BT,
    PARETO_WITH_N,
    RELIABILITY_VS_CONSTANT,
    RERUN,
    RMBENCH_WITH_N,
    TRACKING,
)

KL_TEST = "tests/unit/test_beta_elbo.py::test_interior_optimum_where_bt_runs_to_infinity"
FLIPPED = ("harmless-flipped", "helpful-flipped")
DEFAULTS = ("harmless", "helpful")
PARETO_SCOPE = "rm-bench safety respond/refuse"
CALIBRATION_SCOPE = "moralchoice/low"


def _est(rec: Mapping[str, Any] | None) -> tuple[float | None, Any]:
    rec = rec or {}
    return rec.get("mean"), rec.get("ci")


def _mean(rec: Mapping[str, Any] | None) -> float | None:
    value = (rec or {}).get("mean")
    return None if value is None else float(value)


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _ci_text(ci: Any) -> str:
    return f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "(no CI)"


def _rerun(what: str) -> str:
    return f"{what} is not in the committed summary; it needs `{RERUN}`"


def _legacy(summary: Mapping[str, Any], starts: str) -> Mapping[str, Any] | None:
    """A claim record of an earlier summary (its `claims` list) whose claim text starts with `starts`."""
    return next((c for c in summary.get("claims", []) if str(c.get("claim", "")).startswith(starts)), None)


def _n_max(steer: Mapping[str, Any]) -> int:
    return int(steer.get("n_max", N_MAX))


def _ece_note(cal: Mapping[str, Any]) -> str:
    """The paper's measure beside ours: ECE at the low and the high N, at N=0 and of BT (a constant passes ECE)."""
    by_n = cal.get("by_n", {})
    parts = [
        f"ECE N={n} {_mean(by_n[str(n)]['ece']):.3f}"
        for n in (0, cal.get("n_low", N_CALIBRATION_FROM), cal.get("n_high", N_MAX))
        if "ece" in by_n.get(str(n), {})
    ]
    if "ece" in cal.get("bt", {}):
        parts.append(f"BT {_mean(cal['bt']['ece']):.3f}")
    return ", ".join(parts)


def _calibration(cal: Mapping[str, Any] | None, seeds: int) -> list[ClaimResult]:
    claims = (TRACKING, RELIABILITY_VS_CONSTANT, CALIBRATION_WITH_N)
    if not cal:
        return [not_run(c, _rerun("the calibration protocol"), scope=CALIBRATION_SCOPE) for c in claims]
    high = cal.get("by_n", {}).get(str(cal.get("n_high", N_MAX)), {})
    if "reliability_slope" not in high:
        low = cal.get("by_n", {}).get("0", {})
        why = _rerun("the reliability of mu across the demonstrated rates (slope and MAE, against a constant and BT)")
        if "ece" in high and "ece" in low and "bt" in cal:
            why = (
                f"the committed summary holds ECE only, which a constant forecast passes (N=0 "
                f"{_mean(low['ece']):.3f}, BT {_mean(cal['bt']['ece']):.3f}, N={N_MAX} {_mean(high['ece']):.3f}); "
                + why
            )
        return [not_run(c, why, scope=CALIBRATION_SCOPE) for c in claims]
    bt = cal.get("bt", {}).get("reliability_slope")
    return [
        interval_result(
            TRACKING,
            *_est(high["reliability_slope"]),
            scope=CALIBRATION_SCOPE,
            seeds=seeds,
            evidence=f"BT {_mean(bt):.3f}, constant 0" if bt else "constant 0",
        ),
        interval_result(
            RELIABILITY_VS_CONSTANT,
            *_est(cal["mae_high_minus_constant"]),
            scope=CALIBRATION_SCOPE,
            seeds=seeds,
            evidence=f"constant's MAE {cal['constant']['reliability_mae']:.3f}",
        ),
        interval_result(
            CALIBRATION_WITH_N,
            *_est(cal["mae_low_minus_high"]),
            scope=CALIBRATION_SCOPE,
            seeds=seeds,
            evidence=_ece_note(cal),
        ),
    ]


def _rmbench(summary: Mapping[str, Any], rb: Mapping[str, Any] | None, seeds: int) -> list[ClaimResult]:
    if not rb:
        return [not_run(RMBENCH_WITH_N, _rerun("the rmbench protocol"))]
    out: list[ClaimResult] = []
    if "change" in rb:
        for group, rec in rb["change"].items():
            note = (
                "every prompt weighted alike"
                if group == "overall"
                else "each subset weighted alike"
                if group == "mean of subsets"
                else ""
            )
            out.append(
                interval_result(RMBENCH_WITH_N, *_est(rec), scope=_rmbench_scope(group), seeds=seeds, evidence=note)
            )
        return out
    legacy = _legacy(summary, "RM-Bench accuracy rises with N")
    for group, v in rb.get("accuracy", {}).items():
        icrm = v.get("icrm", {})
        point = _diff(_mean(icrm.get(str(N_MAX), {}).get("avg")), _mean(icrm.get(str(N_RMBENCH_FROM), {}).get("avg")))
        if group == "overall" and legacy and legacy.get("ci"):
            out.append(
                interval_result(
                    RMBENCH_WITH_N,
                    legacy["mean"],
                    legacy["ci"],
                    scope="rm-bench overall",
                    seeds=seeds,
                    evidence="every prompt weighted alike (subsets by their prompt counts)",
                )
            )
        else:
            out.append(
                point_only(
                    RMBENCH_WITH_N,
                    point,
                    _rerun("the paired interval of this subset's change"),
                    scope=_rmbench_scope(group),
                    seeds=seeds,
                )
            )
    return out


def _rmbench_scope(group: str) -> str:
    """ "rm-bench/chat" for a subset, "rm-bench overall" / "rm-bench mean of subsets" for a grouping."""
    return group if group.startswith("rm-bench/") else f"rm-bench {group}"


def _pareto_points(pa: Mapping[str, Any]) -> tuple[dict[int, float], int | None]:
    means = {int(n): float(v["mean"]) for n, v in pa.get("hypervolume", {}).items() if v.get("mean") is not None}
    return means, (max(means, key=lambda n: means[n]) if means else None)


def icrm_claim_results(summary: Mapping[str, Any]) -> list[ClaimResult]:
    """Every ICRM paper claim from the summary dict (its `protocols`, `seeds` and, for an earlier summary, its
    `claims`)."""
    p = summary.get("protocols", {})
    seeds = len(summary.get("seeds", []))
    out: list[ClaimResult] = []
    steer = p.get("steerability") or {}
    n_max = _n_max(steer)
    for std in FLIPPED:
        acc = steer.get("accuracy", {}).get(std, {})
        icrm = acc.get("icrm", {}).get(str(n_max))
        if not icrm or icrm.get("mean") is None:
            out.append(not_run(FLIPPED_VS_BT, _rerun("the steerability protocol"), scope=f"pku-saferlhf {std}"))
            continue
        ci = icrm.get("ci")
        beside = [f"ICRM at N={n_max} {float(icrm['mean']):.1f}%"]
        if acc.get("icrm", {}).get("0"):
            beside.append(f"N=0 {_mean(acc['icrm']['0']):.1f}%")
        if acc.get("bt"):
            beside.append(f"BT {_mean(acc['bt']):.1f}%")
        if acc.get(f"icrm_n{n_max}_minus_bt"):
            gap = acc[f"icrm_n{n_max}_minus_bt"]
            beside.append(f"ICRM - BT {_mean(gap):.1f} {_ci_text(gap.get('ci'))}")
        out.append(
            interval_result(
                FLIPPED_VS_BT,
                float(icrm["mean"]) - 50.0,
                [ci[0] - 50.0, ci[1] - 50.0] if ci else None,
                scope=f"pku-saferlhf {std}",
                seeds=seeds,
                evidence="; ".join(beside),
            )
        )
    out += _calibration(p.get("calibration"), seeds)
    out += _rmbench(summary, p.get("rmbench"), seeds)
    pa = p.get("pareto")
    if pa:
        means, peak = _pareto_points(pa)
        peak_note = f"the curve of mean hypervolumes peaks at N={pa.get('peak_n', peak)}"
        if "high_minus_low" in pa:
            out.append(
                interval_result(
                    PARETO_WITH_N, *_est(pa["high_minus_low"]), scope=PARETO_SCOPE, seeds=seeds, evidence=peak_note
                )
            )
        else:
            out.append(
                point_only(
                    PARETO_WITH_N,
                    _diff(means.get(N_MAX), means.get(1)),
                    f"{peak_note}; " + _rerun("the paired interval (hypervolume resampled from per-pair correctness)"),
                    scope=PARETO_SCOPE,
                    seeds=seeds,
                )
            )
    else:
        out.append(not_run(PARETO_WITH_N, _rerun("the pareto protocol"), scope=PARETO_SCOPE))
    out.append(
        not_run(
            MATH500_RL,
            "no policy was trained with either reward (needs a policy and its RL training, "
            "which this repository does not run)",
            scope="math-500",
        )
    )
    out.append(exact_result(KL_INTERIOR, KL_TEST))
    return out


def icrm_own_results(summary: Mapping[str, Any]) -> list[ClaimResult]:
    """The project's own questions: the flipped standards' share of a directly trained ceiling, the cost on the
    default standards, the frontier against BT's point and the MATH-500 verifier proxy."""
    p = summary.get("protocols", {})
    seeds = len(summary.get("seeds", []))
    steer = p.get("steerability") or {}
    acc = steer.get("accuracy", {})
    n_max = _n_max(steer)
    out: list[ClaimResult] = []
    for std in FLIPPED:
        rec = acc.get(std, {})
        if "share_of_ceiling" in rec:
            out.append(
                interval_result(
                    FLIPPED_SHARE,
                    *_est(rec["share_of_ceiling"]),
                    scope=f"pku-saferlhf {std}",
                    seeds=seeds,
                    evidence=f"ceiling {rec['ceiling']['mean']:.1f}%, ICRM {rec['icrm'][str(n_max)]['mean']:.1f}%",
                )
            )
        else:
            out.append(
                not_run(
                    FLIPPED_SHARE,
                    _rerun("the ceiling (the BT backbone trained on the flipped labels)"),
                    scope=f"pku-saferlhf {std}",
                )
            )
    for std in DEFAULTS:
        rec = acc.get(std, {}).get(f"icrm_n{n_max}_minus_bt")
        out.append(
            interval_result(DEFAULT_COST, *_est(rec), scope=f"pku-saferlhf {std}", seeds=seeds)
            if rec
            else not_run(DEFAULT_COST, _rerun("the steerability protocol"), scope=f"pku-saferlhf {std}")
        )
    pa = p.get("pareto") or {}
    if "high_minus_bt" in pa:
        out.append(interval_result(PARETO_VS_BT, *_est(pa["high_minus_bt"]), scope=PARETO_SCOPE, seeds=seeds))
    else:
        means, _ = _pareto_points(pa)
        out.append(
            point_only(
                PARETO_VS_BT,
                _diff(means.get(N_MAX), _mean(pa.get("bt_hypervolume"))),
                _rerun("the paired interval against BT's point"),
                scope=PARETO_SCOPE,
                seeds=seeds,
            )
        )
    ma = p.get("math500") or {}
    proxy = ma.get("icrm_minus_bt") or (_legacy(summary, "ICRM reward beats a BT RM") or {}).get("proxy")
    if proxy:
        out.append(interval_result(MATH500_PROXY, *_est(proxy), scope="math-500", seeds=seeds))
    else:
        out.append(not_run(MATH500_PROXY, _rerun("the math500 protocol"), scope="math-500"))
    return out
