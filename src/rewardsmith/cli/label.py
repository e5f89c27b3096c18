"""`rewardsmith label`: a gold reward model's preference labels for pairs or completions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

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
    "spurious": "--spurious",
    "spurious_rate": "--spurious-rate",
    "spurious_tail": Flag(("--spurious-tail",), metavar="CHARS"),
    "spurious_pattern": Flag(("--spurious-pattern",), metavar="REGEX"),
    "seed": "--seed",
    "chunk": "--chunk",
}


@app.command("label")
@config_command(LabelConfig, FLAGS)
@inference_flags
def label(
    out: OutDir,
    cfg: LabelConfig,
    options: InferenceOptions,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """A gold reward model's preference labels: pairs (any file `train` reads) or every pair of each prompt's
    completions (a `sample` / `bon --samples` file) in, OUT/pairs.jsonl (which `train` reads) out: chosen = the
    gold's preferred response, label 1 (hard) or sigmoid(margin / T) (--soft T), optional symmetric noise; ties
    dropped and counted."""
    from rewardsmith.jobs.label import run_label

    with handle_errors():
        print_result(run_label(cfg, out, options, progress=not quiet, overwrite=overwrite))
