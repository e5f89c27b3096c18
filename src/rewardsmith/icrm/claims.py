"""The in-context reward model (ICRM paper) claims with their bars (docs/icrm.md renders the results). Nothing here
reads data: rewardsmith.icrm.claim_results builds the results from the summary of the runs (docs/results/icrm.json).

When they were declared (git history; docs/icrm.md): this file was first committed in 54c35d4 (2026-12-02), after
ICRM results with verdicts had been committed (55ceafe, e648f00) and before the committed summary (2966739,
8917d55); in 670e7d5 (2026-12-03), after those results, FLIPPED_VS_BT's measure became "minus chance" and
CALIBRATION_WITH_N's statement lost "ECE". The bars are unchanged since 54c35d4.

The paper's claims (METHODS.md section 2): directional steerability (flipped demonstrations are followed, static
RMs cannot adapt); calibrated steerability (mu tracks the demonstrated rate; ECE 0.099 at N=8 to 0.076 at N=64 on
moral dilemmas); RM-Bench accuracy grows with N (60.5% at N=1 to 70.8% at N=64); mixing two objectives traces a
Pareto frontier whose hypervolume is reported per N; the ICRM as an RL reward on MATH-500 (53.8% vs a gold
verifier's 50.4% vs a BT RM's 51.4%); the KL term keeps the optimum interior.
"""

from __future__ import annotations

from rewardsmith.claims import Claim

PAPER = "ICRM"
WHERE = "src/rewardsmith/icrm/claims.py"
# The largest and the reference N of each claim (configs/icrm-minilm.yaml evaluates N in 0, 1, 2, 4, ..., 64).
N_MAX = 64
N_CALIBRATION_FROM = 8
N_RMBENCH_FROM = 1
# The project's bar for "mu tracks the demonstrated rate": the slope of the mean posterior mean on the demonstrated
# rate is at least half of perfect tracking (1). A constant forecast and BT (which cannot see the demonstrations)
# have slope 0; the paper's ECE of 0.076 at N=64 implies a slope of about 0.7 (a centred line of slope s has a
# reliability error of (1 - s) / 4 averaged over rates in [0, 1]).
MIN_TRACKING_SLOPE = 0.5
# The project's bar for the flipped standards: the ICRM reaches at least half of the above-chance accuracy of the
# same backbone trained directly on the flipped labels (the ceiling).
MIN_CEILING_SHARE = 0.5
# The command whose summary holds every measure these claims need (the reliability across rates, the flipped-standard
# ceilings, the paired RM-Bench and hypervolume changes); it writes docs/results/icrm.json.
RERUN = (
    "python experiments/icrm.py run --config configs/icrm-minilm.yaml --seeds 0 1 2 && "
    "python experiments/icrm.py summarise --config configs/icrm-minilm.yaml --seeds 0 1 2"
)

