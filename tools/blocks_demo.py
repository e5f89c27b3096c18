"""The README's demo block, rendered from docs/results/demo.json (`make demo`)."""

from __future__ import annotations

from collections.abc import Callable

from blocks_common import ci_text as _ci
from blocks_common import load
from blocks_common import source as _source
from blocks_common import table as _table

from rewardsmith.report.demo import (
    PEBS,
    calibration_gains,
    helpful_note,
    model_depth,
    steering_agreement,
    stress_test_note,
)


def block_demo() -> str:
    demo = load("demo")
    train, shift, steer, cal = (demo[k] for k in ("train", "shift", "steer", "calibrate"))
    held = train["eval"]["hh-rlhf/harmless-base (held-out)"]
    target = shift["targets"][0]
    methods = shift["methods"]
    rows = [
        [
            "1. train",
            f"MiniLM{model_depth(train)} on {train['train']['pairs']} HH-RLHF harmless pairs, {held['n']} held out",
            f"accuracy {_ci(held['accuracy'], held['accuracy_ci'])}; length rule "
            f"{held['length_rule_accuracy']:.1f}; length-controlled "
            f"{_ci(held['length_controlled_accuracy'], held['length_controlled_accuracy_ci'])}. "
            + helpful_note(train["eval"]),
        ],
        [
            "2. stress-test",
            f"teacher, naive, anchor, ceiling; ID and {target}",
            "; ".join(
                f"{m} {methods[m]['id_acc']:.1f} / {methods[m][f'ood_acc.{target}']:.1f}"
                for m in ("teacher", "naive", "anchor", "ceiling")
                if m in methods
            )
            + ". "
            + stress_test_note(shift),
        ],
        [
            "3. steer",
            f"ICRM on step 1's encoder, {steer['check']['n_demos']} demonstrations, "
            f"{steer['check']['pairs']} held-out pairs; agreement with the demonstrated standard",
            "; ".join(f"{label} {_ci(v, ci)}" for label, v, ci in steering_agreement(steer)),
        ],
        [
            "4. calibrate",
            f"{PEBS}, the project's joint variant (the paper's form: docs/calibration.md), on PluriHarms "
            f"({cal['data']['raters']} raters), against one pooled map and per-rater OLS",
            calibration_gains(cal),
        ],
    ]
    return (
        f"Measured on a fresh clone on the 2-core machine (`make demo`, {demo['seconds'] / 60:.1f} min including "
        "model loading; accuracies in %, 95% bootstrap CIs):\n\n"
        + _table(["step", "what runs", "result"], rows)
        + "\n\n"
        + _source("demo")
    )


BLOCKS: dict[str, Callable[[], str]] = {"demo": block_demo}
