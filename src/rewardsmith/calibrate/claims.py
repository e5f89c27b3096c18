"""The per-rater calibration (PEBS paper) claims and choices with their bars (docs/calibration.md renders the
results). Nothing here reads data: rewardsmith.calibrate.claim_results builds the results from the committed metrics.

When they were declared (git history; docs/calibration.md): this file was first committed in 54c35d4 (2026-12-02),
after PEBS results with verdicts had been committed (from 17bea1a, 2026-11-29) and together with the variant choice
it records (VARIANT_CHOICE, calibration-choice.json); BINARY_RATINGS (2cebb32) came after the results it scopes, ORACLE
(31ae7bc) and DEMOGRAPHICS (af09428) with their own results.

The paper's claims (METHODS.md section 3): PEBS lowers the within-rater held-out RMSE against the pooled map
(-8.58% on PRISM, -9.66% on PluriHarms) in its own form (per-parameter shrinkage of the uncentred slope and
intercept); per-rater OLS overfits small samples; positive shrunk slopes keep every rater's ranking; a forecaster
predicts the gain from a pilot within 0.2 percentage points on continuous corpora.
"""

from __future__ import annotations

from rewardsmith.claims import Choice, Claim

PAPER = "PEBS"
WHERE = "src/rewardsmith/calibrate/claims.py"
PAPER_FORM = "pebs-uncentred"  # METHODS.md's form: separate shrinkage of the uncentred slope and intercept
VARIANTS = ("pebs-uncentred", "pebs-centred", "pebs")
OFFSET_ONLY = "offset"
# Hold-out splits: the reported ones and, disjoint from them, the ones the variant choice reads.
REPORT_SEEDS = 30
REPORT_FIRST_SEED = 0
CHOICE_SEEDS = 5
CHOICE_FIRST_SEED = 100
PAPER_GAIN = {"PluriHarms": 9.66, "PRISM": 8.58}  # % lower held-out RMSE than the pooled map
FORECAST_TOLERANCE = 0.2  # percentage points, the paper's
TARGET_GAIN_PCT = 8.0  # the project's own bar (not the paper's)

GAIN_VS_POOLED = Claim(
    PAPER,
    "pebs.gain",
    "PEBS lowers held-out RMSE against the pooled map",
    f"RMSE gain over pooled (%), the paper's form ({PAPER_FORM}), all fit ratings, {REPORT_SEEDS} hold-out splits",
    0.0,
    WHERE,
    "-9.66% RMSE on PluriHarms, -8.58% on PRISM",
)
OLS_OVERFITS = Claim(
    PAPER,
    "pebs.vs-ols",
    "per-rater OLS overfits small samples; shrinkage does not",
    "RMSE gain of the paper's form over per-rater OLS (%), at the capped fit size",
    0.0,
    WHERE,
)
RANKING_KEPT = Claim(
    PAPER,
    "pebs.monotone",
    "positive shrunk slopes keep each rater's ranking: pair accuracy unchanged",
    "within-rater pair accuracy of every positive-slope map equals the raw score's",
    0.0,
    WHERE,
    kind="exact",
)
# The forecast claim is about continuous ratings: the ratings sources whose ratings are binary are out of its scope.
BINARY_RATINGS = frozenset({"dices-350"})
FORECAST = Claim(
    PAPER,
    "pebs.forecast",
    "a forecaster predicts the gain from a pilot within 0.2 percentage points",
    "forecast minus realised gain of the paper's form over pooled (points)",
    FORECAST_TOLERANCE,
    WHERE,
    "within 0.2 points (continuous corpora)",
    kind="tolerance",
)
ORACLE = Claim(
    PAPER,
    "pebs.oracle",
    "PEBS's risk is within a factor 1 + c/J of the oracle that knows the true between-rater variance",
    "rate of the excess risk: slope of log(PEBS risk / oracle risk - 1) on log J, J = 10 to 1,000 raters "
    "(simulation, experiments/calibration_oracle.py)",
    -0.5,
    WHERE,
    "1 + c/J: a rate of -1",
    held_when="below",
    bar_note="the project's bar: faster than 1/sqrt(J)",
    paper_value=-1.0,
)
# The project's bar for "demographic groups cannot replace per-rater maps": a demographic column explains less than
# half of the between-rater variance of a map parameter.
MAX_DEMOGRAPHIC_SHARE = 0.5
DEMOGRAPHICS = Claim(
    PAPER,
    "pebs.demographics",
    "demographic grouping cannot replace per-rater maps",
    "share of the between-rater variance of the map parameter lying between the demographic column's groups "
    "(method of moments; experiments/calibration_demographics.py)",
    MAX_DEMOGRAPHIC_SHARE,
    WHERE,
    held_when="below",
    bar_note="the project's bar: less than half",
)
PRISM = Claim(
    PAPER,
    "pebs.prism",
    "PEBS lowers held-out RMSE against the pooled map on PRISM",
    "RMSE gain over pooled (%) on PRISM",
    0.0,
    WHERE,
    "-8.58%",
)

OFFSET_GAIN = Claim(
    PAPER,
    "own.offset",
    "per-rater slopes add to per-rater offsets",
    "RMSE gain of the paper's form over the offset-only map (pooled slope, per-rater shrunk intercept) (%)",
    0.0,
    WHERE,
    own=True,
)
OFFSET_VS_POOLED = Claim(
    PAPER,
    "own.offset-pooled",
    "a per-rater offset alone beats the pooled map",
    "RMSE gain of the offset-only map over pooled (%)",
    0.0,
    WHERE,
    own=True,
)
VARIANT_GAIN = Claim(
    PAPER,
    "own.variant",
    "the project's extension (the variant chosen on the choice splits) beats the paper's form",
    "RMSE gain of the chosen variant over the paper's form (%)",
    0.0,
    WHERE,
    own=True,
)
REWARD_MODEL_GAIN = Claim(
    PAPER,
    "own.reward-model",
    "PEBS beats pooled with a reward model's score (the paper's setting)",
    "RMSE gain over pooled (%), the paper's form, model score from a MiniLM reward model trained here",
    0.0,
    WHERE,
    own=True,
)
TARGET_GAIN = Claim(
    PAPER,
    "own.target",
    f"PEBS gains at least {TARGET_GAIN_PCT:g} % over pooled",
    "RMSE gain over pooled (%), the paper's form",
    TARGET_GAIN_PCT,
    WHERE,
    own=True,
    bar_note="the project's bar, not the paper's",
)

PAPER_CLAIMS = (GAIN_VS_POOLED, OLS_OVERFITS, RANKING_KEPT, FORECAST, ORACLE, DEMOGRAPHICS, PRISM)
OWN_CLAIMS = (OFFSET_GAIN, OFFSET_VS_POOLED, VARIANT_GAIN, REWARD_MODEL_GAIN, TARGET_GAIN)

VARIANT_CHOICE = Choice(
    PAPER,
    "pebs.variant",
    "the PEBS variant kept as the project's extension (the `pebs` name)",
    ", ".join(VARIANTS),
    "highest mean RMSE gain over pooled across PluriHarms and DICES-350 and every fit size (all, 25, 18)",
    f"hold-out splits {CHOICE_FIRST_SEED}-{CHOICE_FIRST_SEED + CHOICE_SEEDS - 1} (`--first-seed "
    f"{CHOICE_FIRST_SEED} --seeds {CHOICE_SEEDS}`), never reported; the reported splits are "
    f"{REPORT_FIRST_SEED}-{REPORT_FIRST_SEED + REPORT_SEEDS - 1}",
    "experiments/calibration.py",
)
CHOICES = (VARIANT_CHOICE,)
