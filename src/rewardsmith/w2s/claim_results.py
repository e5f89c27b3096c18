"""The results of the weak-to-strong claims (rewardsmith.w2s.claims) built from shift metrics (a run's metrics.json
or its committed copy in docs/results/): per source and per target, never averaged over targets. The metrics carry
every contrast a claim is judged on (`claim_statistics`, rewardsmith.w2s.metrics.claim_statistics); this module
only reads them and applies the bars declared there (w2s/claims.py says when each was written).

Metrics written before `claim_statistics` existed hold each method's levels and its paired difference to naive but
not the contrasts of (a), (b) and (d): those claims are "not run" there, with the point the levels give (a
difference of means over the same seeds and pairs, shown, never judged) and the command that produces the interval.
What the older metrics do hold is used as is: WRG and its CI (a), WRG(lambda_max) - WRG(naive) as the strongest
anchor's paired ID difference to naive (the same teacher, so the WRG difference is the accuracy difference) (c)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rewardsmith.claims import NOT_RUN, ClaimResult, interval_result, majority_result, not_run, point_only
from rewardsmith.w2s.claims import (
    ANCHOR_BEST_MOST,
    ANCHOR_BEST_NTS,
    ANCHOR_OOD,
    CONFIDENCE_ID,
    DEBIAS_CHOICE_SETS,
    DEBIASED_OOD,
    EQUAL_TO_NAIVE_SHARE,
    GAIN_LOST_OOD,
    LAST_LAYER,
    MIN_TEACHER_GAP,
    PAPER_FORM_METHOD,
    PAPER_FORM_OOD,
    RERUN,
    RERUN_PAPER_FORM,
    RERUN_SWEEP,
    SEAM_ID,
    TEACHER_GAP,
    TOO_STRONG,
    TRADE_OFF,
    WRG_POSITIVE,
)
from rewardsmith.w2s.metrics import ID_SPLIT, NAIVE, VAL_SPLIT

Metrics = Mapping[str, Any]


def _scope(source: str, split: str) -> str:
    return f"{source}: {'ID test' if split == ID_SPLIT else split}"


def _from(stat: Mapping[str, Any] | None, key: str) -> tuple[float | None, Any]:
    rec = (stat or {}).get(key) or {}
    return rec.get("value"), rec.get("ci")


def _anchor_method(m: Metrics) -> str | None:
    """The ANCHOR method judged: the validation choice among the last-layer strengths."""
    chosen = m.get("claim_statistics", {}).get("anchor", {}).get("method")
    if chosen:
        return str(chosen)
    last = next((s for s in m.get("anchor_selection", []) if s.get("layers") == [1.0]), None)
    return None if last is None else str(last["chosen"])


def _level(m: Metrics, method: str, key: str) -> float | None:
    value = m.get("methods", {}).get(method, {}).get(key)
    return None if value is None else float(value)


def _rerun(what: str, command: str = RERUN) -> str:
    return f"{what} is not in the committed metrics; it needs `{command}`"


def paper_claims(headline: Metrics, sweep: Metrics | None = None, layer: Metrics | None = None) -> list[ClaimResult]:
    """Claims (a)-(d) of one source. headline: the run with the paper's methods (naive, confidence, SEAM, ANCHOR
    at its validation strength); sweep: the anchor-strength sweep on the same source, layer: the last against the
    middle layer at the sweep's choice, or None (then (c) and (d) are "not run" for this source)."""
    source, targets = headline["name"], headline["targets"]
    seeds = len(headline["seeds"])
    stats = headline.get("claim_statistics", {})
    naive = headline["methods"].get(NAIVE, {})
    out = [
        interval_result(
            WRG_POSITIVE, naive.get("wrg"), naive.get("wrg_ci"), scope=_scope(source, ID_SPLIT), seeds=seeds
        )
    ]
    for t in targets:
        if "gain_lost" in stats:
            out.append(
                interval_result(GAIN_LOST_OOD, *_from(stats["gain_lost"], t), scope=_scope(source, t), seeds=seeds)
            )
        else:
            wrg, aog = _level(headline, NAIVE, "wrg"), _level(headline, NAIVE, f"aog.{t}")
            out.append(
                point_only(
                    GAIN_LOST_OOD,
                    None if wrg is None or aog is None else wrg - aog,
                    _rerun("the paired interval of WRG - AOG"),
                    scope=_scope(source, t),
                    seeds=seeds,
                )
            )
    best = stats.get("anchor_vs_best_other")
    anchor = _anchor_method(headline)
    others = [m for m in (NAIVE, "confidence", "seam") if m in headline["methods"]]
    per_target = []
    for t in targets:
        if best is not None:
            per_target.append(
                interval_result(
                    ANCHOR_BEST_NTS,
                    *_from(best, t),
                    scope=_scope(source, t),
                    seeds=seeds,
                    evidence=f"{anchor} against the best of {', '.join(best['others'])}",
                )
            )
        elif anchor is None or not others:
            per_target.append(
                not_run(ANCHOR_BEST_NTS, "the run has no ANCHOR method or no other method", scope=_scope(source, t))
            )
        else:
            levels = [_level(headline, m, f"nts.{t}") for m in others]
            mine = _level(headline, anchor, f"nts.{t}")
            point = None if mine is None or None in levels else mine - max(x for x in levels if x is not None)
            per_target.append(
                point_only(
                    ANCHOR_BEST_NTS,
                    point,
                    f"{anchor} against the best of {', '.join(others)}; "
                    + _rerun("the interval (the max taken inside each replicate)"),
                    scope=_scope(source, t),
                    seeds=seeds,
                )
            )
    out += per_target
    out.append(_most(per_target, f"{source}: {len(targets)} targets"))
    out += sweep_claims(sweep, layer, source, targets)
    return out


