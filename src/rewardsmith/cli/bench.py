"""`rewardsmith bench`: reward models on the benchmark suites whose data is present, into one report card."""

from __future__ import annotations

import typing
from typing import Annotated

import typer

from rewardsmith.cli.common import (
    BatchSize,
    DataDir,
    InferenceBf16,
    MaxLengthOpt,
    ModelPath,
    OutDir,
    Overwrite,
    Quiet,
    TemplateOpt,
    TrustRemoteCodeOpt,
    handle_errors,
    inference_options,
    print_result,
)

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
def bench(
    models: Models,
    out: OutDir,
    suites: Suites = None,
    data_dir: DataDir = None,
    limit: Limit = None,
    bootstrap: Bootstrap = 1000,
    bf16: InferenceBf16 = None,
    batch_size: BatchSize = 64,
    template: TemplateOpt = "auto",
    max_length: MaxLengthOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
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
                options=inference_options(template, max_length, trust_remote_code, batch_size, bf16),
                progress=not quiet,
                overwrite=overwrite,
            )
        )
