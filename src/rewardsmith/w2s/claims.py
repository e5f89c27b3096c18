"""The weak-to-strong (ANCHOR paper) claims and choices with their bars (docs/w2s.md renders the results). Nothing
here reads data: the results are built by rewardsmith.w2s.claim_results from the committed metrics.

When they were declared (git history; docs/w2s.md says it at length): this file was first committed in 54c35d4
(2026-12-02), before the committed runs were trained (6e38075) but after earlier runs of the same protocol had been
committed (results from 2026-11-29, verdicts from 2026-12-01); the 8-point MIN_TEACHER_GAP dates from 27574e0
(2026-12-01), written after an earlier ceiling-minus-teacher gap had been seen. GAP_SEARCH and the paper-form claim came
in d29dc06 with the gap search's first two settings' results; DEBIAS_CHOICE_SETS (7ed7f11) and EQUAL_TO_NAIVE_SHARE
after the results they apply to.

The paper's claims (METHODS.md section 1, "Claims to check"), each per target, never averaged over targets:
(a) naive W2S can show positive WRG with weak or negative AOG (students beat the teacher in domain and lose it out
of domain); (b) ANCHOR gives the best NTS on most targets; (c) a lambda sweep shows a trade-off (too little: no
effect; too much: the student cannot learn); (d) last-layer anchoring is at least as good as middle layers.
"""

from __future__ import annotations

from rewardsmith.claims import Choice, Claim

PAPER = "ANCHOR"
WHERE = "src/rewardsmith/w2s/claims.py"

# The normalised anchor strengths of the sweep (configs/shift-harmless-sweep.yaml): 0 is the naive student; the
# paper's lambda (about 1e-4 on the raw MSE) maps to PAPER_RAW_WEIGHT * (mean square of the reference states),
# measured on the W2S pool (experiments/w2s.py scale); the rest bracket the earlier grid's minimum (0.1) from below.
PAPER_RAW_WEIGHT = 1e-4
SWEEP_STRENGTHS = (0.0, 0.003, 0.01, 0.03, 0.1, 1.0, 10.0, 100.0, 1000.0)
SWEEP_SEEDS = (0, 1, 2)
# The non-inferiority margin of claim (d) in NTS points: "at least as good" is held when the CI of
# NTS(last) - NTS(middle) lies above -LAYER_MARGIN (the project's margin; the paper states none).
LAYER_MARGIN = 2.0
# The project's own bar for a usable weak-to-strong setting (not the paper's): the ceiling beats the teacher in
# domain by at least this many points.
MIN_TEACHER_GAP = 8.0

# The commands that produce every measure of claims (a)-(d) (experiments/w2s.py; each run writes
# docs/results/shift-*.json with the paired contrasts of rewardsmith.w2s.metrics.claim_statistics).
RERUN = "python experiments/w2s.py run"
RERUN_SWEEP = "python experiments/w2s.py run --only shift-harmless-sweep shift-harmless-layer"
RERUN_PAPER_FORM = "python experiments/w2s.py run --only shift-harmless-paper"
# The method of configs/shift-harmless-paper.yaml: ANCHOR exactly as the paper writes it (anchor.normalise: false).
PAPER_FORM_METHOD = "anchor-paper-raw"
# When a method counts as its naive student at this scale: on every split its students' per-pair correctness differs
# from their same-seed naive students' on less than this share of the pairs, so its contrast with naive can show
# nothing but those few pairs. Written after the paper-form run's results were committed (0900d1c, 2026-12-04), to
# name what that run measured (its row then tests nothing); it is no bar declared before a run.
EQUAL_TO_NAIVE_SHARE = 0.01

_FIG = None  # the paper gives these claims without a figure
# The paper's figures for its Llama / Anthropic Helpful setting (it reports no CIs): the naive student's AOG on
# Anthropic Helpful and ANCHOR's, and the accuracy a naive student trained on HelpSteer3 loses on Anthropic Helpful.
PAPER_AOG_NAIVE, PAPER_AOG_ANCHOR = 0.60, 4.41
PAPER_OOD_DROP = 20.0
# ANCHOR's gain over naive out of distribution in the paper (AOG 4.41 - 0.60), the figure of both ANCHOR-vs-naive rows.
PAPER_ANCHOR_GAIN = round(PAPER_AOG_ANCHOR - PAPER_AOG_NAIVE, 2)
ANCHOR_GAIN_FIGURE = (
    f"{PAPER_ANCHOR_GAIN:+.2f} on Anthropic Helpful (AOG {PAPER_AOG_ANCHOR:.2f} - {PAPER_AOG_NAIVE:.2f}; Llama, "
    "Helpful setting)"
)