def _most(per_target: list[ClaimResult], scope: str) -> ClaimResult:
    """Claim (b) over the targets; on points only, how many favour ANCHOR (not judged)."""
    if per_target and all(r.verdict == NOT_RUN for r in per_target):
        points = [r.estimate for r in per_target if r.estimate is not None]
        note = (
            f"on the points ANCHOR's NTS is the highest on {sum(p > 0 for p in points)} of {len(points)} targets; "
            if points
            else ""
        )
        return not_run(ANCHOR_BEST_MOST, note + "judged once every target has its interval", scope=scope)
    return majority_result(ANCHOR_BEST_MOST, per_target, scope=scope)


def sweep_claims(sweep: Metrics | None, layer: Metrics | None, source: str, targets: list[str]) -> list[ClaimResult]:
    """(c) the strength trade-off from the sweep's metrics and (d) last versus middle layer from the layer run's."""
    if sweep is None:
        why = "no anchor-strength sweep on this source (the paper's trade-off is tested on harmless)"
        return (
            [not_run(TRADE_OFF, why, scope=_scope(source, t)) for t in targets]
            + [not_run(TOO_STRONG, why, scope=_scope(source, ID_SPLIT))]
            + [not_run(LAST_LAYER, why, scope=_scope(source, t)) for t in targets]
        )
    stats = sweep.get("claim_statistics", {})
    seeds = len(sweep["seeds"])
    anchor = _anchor_method(sweep)
    last: Mapping[str, Any] = next((s for s in sweep.get("anchor_selection", []) if s.get("layers") == [1.0]), {})
    chosen = f"lambda* = {last.get('weight', float('nan')):g} ({anchor})"
    out: list[ClaimResult] = []
    if "trade_off" in stats and _brackets(sweep):
        grid = stats.get("anchor_grid", {})
        out += [
            interval_result(
                TRADE_OFF,
                *_from(stats["trade_off"], t),
                scope=_scope(source, t),
                seeds=seeds,
                evidence=f"{chosen}; lambda_max {grid.get('strongest')}",
            )
            for t in targets
        ]
    else:
        why = _grid_note(sweep) + _rerun("a grid that brackets the validation optimum", RERUN_SWEEP)
        out += [not_run(TRADE_OFF, why, scope=_scope(source, t)) for t in targets]
    out.append(_too_strong(sweep, stats, source, seeds))
    middle = (layer or {}).get("claim_statistics", {}).get("last_minus_middle")
    for t in targets:
        if middle is not None:
            assert layer is not None
            out.append(
                interval_result(
                    LAST_LAYER,
                    *_from(middle, t),
                    scope=_scope(source, t),
                    seeds=len(layer["seeds"]),
                    evidence=f"{_anchor_method(layer)} against {middle['middle']} ({chosen})",
                )
            )
        else:
            out.append(_layer_points(sweep, anchor, source, t, seeds))
    return out


