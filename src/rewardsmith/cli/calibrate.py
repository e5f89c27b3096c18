"""`rewardsmith calibrate`: evaluate per-rater calibration (PEBS and baselines) and fit maps for scoring.

rewardsmith calibrate --ratings pluriharms --out runs/cal            (same as `calibrate run`)
rewardsmith calibrate run --ratings ratings.parquet --out DIR --holdout 0.2 --seeds 5
rewardsmith calibrate fit --ratings ratings.parquet --out maps.json   (then: rewardsmith score --calibration
                                                                      maps.json --rater ID ...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from rewardsmith.calibrate.config import DEFAULT_METHODS, CalibrateRunConfig, EvalConfig, RatingsSource
from rewardsmith.cli.common import DataDir, handle_errors
from rewardsmith.config import help_of

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    invoke_without_command=True,
    help="Per-rater calibration of reward-model scores (PEBS and baselines).",
)

_S, _E, _R = RatingsSource, EvalConfig, CalibrateRunConfig

# Options shared by the commands, declared once.
RatingsOpt = Annotated[str | None, typer.Option("--ratings", help=help_of(_S, "ratings"))]
OnBadRowOpt = Annotated[str, typer.Option("--on-bad-row", help=help_of(_S, "on_bad_row"))]
ModelScoresOpt = Annotated[Path | None, typer.Option("--model-scores", help=help_of(_S, "model_scores"))]
ModelScoreOpt = Annotated[str | None, typer.Option("--model-score", help=help_of(_S, "model_score"))]
UnsureOpt = Annotated[str, typer.Option("--unsure", help=help_of(_S, "unsure"))]
ScoreMinOpt = Annotated[float | None, typer.Option("--score-min", help=help_of(_S, "score_min"))]
ScoreMaxOpt = Annotated[float | None, typer.Option("--score-max", help=help_of(_S, "score_max"))]
NMinOpt = Annotated[int, typer.Option("--n-min", help=help_of(_E, "n_min"))]
GroupOpt = Annotated[str | None, typer.Option("--group-column", help=help_of(_E, "group_column"))]
RunOutOpt = Annotated[
    Path | None,
    typer.Option("--out", "-o", help="output folder (metrics.json, report.md, plots/, maps.json)"),
]
HoldoutOpt = Annotated[float, typer.Option("--holdout", help=help_of(_E, "holdout"))]
SeedsOpt = Annotated[int, typer.Option("--seeds", help=help_of(_E, "seeds"))]
MethodsOpt = Annotated[str, typer.Option("--methods", help="comma-separated calibrators to compare")]
FitSizesOpt = Annotated[
    str, typer.Option("--fit-sizes", help=help_of(_R, "fit_sizes") + " (comma-separated; '' for none)")
]
PilotOpt = Annotated[int, typer.Option("--pilot-per-rater", help=help_of(_E, "pilot_per_rater"))]
BootstrapOpt = Annotated[int, typer.Option("--bootstrap", help=help_of(_E, "bootstrap"))]


def _ints(text: str, option: str) -> tuple[int, ...]:
    from rewardsmith.errors import ConfigError

    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{option} must be comma-separated integers, got {text!r}") from None


def _source(
    ratings: str | None,
    data_dir: Path | None,
    on_bad_row: str,
    model_scores: Path | None,
    model_score: str | None,
    unsure: str,
    score_min: float | None,
    score_max: float | None,
) -> RatingsSource:
    from rewardsmith.errors import ConfigError

    if not ratings:
        raise ConfigError("--ratings is required (a ratings file or a source name such as pluriharms)")
    if on_bad_row not in ("skip", "error"):
        raise ConfigError(f"--on-bad-row must be skip or error, got {on_bad_row!r}")
    if unsure not in ("drop", "half"):
        raise ConfigError(f"--unsure must be drop or half, got {unsure!r}")
    return RatingsSource(
        ratings,
        str(data_dir) if data_dir else None,
        on_bad_row,  # type: ignore[arg-type]
        str(model_scores) if model_scores else None,
        model_score,
        unsure,  # type: ignore[arg-type]
        score_min,
        score_max,
    )


def run(
    ctx: typer.Context,
    ratings: RatingsOpt = None,
    out: RunOutOpt = None,
    holdout: HoldoutOpt = 0.2,
    seeds: SeedsOpt = 5,
    methods: MethodsOpt = ",".join(DEFAULT_METHODS),
    fit_sizes: FitSizesOpt = "25,18",
    n_min: NMinOpt = 6,
    group_column: GroupOpt = None,
    pilot_per_rater: PilotOpt = 20,
    bootstrap: BootstrapOpt = 2000,
    data_dir: DataDir = None,
    on_bad_row: OnBadRowOpt = "skip",
    model_scores: ModelScoresOpt = None,
    model_score: ModelScoreOpt = None,
    unsure: UnsureOpt = "drop",
    score_min: ScoreMinOpt = None,
    score_max: ScoreMaxOpt = None,
) -> None:
    """Within-rater hold-out of every calibrator: metrics.json, report.md, plots, and PEBS maps."""
    from rewardsmith.calibrate.run import run_calibration
    from rewardsmith.errors import ConfigError

    # Also the group callback (registered below), so `calibrate --ratings ...` is `calibrate run --ratings ...`;
    # as the callback it does nothing before a subcommand and shows the help when called bare.
    if isinstance(ctx.command, TyperGroup):
        if ctx.invoked_subcommand is not None:
            return
        if ratings is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(code=0)
    with handle_errors():
        if out is None:
            raise ConfigError("--out is required")
        source = _source(
            ratings, data_dir, on_bad_row, model_scores, model_score, unsure, score_min, score_max
        )
        evaluation = EvalConfig(
            holdout=holdout,
            seeds=seeds,
            n_min=n_min,
            group_column=group_column,
            methods=tuple(m.strip() for m in methods.split(",") if m.strip()),
            pilot_per_rater=pilot_per_rater,
            bootstrap=bootstrap,
        )
        metrics = run_calibration(
            CalibrateRunConfig(source, out, evaluation, _ints(fit_sizes, "--fit-sizes"))
        )
        typer.echo(f"wrote {out}/metrics.json, {out}/report.md, {out}/maps.json")
        for key in (
            "rmse.pooled",
            "rmse.ols",
            "rmse.pebs",
            "gain_vs_pooled_pct.pebs",
            "p_value.pebs",
            "forecast_gain_pct",
        ):
            if key in metrics:
                typer.echo(f"  {key:26s} {metrics[key]:.4g}")


app.callback()(run)
app.command("run")(run)


@app.command("fit")
def fit(
    ratings: RatingsOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="maps file to write (.json or .parquet)")
    ] = None,
    method: Annotated[
        str, typer.Option("--method", help="calibrator (pebs, ols, pooled, group, mixedlm, ...)")
    ] = "pebs",
    n_min: NMinOpt = 6,
    group_column: GroupOpt = None,
    data_dir: DataDir = None,
    on_bad_row: OnBadRowOpt = "skip",
    model_scores: ModelScoresOpt = None,
    model_score: ModelScoreOpt = None,
    unsure: UnsureOpt = "drop",
    score_min: ScoreMinOpt = None,
    score_max: ScoreMaxOpt = None,
) -> None:
    """Fit per-rater maps on all ratings and save them for `rewardsmith score --calibration FILE --rater ID`."""
    from rewardsmith.calibrate.run import fit_calibration
    from rewardsmith.errors import ConfigError

    with handle_errors():
        if out is None:
            raise ConfigError("--out is required (a .json or .parquet file)")
        source = _source(
            ratings, data_dir, on_bad_row, model_scores, model_score, unsure, score_min, score_max
        )
        maps = fit_calibration(source, out, method=method, n_min=n_min, group_column=group_column)
        typer.echo(f"wrote {out}: {maps.n_raters} raters, method {maps.method}")