WRG_POSITIVE = Claim(
    PAPER,
    "w2s.a.wrg",
    "(a) naive W2S shows positive WRG: the student beats its teacher in domain",
    "WRG of the naive student (points, ID test)",
    0.0,
    WHERE,
    _FIG,
)
GAIN_LOST_OOD = Claim(
    PAPER,
    "w2s.a.aog",
    "(a) ... with weak or negative AOG: the in-domain gain is lost out of domain",
    "WRG - AOG(target) of the naive student (points): how much of the in-domain gain is lost on the target",
    0.0,
    WHERE,
    f"a naive student trained on HelpSteer3 loses about {PAPER_OOD_DROP:g} points of accuracy on Anthropic "
    "Helpful (its ID minus OOD accuracy, not this measure)",
)
ANCHOR_BEST_NTS = Claim(
    PAPER,
    "w2s.b",
    "(b) ANCHOR gives the best NTS",
    "NTS(ANCHOR at its validation strength) minus the highest NTS of naive, confidence and SEAM (points; the max "
    "is taken inside each bootstrap replicate)",
    0.0,
    WHERE,
    f"AOG on Anthropic Helpful: naive {PAPER_AOG_NAIVE:.2f}, ANCHOR {PAPER_AOG_ANCHOR:.2f} (Llama, Helpful setting)",
)
ANCHOR_BEST_MOST = Claim(
    PAPER,
    "w2s.b.most",
    "(b) ANCHOR gives the best NTS on most targets",
    "number of targets on which (b) is held",
    0.0,
    WHERE,
    _FIG,
    kind="majority",
)
TRADE_OFF = Claim(
    PAPER,
    "w2s.c",
    "(c) the anchor strength traces a trade-off: the chosen strength beats both no anchor and the strongest anchor",
    "min(NTS(lambda*) - NTS(0), NTS(lambda*) - NTS(lambda_max)) (points); lambda* the validation choice, "
    "lambda_max = 1000 (normalised)",
    0.0,
    WHERE,
    "best lambda about 1e-4 on the raw MSE",
)
TOO_STRONG = Claim(
    PAPER,
    "w2s.c.strong",
    "(c) ... too strong an anchor blocks adaptation: the student cannot learn",
    "WRG(lambda_max) - WRG(0) (points, ID test)",
    0.0,
    WHERE,
    _FIG,
    held_when="below",
)
LAST_LAYER = Claim(
    PAPER,
    "w2s.d",
    "(d) last-layer anchoring is at least as good as a middle layer",
    "NTS(last layer) - NTS(middle layer, depth 0.5) at equal normalised strength lambda* (points)",
    -LAYER_MARGIN,
    WHERE,
    _FIG,
    bar_note=f"non-inferiority margin {LAYER_MARGIN:g} points, the project's",
)

# The project's own questions (kept beside the paper's claims).
CONFIDENCE_ID = Claim(
    PAPER,
    "own.confidence",
    "the confidence loss beats naive in domain",
    "ID accuracy, confidence minus naive (points)",
    0.0,
    WHERE,
    own=True,
)
SEAM_ID = Claim(
    PAPER,
    "own.seam",
    "SEAM's refined labels beat naive in domain",
    "ID accuracy, SEAM minus naive (points)",
    0.0,
    WHERE,
    own=True,
)
ANCHOR_OOD = Claim(
    PAPER,
    "own.anchor-ood",
    "ANCHOR beats naive out of distribution",
    "target accuracy, ANCHOR (validation strength) minus naive (points)",
    0.0,
    WHERE,
    ANCHOR_GAIN_FIGURE,
    own=True,
    paper_value=PAPER_ANCHOR_GAIN,
)
PAPER_FORM_OOD = Claim(
    PAPER,
    "own.anchor-paper-form",
    "ANCHOR in the paper's form (plain masked MSE on the last layer, lambda = 1e-4) beats naive out of distribution",
    "target accuracy, ANCHOR (paper's form) minus naive (points; configs/shift-harmless-paper.yaml)",
    0.0,
    WHERE,
    ANCHOR_GAIN_FIGURE,
    own=True,
    paper_value=PAPER_ANCHOR_GAIN,
)
DEBIASED_OOD = Claim(
    PAPER,
    "own.length-covariate",
    "the length-debiased student beats naive out of distribution",
    "length-controlled target accuracy, naive-length-covariate minus naive (points)",
    0.0,
    WHERE,
    own=True,
)
TEACHER_GAP = Claim(
    PAPER,
    "own.gap",
    f"a gap to recover: the ceiling beats the teacher in domain by at least {MIN_TEACHER_GAP:g} points",
    "ID accuracy, ceiling minus teacher (points)",
    MIN_TEACHER_GAP,
    WHERE,
    own=True,
    bar_note="the project's bar, not the paper's",
)

