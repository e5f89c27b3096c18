"""`rewardsmith bon`: best-of-n of a policy's own samples, chosen by proxy reward models, judged by a gold."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from rewardsmith.bon.config import BonConfig
from rewardsmith.cli.common import (
    Flag,
    OutDir,
    Overwrite,
    Quiet,
    config_command,
    handle_errors,
    inference_flags,
    print_result,
)
from rewardsmith.cli.sample import SAMPLE_FLAGS

if TYPE_CHECKING:
    from rewardsmith.inference import InferenceOptions

app = typer.Typer()

FLAGS: dict[str, str | Flag] = {
    **SAMPLE_FLAGS,
    "samples": "--samples",
    "proxies": Flag(
        ("--proxy",),
        metavar="MODEL",
        help="a reward model that chooses the best of n (any model `score` takes; MODEL#demos=FILE: an in-context "
        "model steered by the demonstrations in FILE); repeatable",
    ),
    "golds": Flag(
        ("--gold",),
        metavar="GOLD",
        help="what judges the choice: ifeval (instructions followed; --prompts ifeval/<dataset>) | math (MATH-500 "
        "answers; --prompts math-500) | a reward model that is none of the proxies; repeatable",
    ),
    "n_boot": "--bootstrap",
}


@app.command("bon")
@config_command(BonConfig, FLAGS)
@inference_flags
def bon(
    out: OutDir,
    cfg: BonConfig,
    options: InferenceOptions,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """Does a reward model help a policy? Best-of-n of the policy's samples chosen by each proxy, judged by a gold the
    proxies never saw: gold@n and proxy@n against the KL bound with 95% CIs over prompts, the length selector and the
    oracle beside them, over-optimisation verdicts, rank correlations and paired differences between proxies."""
    from rewardsmith.jobs.bon import run_bon

    with handle_errors():
        print_result(
            run_bon(
                cfg,
                out,
                options=options,
                progress=not quiet,
                overwrite=overwrite,
            )
        )
