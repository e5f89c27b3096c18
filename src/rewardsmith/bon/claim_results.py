"""The results of bon/claims.py from the committed docs/results/bon.json (experiments/bon.py summarise): built here,
rendered by tools/blocks_bon.py; no verdict is made anywhere else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.bon.claims import ACCURACY_RANKS_POLICY, ICRM_RESISTS, OVEROPTIMISES, RAISES_GOLD
from rewardsmith.bon.estimate import LENGTH, ORACLE
from rewardsmith.claims import HELD, INCONCLUSIVE, NOT_HELD, ClaimResult, interval_result, not_run, record_result

NAIVE, ANCHOR, ICRM_DEMOS, BT = "w2s-naive", "w2s-anchor", "icrm+demos", "bt-baseline"


def _ci(entry: Mapping[str, Any] | None) -> tuple[float | None, list[float | None] | None]:
    if not entry:
        return None, None
    return entry.get("estimate"), [entry.get("low"), entry.get("high")]


def _proxies(d: Mapping[str, Any], gold: str) -> list[str]:
    return [s for s in d["golds"][gold]["selectors"] if s not in (LENGTH, ORACLE)]


def _paired(d: Mapping[str, Any], gold: str, a: str, b: str) -> tuple[dict[str, Any] | None, float]:
    """The paired entry of proxies a and b (labels) and the sign that makes it a - b."""
    for pair in d["golds"][gold]["paired"]:
        if (pair["a"], pair["b"]) == (a, b):
            return pair, 1.0
        if (pair["a"], pair["b"]) == (b, a):
            return pair, -1.0
    return None, 1.0


def _signed(entry: Mapping[str, Any] | None, sign: float) -> tuple[float | None, list[float | None] | None]:
    value, ci = _ci(entry)
    if value is None or ci is None or None in ci:
        return value, ci
    low, high = float(ci[0]), float(ci[1])  # type: ignore[arg-type]
    return sign * value, [min(sign * low, sign * high), max(sign * low, sign * high)]


def _sign(ci: list[float | None] | None) -> int:
    """+1 / -1 when the interval lies above / below 0, else 0."""
    if not ci or None in ci:
        return 0
    return 1 if float(ci[0]) > 0 else -1 if float(ci[1]) < 0 else 0  # type: ignore[arg-type]


def bon_claim_results(d: Mapping[str, Any]) -> list[ClaimResult]:
    """Every claim of bon/claims.py on every gold (and proxy, where the claim is per proxy)."""
    labels = d.get("proxy_labels", {})
    names = {label: name for name, label in labels.items()}  # the run's labels -> the experiment's proxy names
    out: list[ClaimResult] = []
    n_max = d["ns"][-1]
    for gold, block in d["golds"].items():
        for proxy in _proxies(d, gold):
            entry = block["selectors"][proxy]
            scope = f"{gold}: {names.get(proxy, proxy)}"
            out.append(record_result(RAISES_GOLD, entry["gain_over_random"], scope=scope, unit="prompts"))
        for proxy in _proxies(d, gold):
            over = block["selectors"][proxy]["overoptimisation"]
            scope = f"{gold}: {names.get(proxy, proxy)}"
            if over.get("drop") is None:
                out.append(not_run(OVEROPTIMISES, over["verdict"], scope=scope))
                continue
            note = f"peak at n = {over['peak_n']} on the validation prompts" + (
                " (N itself: nothing after it to fall)" if over["peak_n"] == n_max else ""
            )
            out.append(record_result(OVEROPTIMISES, over["drop"], scope=scope, evidence=note, unit="prompts"))
        out.append(_ranks(d, gold, labels))
        out.append(_icrm(d, gold, labels))
    return out


def _ranks(d: Mapping[str, Any], gold: str, labels: Mapping[str, str]) -> ClaimResult:
    """bon.c on one gold: the sign of ANCHOR - naive pair accuracy (ID test, paired) against that of gold@N."""
    students = d.get("students") or {}
    if NAIVE not in labels or ANCHOR not in labels or not students:
        return not_run(ACCURACY_RANKS_POLICY, "the students were not in this run", scope=gold)
    pair, sign = _paired(d, gold, labels[ANCHOR], labels[NAIVE])
    if pair is None:
        return not_run(ACCURACY_RANKS_POLICY, "no paired estimate", scope=gold)
    value, ci = _signed(pair["gold_diff_at_n"][-1], sign)
    accuracy = students["anchor_minus_naive_id"]
    acc_sign, gold_sign = _sign(accuracy["ci"]), _sign(ci)
    verdict = HELD if acc_sign and acc_sign == gold_sign else NOT_HELD if acc_sign and gold_sign else INCONCLUSIVE
    low, high = accuracy["ci"]
    evidence = (
        f"pair accuracy ANCHOR - naive on {students['source']} ID test: {accuracy['estimate']:.1f} "
        f"[{low:.1f}, {high:.1f}] points; the row's figure is ANCHOR - naive gold@{d['ns'][-1]}"
    )
    return ClaimResult(
        ACCURACY_RANKS_POLICY,
        verdict,
        gold,
        value,
        (float(ci[0]), float(ci[1])) if ci and None not in ci else None,  # type: ignore[arg-type]
        evidence=evidence,
    )


def _icrm(d: Mapping[str, Any], gold: str, labels: Mapping[str, str]) -> ClaimResult:
    """bon.d on one gold: (ICRM with demonstrations - BT baseline) of the drop after the validation peak."""
    if ICRM_DEMOS not in labels or BT not in labels:
        return not_run(ICRM_RESISTS, "the ICRM or its BT baseline was not in this run", scope=gold)
    pair, sign = _paired(d, gold, labels[ICRM_DEMOS], labels[BT])
    if pair is None or pair.get("drop_diff") is None:
        return not_run(ICRM_RESISTS, "no paired drop (too few prompts for a validation half)", scope=gold)
    value, ci = _signed(pair["drop_diff"], sign)
    n_max = d["ns"][-1]
    peaks = [d["golds"][gold]["selectors"][labels[k]]["overoptimisation"].get("peak_n") for k in (ICRM_DEMOS, BT)]
    note = (
        f"both peak at n = {n_max} on the validation prompts: neither falls after its peak, so there is nothing to "
        "compare"
        if all(p == n_max for p in peaks)
        else f"validation peaks: ICRM n = {peaks[0]}, BT n = {peaks[1]}"
    )
    n = pair["drop_diff"].get("n")
    return interval_result(ICRM_RESISTS, value, ci, scope=gold, evidence=note, n=n, unit="prompts")
