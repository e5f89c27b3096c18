"""The ensemble experiment's verdicts (ensembles/claim_results.py) follow their CIs and the bars declared in
ensembles/claims.py, with paired best-of-n differences read in the declared direction."""

from __future__ import annotations

from rewardsmith.ensembles.claim_results import ensemble_claim_results


def _est(value: float, low: float, high: float) -> dict:
    return {"estimate": value, "ci": [low, high]}


def _model(auroc: tuple[float, float, float]) -> dict:
    return {"doubt": {"error_auroc": auroc[0], "error_auroc_ci": [auroc[1], auroc[2]]}}


def _results() -> dict:
    paired = {
        "seeds mean - seeds best member": _est(2.0, 0.5, 3.5),
        "boot mean - boot best member": _est(1.0, -1.0, 3.0),
        "seeds mean auroc - seeds best member auroc": _est(-0.2, -0.3, -0.1),
        "boot mean auroc - boot best member auroc": _est(0.0, -0.1, 0.1),
        "heads mean - seeds mean": _est(-5.0, -8.0, -2.0),
    }
    models = {"seeds mean": _model((0.6, 0.55, 0.65)), "boot mean": _model((0.4, 0.35, 0.45))}
    drop = {"estimate": 0.05, "low": 0.01, "high": 0.09}
    selectors = {label: {"overoptimisation": {"peak_n": 4}} for label in ("sm", "smin", "suwo", "m")}
    return {
        "sets": {"held-out": {"paired": paired, "models": models}},
        "best_member": {"seeds": "runs/ens/seeds/members/seed2", "boot": "runs/ens/boot/members/boot1"},
        "bon": {
            "ns": [1, 4, 16],
            "proxy_labels": {
                "runs/ens/rules/seeds-mean": "sm",
                "runs/ens/rules/seeds-min": "smin",
                "runs/ens/rules/seeds-uwo": "suwo",
                "runs/ens/seeds/members/seed2/model": "m",
            },
            "golds": {
                "gold": {
                    "selectors": selectors,
                    "paired": [
                        # stored as mean - min: the claim reads min - mean, so the sign flips
                        {"a": "sm", "b": "smin", "gold_diff_at_n": [], "drop_diff": {**drop}},
                        {"a": "suwo", "b": "sm", "gold_diff_at_n": [], "drop_diff": None},
                        {"a": "m", "b": "sm", "gold_diff_at_n": [{"estimate": -0.1, "low": -0.15, "high": -0.05}]},
                    ],
                }
            },
        },
    }


def test_verdicts_follow_the_cis_and_the_declared_direction() -> None:
    rows = {(r.claim.key, r.scope): r for r in ensemble_claim_results(_results())}
    assert rows[("ens.a", "held-out: seeds")].verdict == "held"
    assert rows[("ens.a", "held-out: seeds + bootstraps")].verdict == "inconclusive"
    assert rows[("ens.b", "held-out: seeds")].verdict == "held"  # AUROC CI above 0.5
    assert rows[("ens.b", "held-out: seeds + bootstraps")].verdict == "not held"
    assert rows[("ens.c", "held-out: seeds")].verdict == "not held"
    assert rows[("ens.d", "held-out")].verdict == "not held"  # CI below the -1 point bar
    flipped = rows[("ens.e", "learned gold (gold): seeds, min - mean")]
    assert flipped.estimate == -0.05 and flipped.ci == (-0.09, -0.01) and flipped.verdict == "not held"
    assert rows[("ens.e", "learned gold (gold): seeds, uwo - mean")].verdict == "not run"  # no paired drop
    assert rows[("ens.e", "learned gold (gold): seeds + bootstraps, min - mean")].verdict == "not run"
    gain = rows[("ens.f", "learned gold (gold): seeds")]
    assert gain.estimate == 0.1 and gain.verdict == "held"  # stored as member - mean
    assert rows[("ens.f", "learned gold (gold): seeds + bootstraps")].verdict == "not run"