def _weights(m: Metrics) -> dict[str, float]:
    """The last-layer anchor strengths of a run: {method: normalised weight}."""
    return {
        x["name"]: float(x["anchor"]["weight"])
        for x in m.get("config", {}).get("methods", [])
        if x.get("objective") == "anchor"
        and list(x["anchor"].get("layers", [])) == [1.0]
        and x["anchor"].get("normalise")
    }


def _grid(sweep: Metrics) -> list[float]:
    """The strengths of the sweep's grid: every last-layer strength, and 0 where the sweep trained the naive student
    (strength 0 is part of the grid: the issue of a trade-off is whether some anchoring beats none)."""
    grid = list(_weights(sweep).values())
    if NAIVE in sweep.get("validation", {}):
        grid.append(0.0)
    return sorted(grid)


def _brackets(sweep: Metrics) -> bool:
    """The validation optimum lies strictly inside the grid: the choice has a strength below and one above it, and
    strength 0 (the naive student) does not score higher on validation (then the optimum is 0, the grid's edge)."""
    weights = _weights(sweep)
    chosen = _anchor_method(sweep)
    if chosen not in weights:
        return False
    validation = sweep.get("validation", {})
    naive = validation.get(NAIVE, {}).get("accuracy")
    best = validation.get(chosen, {}).get("accuracy")
    if naive is not None and best is not None and naive > best:
        return False
    grid = _grid(sweep)
    return grid[0] < weights[chosen] < grid[-1]


def _grid_note(sweep: Metrics) -> str:
    weights = _weights(sweep)
    chosen = _anchor_method(sweep)
    if not weights or chosen not in weights:
        return ""
    grid = ", ".join(f"{w:g}" for w in _grid(sweep))
    note = f"the committed grid ({grid}) has its validation optimum at "
    note += "its edge" if not _brackets(sweep) else "its inside"
    naive = sweep.get("validation", {}).get(NAIVE, {}).get("accuracy")
    best = sweep.get("validation", {}).get(chosen, {}).get("accuracy")
    if naive is not None and best is not None:
        strength = f"{chosen}, strength {weights[chosen]:g}"
        note += f" (validation accuracy of {strength}: {best:.1f}; naive, strength 0, {naive:.1f})"
    return note + "; "


def _too_strong(sweep: Metrics, stats: Mapping[str, Any], source: str, seeds: int) -> ClaimResult:
    scope = _scope(source, ID_SPLIT)
    if "too_strong" in stats:
        grid = stats.get("anchor_grid", {})
        return interval_result(
            TOO_STRONG,
            *_from(stats["too_strong"], ID_SPLIT),
            scope=scope,
            seeds=seeds,
            evidence=f"{grid.get('strongest')} against naive",
        )
    weights = _weights(sweep)
    if len(weights) < 2:
        return not_run(TOO_STRONG, "fewer than two anchor strengths", scope=scope)
    strongest = max(weights, key=lambda k: weights[k])
    d = sweep.get("vs_naive", {}).get(strongest, {})
    return interval_result(
        TOO_STRONG,
        d.get(f"d.{ID_SPLIT}"),
        d.get(f"d.{ID_SPLIT}_ci"),
        scope=scope,
        seeds=seeds,
        evidence=f"{strongest} against naive: their paired ID difference (one teacher, so the WRG difference)",
    )


def _layer_points(sweep: Metrics, anchor: str | None, source: str, target: str, seeds: int) -> ClaimResult:
    """(d) without a layer run: the point of an earlier sweep that trained the middle layer at the same strength."""
    why = _rerun("the last against the middle layer at the validation strength", RERUN_SWEEP)
    vs = sweep.get("vs_naive", {})
    middle = f"{anchor}-mid"
    if anchor in vs and middle in vs:
        a, b = vs[anchor].get(f"d.{target}"), vs[middle].get(f"d.{target}")
        point = None if a is None or b is None else float(a) - float(b)
        return point_only(
            LAST_LAYER,
            point,
            f"{anchor} against {middle}, each against naive; " + why,
            scope=_scope(source, target),
            seeds=seeds,
        )
    return not_run(LAST_LAYER, why, scope=_scope(source, target))


