"""The results of testbed/claims.py from the committed docs/results/testbed.json (experiments/testbed.py summarise):
built here, rendered by tools/blocks_testbed.py; no verdict is made anywhere else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.claims import ClaimResult, not_run, record_result
from rewardsmith.stats import HELD, NOT_HELD
from rewardsmith.testbed.claims import (
    AGREEMENT_GROWS,
    BETA_FALLS,
    BREVITY_FIRES,
    CONSERVATIVE_LESS_OVEROPTIMISED,
    DOUBT_RISES,
    DOUBT_TELLS_ERRORS,
    HACKED_OVEROPTIMISED,
    HACKED_RL_OVEROPTIMISED,
    ICRM_RESISTS,
    MONITOR_FIRES,
    ORACLE_NOT_OVEROPTIMISED,
    PEAK_MOVES_RIGHT,
    hack_direction_against,
)

# The verdicts of bon/metrics.py that mean the gold was lost to the selector.
LOST = ("over-optimised", "misaligned")


def _outcome(claim: Any, held: bool, evidence: str, scope: str = "") -> ClaimResult:
    return ClaimResult(claim, HELD if held else NOT_HELD, scope, evidence=evidence)


def _drop(claim: Any, over: Mapping[str, Any] | None, scope: str) -> ClaimResult:
    """An over-optimisation claim judged on its drop (below 0 holds it), with the data-based verdict beside it; a
    validation peak at n = 1 (or a falling first step) is misaligned, not over-optimised: not held."""
    if not over or over.get("drop") is None:
        return not_run(claim, "no validation and test halves", scope=scope)
    verdict = over["verdict"]
    evidence = f"verdict: {verdict}; peak at {over.get('peak_n', over.get('peak_step'))}"
    if verdict == "misaligned":
        return ClaimResult(claim, NOT_HELD, scope, over["drop"]["estimate"], None, evidence=evidence)
    return record_result(claim, over["drop"], scope=scope, evidence=evidence, unit="prompts")


def rl_control_direction(hack: Mapping[str, Any]) -> str | None:
    """The length direction the RL control's labels prefer: its candidate's record, else the rule the testbed labels
    length candidates by (experiments/testbed.py hack_direction: against the gold's own preference on the validation
    pairs); None when neither is recorded."""
    control = (hack.get("candidates") or {}).get(hack.get("rl_control"), {})
    if control.get("direction"):
        return str(control["direction"])
    if control.get("pattern") is None and "gold_prefers_longer" in hack:
        return hack_direction_against(hack["gold_prefers_longer"], hack["gold_prefers_shorter"])
    return None


def _monitor_outcome(claim: Any, rule: str, rl: Mapping[str, Any]) -> ClaimResult:
    """Held when `rule` fired on the hacked arm and no rule on the gold's."""
    fired_hacked, fired_gold = rl["hacked"]["monitors_fired"], rl["gold"]["monitors_fired"]
    evidence = f"hacked arm fired: {', '.join(fired_hacked) or 'none'}; gold's arm: {', '.join(fired_gold) or 'none'}"
    return _outcome(claim, rule in fired_hacked and not fired_gold, evidence, f"the {rule} rule")


def _brevity_outcome(rl: Mapping[str, Any], direction: str) -> ClaimResult:
    """BREVITY_FIRES on both RL arms: judged only for a hack that prefers shorter responses, on arms whose server
    had the brevity rule."""
    if direction != "shorter":
        return not_run(BREVITY_FIRES, f"the RL control's hack prefers {direction} responses, not shorter")
    if not all("brevity" in rl[arm].get("monitor_rules", ()) for arm in ("hacked", "gold")):
        why = "the arms ran on a server without the brevity rule: `python experiments/testbed.py rl --arms hacked gold`"
        return not_run(BREVITY_FIRES, why, scope="the brevity rule")
    return _monitor_outcome(BREVITY_FIRES, "brevity", rl)


