"""The questions `experiments/bon.py` answers, declared before its run (rewardsmith.claims): does a reward model help
a policy by best-of-n, which over-optimise, does offline pair accuracy rank weak-to-strong students as the policy
probe does (the weak-to-strong paper's first limitation), and does the in-context model over-optimise less than its
Bradley-Terry baseline (its paper's motivation). Bars are written here; results come from docs/results/bon.json
(bon/claim_results.py). Committed in 1dbdc08 and unchanged since; the run of docs/results/bon.json recorded commit
b9159da, which contains it, and its results came in 706d75b."""

from __future__ import annotations

from rewardsmith.claims import Claim

SOURCE = "src/rewardsmith/bon/claims.py"

RAISES_GOLD = Claim(
    "best-of-n",
    "bon.a",
    "Choosing the best of n samples by a reward model raises a gold the reward model never saw above random choice.",
    "gold@16 - gold@1 per proxy and gold (95% CI over prompts)",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
)
OVEROPTIMISES = Claim(
    "best-of-n",
    "bon.b",
    "A proxy over-optimises when the gold of its best-of-n falls after a peak while its own reward keeps rising "
    "(Gao et al. 2022).",
    "gold@16 - gold at the peak n chosen on the validation prompts, on the test prompts (95% CI)",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
    held_when="below",
    bar_note="over-optimised when the CI lies below 0",
)
ACCURACY_RANKS_POLICY = Claim(
    "ANCHOR",
    "bon.c",
    "Offline proxy metrics (pair accuracy) may not predict best-of-n or online RLHF: the paper's first limitation.",
    "sign agreement: (ANCHOR - naive) pair accuracy on the source's ID test against (ANCHOR - naive) gold@16, "
    "each with its CI; held when both CIs exclude 0 with the same sign, not held when both exclude 0 with opposite "
    "signs, inconclusive otherwise",
    bar=0.0,
    bar_source=SOURCE,
    paper_figure="stated as a limitation, no figure",
)
ICRM_RESISTS = Claim(
    "ICRM",
    "bon.d",
    "A Beta posterior that does not converge to probability 1 resists over-optimisation (the in-context model's "
    "motivation).",
    "(ICRM with demonstrations - its BT baseline) of gold@16 - gold at the validation peak, paired on the test "
    "prompts (95% CI); above 0: the ICRM loses less after its peak",
    bar=0.0,
    bar_source=SOURCE,
    paper_figure="stated as a motivation, no figure",
)
CLAIMS = (RAISES_GOLD, OVEROPTIMISES, ACCURACY_RANKS_POLICY, ICRM_RESISTS)