def naive_agreement(margins: Mapping[str, np.ndarray], method: str) -> dict[str, Any]:
    """How far `method`'s students lie from their same-seed naive students, from per-pair margins keyed
    `<model>/seed<k>/<split>` (docs/results/pairs/<run>.npz, each (N_split,)): per split and over all of them, the
    pairs whose correctness (rewardsmith.evaluate.metrics.pairwise_correct) differs, summed over seeds, and the
    largest |margin difference|; `identical`: the splits where correctness is the same on every pair of every seed.
    {} when the margins hold no student of `method` with a naive student of the same seed."""
    from rewardsmith.evaluate.metrics import pairwise_correct

    by_split: dict[str, dict[str, Any]] = {}
    seeds: set[str] = set()
    for key in sorted(margins):
        model, seed, split = key.split("/", 2)
        naive_key = f"{NAIVE}/{seed}/{split}"
        if model != method or naive_key not in margins:
            continue
        mine, naive = np.asarray(margins[key], np.float64), np.asarray(margins[naive_key], np.float64)
        row = by_split.setdefault(split, {"differing": 0, "pairs": 0, "max_abs_difference": 0.0})
        row["differing"] += int((pairwise_correct(mine) != pairwise_correct(naive)).sum())
        row["pairs"] += len(mine)
        row["max_abs_difference"] = max(row["max_abs_difference"], float(np.abs(mine - naive).max(initial=0.0)))
        seeds.add(seed)
    if not by_split:
        return {}
    for row in by_split.values():
        row["share"] = row["differing"] / row["pairs"]
    differing, pairs = sum(r["differing"] for r in by_split.values()), sum(r["pairs"] for r in by_split.values())
    return {
        "seeds": len(seeds),
        "differing": differing,
        "pairs": pairs,
        "share": differing / pairs,
        "max_share": max(r["share"] for r in by_split.values()),
        "max_abs_difference": max(r["max_abs_difference"] for r in by_split.values()),
        "identical": [split for split, r in by_split.items() if r["differing"] == 0],
        "by_split": by_split,
    }


def equal_to_naive(agreement: Mapping[str, Any]) -> bool:
    """The method is its naive student at this scale (EQUAL_TO_NAIVE_SHARE on every split; naive_agreement)."""
    return bool(agreement) and agreement["max_share"] < EQUAL_TO_NAIVE_SHARE


def paper_form_claims(
    run: Metrics | None, targets: list[str], agreement: Mapping[str, Any] | None = None
) -> list[ClaimResult]:
    """ANCHOR in the paper's form (plain masked MSE, lambda = 1e-4) minus naive on each target of the harmless
    protocol (configs/shift-harmless-paper.yaml, its own naive students); not run without that run. agreement: the
    run's naive_agreement from its committed margins; where it says the paper's form is its naive student at this
    scale (equal_to_naive), each row is "not run" with that evidence and its interval shown, not judged: a contrast
    between two equal students tests nothing."""
    d = (run or {}).get("vs_naive", {}).get(PAPER_FORM_METHOD)
    if not d:
        return [
            not_run(PAPER_FORM_OOD, _rerun("the paper's form", RERUN_PAPER_FORM), scope=_scope("harmless", t))
            for t in targets
        ]
    assert run is not None
    seeds = len(run["seeds"])
    out = []
    for t in run["targets"]:
        result = interval_result(
            PAPER_FORM_OOD,
            d.get(f"d.{t}"),
            d.get(f"d.{t}_ci"),
            scope=_scope(run["name"], t),
            seeds=seeds,
            evidence=PAPER_FORM_METHOD,
        )
        if agreement and equal_to_naive(agreement) and result.verdict != NOT_RUN:
            here = agreement["by_split"].get(t, {})
            result = ClaimResult(
                PAPER_FORM_OOD,
                NOT_RUN,
                result.scope,
                result.estimate,
                result.ci,
                seeds,
                f"equal to naive at this scale, so the row tests nothing: on this target {PAPER_FORM_METHOD}'s "
                f"correctness differs from its naive students' on {here.get('differing', 0)} of "
                f"{here.get('pairs', 0)} pair predictions ({agreement['seeds']} seeds), its margins by at most "
                f"{here.get('max_abs_difference', float('nan')):.3f} (all splits: below the table)",
                {"naive_agreement": dict(agreement)},
            )
        out.append(result)
    return out