def testbed_claim_results(d: Mapping[str, Any]) -> list[ClaimResult]:
    """Every claim of testbed/claims.py on the committed results."""
    out: list[ClaimResult] = []
    selectors = d.get("bon", {}).get("selectors", {})
    oracle = selectors.get("oracle", {}).get("overoptimisation")
    if oracle is None:
        out.append(not_run(ORACLE_NOT_OVEROPTIMISED, "best-of-n not run"))
    else:
        verdict = oracle["verdict"]
        out.append(_outcome(ORACLE_NOT_OVEROPTIMISED, verdict not in LOST, f"verdict: {verdict}", "best-of-n"))
    out.append(_drop(HACKED_OVEROPTIMISED, selectors.get("hacked", {}).get("overoptimisation"), "best-of-n"))
    rl = d.get("rl", {})
    gold_key = next(iter(rl.get("hacked", {}).get("overoptimisation", {}) or {}), None)
    if "hacked" in rl and gold_key is not None:
        out.append(_drop(HACKED_RL_OVEROPTIMISED, rl["hacked"]["overoptimisation"][gold_key], "RL, hacked arm"))
    else:
        out.append(not_run(HACKED_RL_OVEROPTIMISED, "the hacked RL arm was not run", scope="RL, hacked arm"))
    if "gold" in rl:
        own = next(iter(rl["gold"]["overoptimisation"].values()), None) if rl["gold"]["overoptimisation"] else None
        if own is None:  # nothing judged is no evidence either way
            out.append(not_run(HACKED_RL_OVEROPTIMISED, "the gold's arm has no verdict", scope="RL, gold's arm"))
        else:
            verdict = own["verdict"]
            out.append(_outcome(HACKED_RL_OVEROPTIMISED, verdict not in LOST, f"verdict: {verdict}", "RL, gold's arm"))
    direction = rl_control_direction(d.get("hack", {}))
    if "hacked" in rl and "gold" in rl and direction:
        out.append(_monitor_outcome(MONITOR_FIRES, "length" if direction == "longer" else "shrinking", rl))
        out.append(_brevity_outcome(rl, direction))
    else:
        out += [not_run(c, "the hacked and gold RL arms were not both run") for c in (MONITOR_FIRES, BREVITY_FIRES)]
    doubt = d.get("ensembles", {}).get("doubt_at_pick", {}).get("with-hacked")
    out.append(record_result(DOUBT_RISES, doubt["rise"] if doubt else None, scope="best-of-n", unit="prompts"))
    agreement = d.get("agreement", {}).get("largest_minus_smallest")
    out.append(record_result(AGREEMENT_GROWS, agreement, scope="held-out pool pairs", unit="pairs"))
    scaling = d.get("scaling", {})
    out.append(record_result(BETA_FALLS, scaling.get("beta_smallest_minus_largest"), scope="best-of-n", unit="prompts"))
    out.append(
        record_result(
            PEAK_MOVES_RIGHT, scaling.get("inverse_peak_smallest_minus_largest"), scope="best-of-n", unit="prompts"
        )
    )
    ensembles = d.get("ensembles", {})
    for rule, entry in (ensembles.get("drop_vs_mean") or {}).items():
        out.append(record_result(CONSERVATIVE_LESS_OVEROPTIMISED, entry, scope=f"{rule} vs mean", unit="prompts"))
    if not ensembles.get("drop_vs_mean"):
        out.append(not_run(CONSERVATIVE_LESS_OVEROPTIMISED, "the ensembles were not run"))
    auroc = ensembles.get("auroc", {}).get("ens-mean")
    entry = {"estimate": auroc["error_auroc"], "ci": auroc["ci"]} if auroc else None
    out.append(record_result(DOUBT_TELLS_ERRORS, entry, scope="mean ensemble", unit="pairs"))
    icrm = d.get("icrm")
    if icrm:
        out.append(record_result(ICRM_RESISTS, icrm.get("drop_diff"), scope="best-of-n", unit="prompts"))
    else:
        out.append(not_run(ICRM_RESISTS, "the in-context model was not trained on the gold's labels in these runs"))
    return out
