"""`rewardsmith bench`: reward models on the benchmark suites whose data is present, into one report card."""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Annotated

import typer

from rewardsmith.cli.common import (
    DataDir,
    ModelPath,
    OutDir,
    Overwrite,
    Quiet,
    handle_errors,
    inference_flags,
    print_result,
)

if TYPE_CHECKING:
    from rewardsmith.inference import InferenceOptions

app = typer.Typer()

_MODEL_HELP = typing.get_args(ModelPath)[1].help
Models = Annotated[
    list[str],
    typer.Option(
        "--model",
        "-m",
        metavar="MODEL",
        help=f"{_MODEL_HELP}; repeatable: every model gets a column, and each is compared to the first with paired "
        "differences",
    ),
]
Suites = Annotated[
    list[str] | None,
    typer.Option(
        "--suite",
        "-s",
        metavar="SUITE",
        help="suites to run (repeatable): all | rewardbench | rewardbench2 | ppe | rm-bench | local, or one suite by "
        "its own name (ppe-correctness, ...); a suite whose data is absent is reported with where to put it  "
        "[default: all]",
        show_default=False,
    ),
]
Limit = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=1,
        help="at most this many rows per subset, in file order (a sample: the numbers describe it "
        "only)  [default: all rows]",
        show_default=False,
    ),
]
Bootstrap = Annotated[
    int,
    typer.Option(
        "--bootstrap",
        min=0,
        help="bootstrap replicates of every 95% CI and paired difference (0: no intervals)  [default: 1000]",
        show_default=False,
    ),
]


@app.command()
@inference_flags
def bench(
    *,  # keyword-only: `options` (no default: inference_flags fills it) follows options with defaults
    models: Models,
    out: OutDir,
    suites: Suites = None,
    data_dir: DataDir = None,
    limit: Limit = None,
    bootstrap: Bootstrap = 1000,
    options: InferenceOptions,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """Benchmark reward models (rewardsmith's or any other) on RewardBench, RewardBench 2, PPE, RM-Bench and the
    local preference sets: scores with 95% CIs, the length rule, length-controlled accuracy, paired differences."""
    from rewardsmith.jobs.bench import run_bench

    with handle_errors():
        print_result(
            run_bench(
                models,
                suites,
                out,
                data_dir=data_dir,
                limit=limit,
                n_boot=bootstrap,
                options=options,
                progress=not quiet,
                overwrite=overwrite,
            )
        )