# The paper's accuracy against flipped labels (directional steerability); chance is 50.
PAPER_FLIPPED_ACCURACY = 89.0
FLIPPED_VS_BT = Claim(
    PAPER,
    "icrm.flipped",
    "static RMs cannot follow flipped demonstrations; the ICRM can",
    f"accuracy against the flipped labels, ICRM at N={N_MAX} minus chance (50) (points); BT, which scores 100 minus "
    "its as-labelled accuracy there, and N=0 are shown beside it",
    0.0,
    WHERE,
    f"{PAPER_FLIPPED_ACCURACY:g}% against the flipped labels ({PAPER_FLIPPED_ACCURACY - 50:+g} over chance)",
    paper_value=PAPER_FLIPPED_ACCURACY - 50,
)
FLIPPED_SHARE = Claim(
    PAPER,
    "icrm.flipped-share",
    "the ICRM follows the flipped standard: share of what direct training achieves",
    f"(ICRM at N={N_MAX} - 50) / (ceiling - 50), the ceiling the same backbone's BT trained on the flipped labels",
    MIN_CEILING_SHARE,
    WHERE,
    own=True,
    bar_note="the project's bar",
)
DEFAULT_COST = Claim(
    PAPER,
    "icrm.default-cost",
    "following demonstrations costs nothing on the default standards",
    f"accuracy against the default labels, ICRM at N={N_MAX} minus BT (points)",
    0.0,
    WHERE,
    own=True,
)
TRACKING = Claim(
    PAPER,
    "icrm.tracking",
    "calibrated steerability: mu tracks the demonstrated rate",
    f"slope of the mean mu on the demonstrated rate 1 - p over the mixing rates, N={N_MAX} (1 = exact tracking, "
    "0 = a constant or BT)",
    MIN_TRACKING_SLOPE,
    WHERE,
    "ECE 0.076 at N=64 (implies a slope near 0.7)",
    bar_note="the project's bar: half of exact tracking",
)
RELIABILITY_VS_CONSTANT = Claim(
    PAPER,
    "icrm.reliability",
    "calibrated steerability: mu is closer to the demonstrated rate than a constant",
    f"reliability MAE (mean over rates of |mean mu - (1 - p)|) at N={N_MAX} minus the constant 0.5 forecast's",
    0.0,
    WHERE,
    "ECE 0.076 at N=64",
    held_when="below",
)
CALIBRATION_WITH_N = Claim(
    PAPER,
    "icrm.calibration-n",
    "the calibration error against the demonstrated rate falls as N grows",
    f"reliability MAE at N={N_CALIBRATION_FROM} minus at N={N_MAX} (the paper reports ECE, which a constant "
    "forecast passes; ECE is shown beside it, not judged)",
    0.0,
    WHERE,
    "ECE 0.099 (N=8) to 0.076 (N=64): -0.023",
)
RMBENCH_WITH_N = Claim(
    PAPER,
    "icrm.rmbench",
    "RM-Bench accuracy rises with N",
    f"RM-Bench average accuracy at N={N_MAX} minus N={N_RMBENCH_FROM} (points)",
    0.0,
    WHERE,
    "60.5% (N=1) to 70.8% (N=64): +10.3",
)
PARETO_WITH_N = Claim(
    PAPER,
    "icrm.pareto",
    "mixing two objectives traces a Pareto frontier; its hypervolume grows with N",
    f"hypervolume at N={N_MAX} minus N=1 (respond / refuse accuracies as fractions)",
    0.0,
    WHERE,
)
PARETO_VS_BT = Claim(
    PAPER,
    "icrm.pareto-bt",
    "the ICRM's frontier dominates the static RM's point",
    f"hypervolume at N={N_MAX} minus BT's",
    0.0,
    WHERE,
    own=True,
)
MATH500_RL = Claim(
    PAPER,
    "icrm.math500",
    "as the RL reward on MATH-500 the ICRM beats a BT RM",
    "MATH-500 accuracy of a policy trained with each reward",
    0.0,
    WHERE,
    "53.8% vs BT 51.4% (gold verifier 50.4%)",
)
MATH500_PROXY = Claim(
    PAPER,
    "icrm.math500-proxy",
    "the ICRM ranks the reference solution above corrupted ones more often than BT",
    f"verifier accuracy, ICRM at N={N_MAX} minus BT (points)",
    0.0,
    WHERE,
    own=True,
)
KL_INTERIOR = Claim(
    PAPER,
    "icrm.kl",
    "the KL term keeps the optimum interior (0 < mu < 1, tau finite): no over-optimisation",
    "minimiser of the loss for one labelled pair",
    0.0,
    WHERE,
    kind="exact",
)

PAPER_CLAIMS = (
    FLIPPED_VS_BT,
    TRACKING,
    RELIABILITY_VS_CONSTANT,
    CALIBRATION_WITH_N,
    RMBENCH_WITH_N,
    PARETO_WITH_N,
    MATH500_RL,
    KL_INTERIOR,
)
OWN_CLAIMS = (FLIPPED_SHARE, DEFAULT_COST, PARETO_VS_BT, MATH500_PROXY)
