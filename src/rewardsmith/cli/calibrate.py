"""`rewardsmith calibrate`: evaluate per-rater calibration (PEBS and baselines) and fit maps for scoring.

rewardsmith calibrate --ratings pluriharms --out runs/cal            (same as `calibrate run`)
rewardsmith calibrate run --config cal.yaml --out DIR                (a CalibrateRunConfig as YAML)
rewardsmith calibrate fit --ratings ratings.parquet --out maps.json  (then: rewardsmith score --calibration
                                                                      maps.json --rater ID ...)
rewardsmith calibrate fit --engine spark --ratings s3a://logs/ratings/ --out maps.parquet   (docs/scale.md)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from rewardsmith.calibrate.config import CalibrateFitConfig, CalibrateRunConfig
from rewardsmith.cli.common import (
    ConfigFile,
    Flag,
    Overwrite,
    Quiet,
    comma_list,
    config_options,
    flag,
    handle_errors,
    int_list,
    print_result,
)

app = typer.Typer(
    invoke_without_command=True,
    subcommand_metavar="[COMMAND] [ARGS]...",  # without a command, `calibrate` is `calibrate run`
    rich_markup_mode=None,
    help="Per-rater calibration of reward-model scores (PEBS and baselines).",
)

SOURCE_OPTIONS: dict[str, str | Flag] = {
    "source.ratings": "--ratings",
    "source.data_dir": "--data-dir",
    "source.on_bad_row": "--on-bad-row",
    "source.model_scores": "--model-scores",
    "source.model_score": "--model-score",
    "source.unsure": "--unsure",
    "source.score_min": "--score-min",
    "source.score_max": "--score-max",
    "source.model": Flag(("--model", "-m")),
}
RUN_OPTIONS: dict[str, str | Flag] = {
    **SOURCE_OPTIONS,
    "evaluation.holdout": "--holdout",
    "evaluation.seeds": "--seeds",
    "evaluation.methods": Flag(
        ("--methods",), "comma-separated calibrators to compare", convert=comma_list, cli_type=str
    ),
    "fit_sizes": Flag(
        ("--fit-sizes",),
        "also evaluate with each rater's fit part capped at these sizes (comma-separated; '' for none)",
        cli_type=str,
        convert=lambda text: int_list(text, "--fit-sizes", minimum=3, allow_empty=True),
    ),
    "evaluation.n_min": "--n-min",
    "evaluation.group_column": "--group-column",
    "evaluation.pilot_per_rater": "--pilot-per-rater",
    "evaluation.bootstrap": "--bootstrap",
}
FIT_OPTIONS: dict[str, str | Flag] = {
    **SOURCE_OPTIONS,
    "method": "--method",
    "n_min": "--n-min",
    "group_column": "--group-column",
    "source.engine": "--engine",
}


@config_options(CalibrateRunConfig, RUN_OPTIONS)
def run(
    ctx: typer.Context,
    overrides: dict[str, Any],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="run folder (metrics.json, report.md/html, plots/, maps.json)  [required]",
            show_default=False,
        ),
    ] = None,
    config: ConfigFile = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """Within-rater hold-out of every calibrator: metrics.json, report, plots, and PEBS maps."""
    from rewardsmith.config import apply_overrides, load_yaml
    from rewardsmith.errors import ConfigError
    from rewardsmith.jobs.calibrate import run_calibrate

    # Also the group callback, so `calibrate --ratings ...` is `calibrate run --ratings ...`; before a
    # subcommand it does nothing.
    if isinstance(ctx.command, TyperGroup) and ctx.invoked_subcommand is not None:
        return
    with handle_errors():
        if out is None:
            raise ConfigError(
                "--out is required (and --ratings or a --config naming the ratings); see `rewardsmith calibrate --help`"
            )
        cfg = load_yaml(CalibrateRunConfig, config) if config else CalibrateRunConfig()
        apply_overrides(cfg, overrides)
        print_result(run_calibrate(cfg, out, overwrite, progress=not quiet))


app.callback()(run)
app.command("run")(run)


@app.command("fit")
@config_options(CalibrateFitConfig, FIT_OPTIONS)
def fit(
    overrides: dict[str, Any],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="maps file to write (.json or .parquet)  [required]", show_default=False),
    ] = None,
    config: ConfigFile = None,
    quiet: Quiet = False,
    overwrite: Annotated[
        bool,
        flag(
            "--overwrite",
            help="replace --out when an earlier `rewardsmith calibrate fit` "
            "wrote it (any other existing file is refused)",
        ),
    ] = False,
) -> None:
    """Fit per-rater maps on all ratings and save them for `rewardsmith score --calibration FILE --rater ID`."""
    from rewardsmith.config import apply_overrides, load_yaml
    from rewardsmith.errors import ConfigError
    from rewardsmith.jobs.calibrate import run_calibrate_fit

    with handle_errors():
        if out is None:
            raise ConfigError("--out is required (a .json or .parquet file)")
        cfg = load_yaml(CalibrateFitConfig, config) if config else CalibrateFitConfig()
        apply_overrides(cfg, overrides)
        print_result(run_calibrate_fit(cfg, out, overwrite))
