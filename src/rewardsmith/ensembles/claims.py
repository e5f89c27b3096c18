"""The questions `experiments/ensembles.py` answers, declared before its run (rewardsmith.claims): does an ensemble
of reward models beat its best member, does its members' disagreement predict its errors, do K heads on one shared
backbone give the same at a fraction of the cost, and does a conservative rule (worst case, uncertainty-weighted)
over-optimise less in best-of-n. The literature (Coste et al. 2023 on best-of-n and PPO; Eisenstein et al. 2023 on
reward hacking) motivates them; its figures are on other models and data, so each is the project's own question
here. Bars are written here; results come from docs/results/ensembles.json (ensembles/claim_results.py). Committed
in 6cb1759 and unchanged since, before the experiment's script (40e4c6b) and its results (82521c0)."""

from __future__ import annotations

from rewardsmith.claims import Claim

SOURCE = "src/rewardsmith/ensembles/claims.py"

BEATS_BEST_MEMBER = Claim(
    "ensembles",
    "ens.a",
    "An ensemble of K reward models is more accurate than its best member.",
    "accuracy of the ensemble (mean rule) - accuracy of the member with the best validation accuracy, points, paired "
    "over the pairs of each held-out or shift set (95% CI)",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
)
DOUBT_PREDICTS_ERRORS = Claim(
    "ensembles",
    "ens.b",
    "The members' disagreement about a pair predicts the ensemble's errors.",
    "AUROC of the sd across members of the standardised margin for telling the ensemble's wrong pairs from its right "
    "ones (95% CI over pairs); 0.5 = no information",
    bar=0.5,
    bar_source=SOURCE,
    own=True,
)
DOUBT_BEATS_MARGIN = Claim(
    "ensembles",
    "ens.c",
    "The members' disagreement predicts errors better than one model's own margin does.",
    "AUROC of the ensemble's sd (for its errors) - AUROC of the best member's -|margin| (for its errors), paired "
    "over pairs (95% CI)",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
)
HEADS_MATCH = Claim(
    "ensembles",
    "ens.d",
    "K heads on one shared backbone give the accuracy of K separately trained members at about one member's "
    "scoring cost.",
    "accuracy of the shared-backbone heads (mean rule) - accuracy of the seed ensemble (mean rule), points, paired "
    "over pairs (95% CI); kept when the CI lies above -1 point (within one point or better)",
    bar=-1.0,
    bar_source=SOURCE,
    own=True,
)
CONSERVATIVE_OVEROPTIMISES_LESS = Claim(
    "ensembles",
    "ens.e",
    "A conservative rule (worst case or uncertainty-weighted) over-optimises less than the mean in best-of-n "
    "(Coste et al. 2023).",
    "(conservative - mean) of gold@16 - gold at the validation peak, paired over the test prompts (95% CI); above 0: "
    "the conservative rule loses less after its peak",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
)
ENSEMBLE_RAISES_GOLD_MORE = Claim(
    "ensembles",
    "ens.f",
    "Best-of-n by an ensemble raises the gold more than best-of-n by one of its members.",
    "gold@16 of the ensemble's choice - gold@16 of the best-validation member's choice, paired over prompts (95% CI)",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
)
CLAIMS = (
    BEATS_BEST_MEMBER,
    DOUBT_PREDICTS_ERRORS,
    DOUBT_BEATS_MARGIN,
    HEADS_MATCH,
    CONSERVATIVE_OVEROPTIMISES_LESS,
    ENSEMBLE_RAISES_GOLD_MORE,
)