PAPER_CLAIMS = (WRG_POSITIVE, GAIN_LOST_OOD, ANCHOR_BEST_NTS, ANCHOR_BEST_MOST, TRADE_OFF, TOO_STRONG, LAST_LAYER)
OWN_CLAIMS = (CONFIDENCE_ID, SEAM_ID, ANCHOR_OOD, PAPER_FORM_OOD, DEBIASED_OOD, TEACHER_GAP)

# Choices, each made on data that is never reported.
TEACHER_CHOICE = Choice(
    PAPER,
    "w2s.teacher",
    "the weak teacher of each source",
    "the candidates of experiments/teachers.py fitted on the protocol's gold pool (300 pairs): TF-IDF (C 1, C 0.1), "
    "frozen 1-layer MiniLM probes (mean, [CLS]), a fine-tuned 1-layer MiniLM",
    "highest accuracy on the validation split (ties: the candidate listed first); the candidates on 100 or 50 gold "
    "pairs change the protocol's gold pool and are screened but not eligible",
    "the source's validation split (300 pairs), never reported",
    "experiments/teachers.py",
)
STRENGTH_CHOICE = Choice(
    PAPER,
    "w2s.anchor-strength",
    "ANCHOR's normalised strength lambda* (the headline ANCHOR of both sources)",
    "the positive strengths of the harmless sweep (last layer, seeds 0-2)",
    "highest mean validation accuracy over seeds (metrics.json: anchor_selection); the same lambda* is used for "
    "helpful",
    "the harmless validation split (300 pairs), never reported",
    WHERE,
)
LAYER_CHOICE = Choice(
    PAPER,
    "w2s.layer-strength",
    "the strength at which the last and the middle layer are compared (claim d)",
    "the harmless sweep's positive strengths",
    "lambda*, the last layer's validation choice (equal normalised "
    "strength); the middle layer is trained at lambda* after the choice",
    "the harmless validation split",
    WHERE,
)
DEBIAS_CHOICE = Choice(
    PAPER,
    "w2s.debias",
    "the length-debiasing objective of the debiased student (`naive-<objective>`)",
    "the objectives of experiments/debias.py (length-covariate, odin, length-balanced) against plain BT",
    "highest mean validation length-controlled gain among the objectives losing at most 1 point of validation "
    "accuracy (docs/results/debias.json: choice)",
    "the validation split of each training source (hh-rlhf harmless and helpful), never reported",
    "experiments/debias.py",
)
# The search for a setting with a gap (docs/w2s.md, experiments/w2s_gap.py), committed in d29dc06 together with the
# results of its first two settings (MiniLM at 128 tokens, harmless and helpful, seed 0; the other three came after,
# 163b95d), its 8-point bar (MIN_TEACHER_GAP) older, from 27574e0: a setting is a source, a strong student and a
# teacher; it reaches the bar when, on the validation split, the ceiling beats the teacher by at least
# MIN_TEACHER_GAP points with the CI's lower end above 0 and the teacher is informative (its validation accuracy's
# CI lies above 50%). A setting screened on seed 0 that reaches it is confirmed on seeds 0-2.
GAP_SEARCH = Choice(
    PAPER,
    "w2s.setting",
    "the weak-to-strong setting the claim tables are run in (source, strong student, weak teacher)",
    "the settings of experiments/w2s_gap.py: PKU-SafeRLHF harmless and helpful labels; students MiniLM (128 tokens, "
    "1 epoch; 256 tokens, 2 epochs) and SmolLM2-135M-Instruct (full fine-tuning); every teacher of "
    "experiments/teachers.py",
    f"among the settings whose ceiling - teacher gap on validation is at least {MIN_TEACHER_GAP:g} points with its "
    "95% CI above 0 over seeds 0-2 and pairs, and whose teacher's validation accuracy has its CI above 50%: the one "
    "with the most accurate teacher (ties: the one listed first); none reaching it leaves the protocol's setting "
    "in place",
    "the source's validation split (300 pairs), never reported; the ID test and the targets are not scored",
    "experiments/w2s_gap.py",
)
CHOICES = (TEACHER_CHOICE, STRENGTH_CHOICE, LAYER_CHOICE, DEBIAS_CHOICE)
# The sets whose own validation pairs made the debiasing choice (experiments/debias.py trains on these files): a
# target drawn from one of them is not independent of the choice, so the debiased student's row there is not judged.
DEBIAS_CHOICE_SETS = ("hh-rlhf/harmless-base", "hh-rlhf/helpful-base")