def own_claims(headline: Metrics) -> list[ClaimResult]:
    """The project's own questions on one source's headline run."""
    source, targets = headline["name"], headline["targets"]
    seeds = len(headline["seeds"])
    vs, vs_lc = headline.get("vs_naive", {}), headline.get("vs_naive_length_controlled", {})
    out: list[ClaimResult] = []
    for claim, method in ((CONFIDENCE_ID, "confidence"), (SEAM_ID, "seam")):
        d = vs.get(method)
        out.append(
            interval_result(
                claim, d.get(f"d.{ID_SPLIT}"), d.get(f"d.{ID_SPLIT}_ci"), scope=_scope(source, ID_SPLIT), seeds=seeds
            )
            if d
            else not_run(claim, f"no {method} method in the run", scope=_scope(source, ID_SPLIT))
        )
    anchor = _anchor_method(headline)
    for t in targets:
        d = vs.get(anchor or "", {})
        out.append(
            interval_result(
                ANCHOR_OOD,
                d.get(f"d.{t}"),
                d.get(f"d.{t}_ci"),
                scope=_scope(source, t),
                seeds=seeds,
                evidence=anchor or "",
            )
            if d
            else not_run(ANCHOR_OOD, "no ANCHOR method in the run", scope=_scope(source, t))
        )
    debiased = [m for m in vs_lc if m.startswith(f"{NAIVE}-")]
    for method in debiased:
        out += [
            not_run(
                DEBIASED_OOD,
                f"{method}: the objective was chosen on validation pairs of {t} (experiments/debias.py), so this "
                "target is not independent of the choice",
                scope=_scope(source, t),
            )
            if t in DEBIAS_CHOICE_SETS
            else interval_result(
                DEBIASED_OOD,
                vs_lc[method].get(f"d.{t}"),
                vs_lc[method].get(f"d.{t}_ci"),
                scope=_scope(source, t),
                seeds=seeds,
                evidence=method,
            )
            for t in targets
        ]
    gap = headline.get("gap_ceiling_minus_teacher", {}).get(ID_SPLIT, {})
    out.append(
        interval_result(TEACHER_GAP, gap.get("value"), gap.get("ci"), scope=_scope(source, ID_SPLIT), seeds=seeds)
    )
    return out


def gap_search_result(ceiling: Sequence[np.ndarray], teacher: np.ndarray, n_boot: int = 2000) -> dict[str, Any]:
    """One setting of the gap search (GAP_SEARCH) judged from validation margins: the gap ceiling - teacher (points)
    with its hierarchical CI (the ceiling's seeds, then pairs, paired with the teacher's pairs), the teacher's
    accuracy and CI, whether the teacher is informative (its CI above 50%) and whether the setting reaches the bar
    (gap >= MIN_TEACHER_GAP, CI above 0, informative teacher)."""
    from rewardsmith.evaluate.metrics import pairwise_accuracy, pairwise_correct
    from rewardsmith.evaluate.transfer import paired_differences

    correct = {
        "ceiling": {VAL_SPLIT: np.stack([pairwise_correct(m) for m in ceiling])},
        "teacher": {VAL_SPLIT: pairwise_correct(teacher)},
    }
    gap = paired_differences(correct, "teacher", n_boot=n_boot)["ceiling"]
    acc = pairwise_accuracy(teacher, n_boot=n_boot)
    value, ci = float(gap[f"d.{VAL_SPLIT}"]), [float(x) for x in gap[f"d.{VAL_SPLIT}_ci"]]
    informative = bool(acc.low > 50.0)
    return {
        "teacher_val_acc": round(acc.estimate, 2),
        "teacher_val_acc_ci": [round(acc.low, 2), round(acc.high, 2)],
        "informative": informative,
        "gap": round(value, 2),
        "gap_ci": [round(x, 2) for x in ci],
        "reaches_bar": bool(informative and value >= MIN_TEACHER_GAP and ci[0] > 0),
    }
