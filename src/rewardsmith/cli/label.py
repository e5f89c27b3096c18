"""`rewardsmith label`: a gold reward model's preference labels for pairs or completions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from rewardsmith.cli.common import (
    Flag,
    OutDir,
    Overwrite,
    Quiet,
    config_options,
    handle_errors,
    inference_flags,
    print_result,
)
from rewardsmith.rollouts.labels import LabelConfig

if TYPE_CHECKING:
    from rewardsmith.inference import InferenceOptions

app = typer.Typer()

FLAGS: dict[str, str | Flag] = {
    "gold": Flag(("--gold",), metavar="MODEL"),
    "input": Flag(("--input", "-i"), metavar="FILE"),
    "pairs_per_prompt": "--pairs-per-prompt",
    "soft": Flag(("--soft",), metavar="T"),
    "noise": "--noise",
    "seed": "--seed",
    "chunk": "--chunk",
}


@app.command("label")
@config_options(LabelConfig, FLAGS)
@inference_flags
def label(
    out: OutDir,
    overrides: dict[str, Any],
    options: InferenceOptions,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """A gold reward model's preference labels: pairs (any file `train` reads) or every pair of each prompt's
    completions (a `sample` / `bon --samples` file) in, OUT/pairs.jsonl (which `train` reads) out: chosen = the
    gold's preferred response, label 1 (hard) or sigmoid(margin / T) (--soft T), optional symmetric noise; ties
    dropped and counted."""
    from rewardsmith.config import apply_overrides
    from rewardsmith.jobs.label import run_label

    with handle_errors():
        cfg = LabelConfig()
        apply_overrides(cfg, overrides)
        print_result(run_label(cfg, out, options, progress=not quiet, overwrite=overwrite))
