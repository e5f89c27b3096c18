"""The questions `experiments/rl.py` answers, declared before its runs' results (rewardsmith.claims): does GRPO on a
served proxy raise the gold, does the in-context model's posterior resist over-optimisation better than its
Bradley-Terry baseline (the ICRM paper's motivation), and does the per-rater calibrated reward stay stable where the
uncalibrated one collapses (the PEBS paper's pre-registered PPO probe). Results come from docs/results/rl.json
(rl/claim_results.py); nothing here reads them. Committed in a7d8ba4 and 41fb6ed (the probe's learning rate and steps),
before the first results (f35b7a5, which also reworded ICRM_RESISTS' and CALIBRATED_STABLE's measures); the ICRM arms'
ICRM_STEPS and ICRM_LR in 2daf606, after the main run's results and before the ICRM arms'. Bars unchanged.

Every arm runs the same recipe (GRPOSettings of experiments/rl.py: SmolLM2-135M-Instruct, full fine-tune, the same
seed, prompts and budget within a probe: the calibration arms PROBE_STEPS steps each, the ICRM arms ICRM_STEPS steps at
ICRM_LR) and is tracked on the same 16 held-out prompts
with the same seeded samples, so arms are compared paired over those prompts.

"Collapse" (the PEBS paper does not define it; defined here before the runs' results): an arm collapsed when the learned
gold at its last point lies below its value before training with the 95% CI of the change below 0, or when the
server's `collapse` or `repetition` monitor fired in the last third of its steps. (rewardsmith.rl.summary, written
after these runs, also counts the `shrinking` monitor, which the server did not have when they ran.)

Why the calibration probe runs with `scale_rewards="none"` and a KL term: a PEBS map is affine in the reward with,
for a rater whose shrunk slope is positive, a positive slope. GRPO's advantages are group-standardised
((r - mean) / sd), so such a map leaves them unchanged, and Adam's update does not see the scale of the gradient
either: without a KL term the calibrated and uncalibrated arms train the same policy (CALIBRATION_INVARIANT, exact
up to TRL's std + 1e-4 term and Adam's epsilon, checked by a test). Only where the reward's scale meets another term
(the KL penalty beta, with unstandardised advantages) can calibration change what is learned; that is the form the
probe runs in, at a learning rate (CALIBRATION_LR) that lets the uncalibrated arm reach KL_REACHED in the budget.

After the runs (the reading is corrected, the declarations above are left as they were): in that form the probe
compares KL strengths, not calibration. One rater's map is one affine map a r + b of the reward for every prompt;
with unstandardised advantages (r - group mean) the advantages scale by a, and under Adam (invariant to the
gradient's scale, up to its epsilon and to gradient clipping) the loss a (policy term) + beta KL trains what
(policy term) + (beta / a) KL trains: the calibrated arm is the uncalibrated arm at KL coefficient beta / a. A
positive per-rater affine map therefore cannot change the policy under standardised advantages and only rescales
the KL coefficient without them, so rl/claim_results.py leaves CALIBRATED_STABLE "not run" where the calibrated
reward is one positive affine map of the uncalibrated one. The form that could test calibration: prompts each rated
by a different rater's map (a prompt-dependent map, which no global rescaling undoes) against one global map, at
matched effective KL coefficient (each arm's beta over the mean slope its advantages carry). It was not run.
"""

from __future__ import annotations

from rewardsmith.claims import Claim

SOURCE = "src/rewardsmith/rl/claims.py"
KL_REACHED = 1.0  # the KL (nats per completion) the PEBS probe's uncalibrated arm must reach to test the claim
CALIBRATION_BETA = 0.04  # the KL coefficient of the calibration probe's arms (TRL's former default)
CALIBRATION_LR = 5e-5  # 5x the main run's: the uncalibrated arm must be able to reach KL_REACHED within the budget
PROBE_STEPS = 20  # GRPO steps of each calibration arm (the main run takes 30): what the arms cost on this CPU
ICRM_STEPS = 10  # GRPO steps of each ICRM-probe arm: what was left of the session's compute after the others
ICRM_LR = 5e-5  # the ICRM probe's learning rate, as the calibration probe's: 10 steps must move the policy far
CALIBRATION_SCALE_REWARDS = "none"  # unstandardised advantages: the reward's scale reaches the update
# What the invariance of CALIBRATION_INVARIANT is exact up to (the note was added after the runs; the claim is not
# changed by it).
EXACT_UP_TO = "up to TRL's std + 1e-4 term and Adam's epsilon"
RATER_RULE = (
    "the PluriHarms rater whose PEBS shrunk slope is the median of all raters' (a typical rater), fitted by "
    "`rewardsmith calibrate --ratings pluriharms --model runs/harmless/model`; the served reward is that rater's "
    "calibrated score negated (PluriHarms rates harm: 100 = extremely harmful), so the policy is pushed towards "
    "what the rater finds harmless"
)

GOLD_RISES = Claim(
    "RL",
    "rl.a",
    "GRPO on rewards served by rewardsmith raises the gold on held-out prompts.",
    "gold at the run's last point - gold before training, paired over the held-out prompts (95% CI)",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
)
ICRM_RESISTS = Claim(
    "ICRM",
    "rl.b",
    "A posterior that does not converge to probability 1 resists over-optimisation: a policy trained on the "
    "in-context model (steered by demonstrations) loses less gold than one trained on its Bradley-Terry baseline.",
    "(gold at the last point - before training) with the ICRM as the proxy, minus the same with its BT baseline as "
    "the proxy, paired over the held-out prompts (95% CI), per gold",
    bar=0.0,
    bar_source=SOURCE,
    paper_figure="stated without a figure",
)
CALIBRATED_STABLE = Claim(
    "PEBS",
    "rl.c",
    "The uncalibrated reward model collapsed once KL reached about 1.0, while the PEBS-calibrated arm stayed stable "
    "(pre-registered PPO probe).",
    "(gold at the last point - before training) of the calibrated arm minus that of the uncalibrated arm, paired "
    "over the held-out prompts (95% CI), per gold; collapse (on the learned gold) as defined in rl/claims.py",
    bar=0.0,
    bar_source=SOURCE,
    paper_figure="uncalibrated collapsed at KL ~ 1.0; calibrated stable",
    bar_note=f"tested only where the uncalibrated arm reached KL >= {KL_REACHED:g}",
)
CALIBRATION_INVARIANT = Claim(
    "PEBS",
    "rl.d",
    "Under GRPO (group-standardised advantages, Adam, no KL term) a rater's calibration map with a positive slope "
    "trains the same policy as the uncalibrated reward; a negative slope reverses the first update.",
    "the policy's parameters after GRPO steps on r and on a*r + b (a > 0), and the first update on -r",
    bar=0.0,
    bar_source=SOURCE,
    own=True,
    kind="exact",
    # TRL 1.16's GRPOTrainer divides by (std_rewards + 1e-4), so a*r + b gives a(r - mean) / (a std + 1e-4), not
    # (r - mean) / (std + 1e-4); Adam divides by sqrt(v) + eps. Both move the update by far less than a step.
    bar_note=EXACT_UP_TO,
)
CLAIMS = (GOLD_RISES, ICRM_RESISTS, CALIBRATED_STABLE, CALIBRATION_INVARIANT)
