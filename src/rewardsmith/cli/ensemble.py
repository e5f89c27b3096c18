"""`rewardsmith ensemble`: make an ensemble folder of reward models, a model every scoring command takes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rewardsmith.cli.common import (
    Quiet,
    flag,
    handle_errors,
    inference_flags,
    print_result,
)

if TYPE_CHECKING:
    from rewardsmith.inference import InferenceOptions

app = typer.Typer()


@app.command("ensemble")
@inference_flags
def ensemble(
    *,  # keyword-only: `options` (no default: inference_flags fills it) follows options with defaults
    models: Annotated[
        list[str],
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            help="a member: any scalar reward model `score` takes (a rewardsmith, Hugging Face, OpenRLHF or LoRA "
            "folder); repeat for each member, at least two",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="the ensemble folder to write (ensemble.json)")],
    rule: Annotated[
        str,
        typer.Option(
            help="how the members' standardised rewards are combined per text: mean | min (the worst case) | uwo "
            "(uncertainty-weighted: mean - lambda * sd)"
        ),
    ] = "mean",
    lam: Annotated[float, typer.Option("--lambda", help="lambda of the uwo rule", min=0.0)] = 1.0,
    reference: Annotated[
        Path | None,
        typer.Option(
            help="texts every member's scale is measured on (a file `score` reads)  [default: 100 pairs each of "
            "the packaged HH-RLHF harmless and helpful samples]",
            show_default=False,
        ),
    ] = None,
    options: InferenceOptions,
    quiet: Quiet = False,
    overwrite: Annotated[
        bool, flag("--overwrite", help="replace the ensemble.json an earlier `rewardsmith ensemble` wrote in --out")
    ] = False,
) -> None:
    """Make an ensemble of reward models: score, eval, bench, calibrate --model and bon take the folder as a model
    and score each text by the rule over the members' rewards standardised on the reference texts; score also writes
    each text's sd across the members."""
    from rewardsmith.jobs.ensemble import make_ensemble

    with handle_errors():
        print_result(
            make_ensemble(
                models,
                out,
                rule,
                lam,
                reference,
                options,
                overwrite=overwrite,
                progress=not quiet,
            )
        )
