"""The results of ensembles/claims.py from the committed docs/results/ensembles.json (experiments/ensembles.py
summarise): built here, rendered by tools/blocks_ensembles.py; no verdict is made anywhere else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.claims import ClaimResult, not_run, record_result
from rewardsmith.ensembles.claims import (
    BEATS_BEST_MEMBER,
    CONSERVATIVE_OVEROPTIMISES_LESS,
    DOUBT_BEATS_MARGIN,
    DOUBT_PREDICTS_ERRORS,
    ENSEMBLE_RAISES_GOLD_MORE,
    HEADS_MATCH,
)

KINDS = {"seeds": "seeds", "boot": "seeds + bootstraps"}


def _interval(
    claim: Any, entry: Mapping[str, Any] | None, scope: str, evidence: str = "", unit: str = "pairs"
) -> ClaimResult:
    return record_result(claim, entry, scope=scope, evidence=evidence, unit=unit, missing="not in this run")


def proxy_label(d: Mapping[str, Any], source: str) -> str | None:
    """The bon run's label of a proxy source (an ensemble of rules/<kind>-<rule>, or a member's model folder)."""
    for path, label in d["bon"]["proxy_labels"].items():
        if path.rstrip("/").endswith(source):
            return str(label)
    return None


def gold_name(gold: str) -> str:
    """A gold as a reader knows it: the verifiable ones by name, a reward model as the learned gold."""
    return gold if gold in ("ifeval", "math") else f"learned gold ({gold})"


def _paired(d: Mapping[str, Any], gold: str, a: str, b: str) -> tuple[dict[str, Any] | None, float]:
    for pair in d["bon"]["golds"][gold]["paired"]:
        if (pair["a"], pair["b"]) == (a, b):
            return pair, 1.0
        if (pair["a"], pair["b"]) == (b, a):
            return pair, -1.0
    return None, 1.0


def _signed(entry: Mapping[str, Any] | None, sign: float) -> dict[str, Any] | None:
    if not entry or entry.get("estimate") is None:
        return None
    low, high = entry.get("low"), entry.get("high")
    ci = None if low is None or high is None else sorted([sign * low, sign * high])
    return {"estimate": sign * entry["estimate"], "ci": ci, "n": entry.get("n")}


def ensemble_claim_results(d: Mapping[str, Any]) -> list[ClaimResult]:
    """Every claim of ensembles/claims.py on every set (and kind of member, gold and rule where it applies)."""
    out: list[ClaimResult] = []
    sets = d["sets"]
    for kind, name in KINDS.items():
        for scope, entry in sets.items():
            out.append(
                _interval(
                    BEATS_BEST_MEMBER, entry["paired"].get(f"{kind} mean - {kind} best member"), f"{scope}: {name}"
                )
            )
    for kind, name in KINDS.items():
        for scope, entry in sets.items():
            doubt = entry["models"][f"{kind} mean"]["doubt"]
            estimate = {"estimate": doubt["error_auroc"], "ci": doubt["error_auroc_ci"]}
            out.append(_interval(DOUBT_PREDICTS_ERRORS, estimate, f"{scope}: {name}"))
    for kind, name in KINDS.items():
        for scope, entry in sets.items():
            paired = entry["paired"].get(f"{kind} mean auroc - {kind} best member auroc")
            out.append(_interval(DOUBT_BEATS_MARGIN, paired, f"{scope}: {name}"))
    for scope, entry in sets.items():
        out.append(_interval(HEADS_MATCH, entry["paired"].get("heads mean - seeds mean"), scope))
    out += _bon_results(d)
    return out


def _bon_results(d: Mapping[str, Any]) -> list[ClaimResult]:
    out: list[ClaimResult] = []
    n_max = d["bon"]["ns"][-1]
    for gold, block in d["bon"]["golds"].items():
        shown = gold_name(gold)
        for kind, name in KINDS.items():
            mean = proxy_label(d, f"rules/{kind}-mean")
            for rule in ("min", "uwo"):
                scope = f"{shown}: {name}, {rule} - mean"
                other = proxy_label(d, f"rules/{kind}-{rule}")
                if mean is None or other is None:
                    out.append(not_run(CONSERVATIVE_OVEROPTIMISES_LESS, "not in this run", scope=scope))
                    continue
                pair, sign = _paired(d, gold, other, mean)
                peaks = [block["selectors"][x]["overoptimisation"].get("peak_n") for x in (other, mean)]
                if pair is None or pair.get("drop_diff") is None:
                    out.append(not_run(CONSERVATIVE_OVEROPTIMISES_LESS, "no paired drop", scope=scope))
                    continue
                note = (
                    f"both peak at n = {n_max} on the validation prompts: neither falls after its peak"
                    if all(p == n_max for p in peaks)
                    else f"validation peaks: {rule} n = {peaks[0]}, mean n = {peaks[1]}"
                )
                out.append(
                    _interval(CONSERVATIVE_OVEROPTIMISES_LESS, _signed(pair["drop_diff"], sign), scope, note, "prompts")
                )
        for kind, name in KINDS.items():
            scope = f"{shown}: {name}"
            mean = proxy_label(d, f"rules/{kind}-mean")
            member = proxy_label(d, f"{d['best_member'][kind]}/model")
            pair, sign = _paired(d, gold, mean, member) if mean and member else (None, 1.0)
            if pair is None:
                out.append(not_run(ENSEMBLE_RAISES_GOLD_MORE, "not in this run", scope=scope))
                continue
            out.append(
                _interval(ENSEMBLE_RAISES_GOLD_MORE, _signed(pair["gold_diff_at_n"][-1], sign), scope, unit="prompts")
            )
    return out
