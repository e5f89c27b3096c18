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

from rewardsmith.calibrate.config import CalibrateFitConfig, CalibrateRunConfig, EvalConfig, RatingsSource
from rewardsmith.cli.common import (
    ConfigFile,
    DataDir,
    Overwrite,
    Quiet,
    config_option,
    flag,
    handle_errors,
    int_list,
    print_result,
)

app = typer.Typer(invoke_without_command=True, rich_markup_mode=None,
                  help="Per-rater calibration of reward-model scores (PEBS and baselines).")

_S, _E = RatingsSource, EvalConfig

# Options shared by the commands, declared once (defaults from the config dataclasses).
RatingsOpt = Annotated[str | None, config_option(_S, "ratings", "--ratings")]
OnBadRowOpt = Annotated[str | None, config_option(_S, "on_bad_row", "--on-bad-row")]
ModelScoresOpt = Annotated[Path | None, config_option(_S, "model_scores", "--model-scores")]
ModelScoreOpt = Annotated[str | None, config_option(_S, "model_score", "--model-score")]
UnsureOpt = Annotated[str | None, config_option(_S, "unsure", "--unsure")]
ScoreMinOpt = Annotated[float | None, config_option(_S, "score_min", "--score-min")]
ScoreMaxOpt = Annotated[float | None, config_option(_S, "score_max", "--score-max")]
NMinOpt = Annotated[int | None, config_option(_E, "n_min", "--n-min")]
GroupOpt = Annotated[str | None, config_option(_E, "group_column", "--group-column")]
EngineOpt = Annotated[str | None, config_option(_S, "engine", "--engine")]
ModelOpt = Annotated[str | None, config_option(_S, "model", "--model", "-m")]


def _source_overrides(prefix: str, ratings: str | None, data_dir: Path | None, on_bad_row: str | None,
                      model_scores: Path | None, model_score: str | None, unsure: str | None,
                      score_min: float | None, score_max: float | None, model: str | None) -> dict[str, Any]:
    return {f"{prefix}ratings": ratings, f"{prefix}data_dir": str(data_dir) if data_dir else None,
            f"{prefix}on_bad_row": on_bad_row, f"{prefix}model_scores": str(model_scores) if model_scores else None,
            f"{prefix}model_score": model_score, f"{prefix}unsure": unsure, f"{prefix}score_min": score_min,
            f"{prefix}score_max": score_max, f"{prefix}model": model}


def run(
    ctx: typer.Context,
    ratings: RatingsOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="run folder (metrics.json, report.md/html, "
                                                                  "plots/, maps.json)  [required]",
                                             show_default=False)] = None,
    config: ConfigFile = None,
    holdout: Annotated[float | None, config_option(_E, "holdout", "--holdout")] = None,
    seeds: Annotated[int | None, config_option(_E, "seeds", "--seeds")] = None,
    methods: Annotated[str | None, config_option(_E, "methods", "--methods", help="comma-separated calibrators "
                                                                                  "to compare")] = None,
    fit_sizes: Annotated[str | None, config_option(CalibrateRunConfig, "fit_sizes", "--fit-sizes",
                                                   help="also evaluate with each rater's fit part capped at these "
                                                        "sizes (comma-separated; '' for none)")] = None,
    n_min: NMinOpt = None,
    group_column: GroupOpt = None,
    pilot_per_rater: Annotated[int | None, config_option(_E, "pilot_per_rater", "--pilot-per-rater")] = None,
    bootstrap: Annotated[int | None, config_option(_E, "bootstrap", "--bootstrap")] = None,
    data_dir: DataDir = None,
    on_bad_row: OnBadRowOpt = None,
    model_scores: ModelScoresOpt = None,
    model_score: ModelScoreOpt = None,
    unsure: UnsureOpt = None,
    score_min: ScoreMinOpt = None,
    score_max: ScoreMaxOpt = None,
    model: ModelOpt = None,
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
            raise ConfigError("--out is required (and --ratings or a --config naming the ratings); see "
                              "`rewardsmith calibrate --help`")
        cfg = load_yaml(CalibrateRunConfig, config) if config else CalibrateRunConfig()
        apply_overrides(cfg, {
            **_source_overrides("source.", ratings, data_dir, on_bad_row, model_scores, model_score, unsure,
                                score_min, score_max, model),
            "evaluation.holdout": holdout, "evaluation.seeds": seeds, "evaluation.n_min": n_min,
            "evaluation.group_column": group_column, "evaluation.pilot_per_rater": pilot_per_rater,
            "evaluation.bootstrap": bootstrap,
            "evaluation.methods": [m.strip() for m in methods.split(",") if m.strip()] if methods is not None else None,
            "fit_sizes": int_list(fit_sizes, "--fit-sizes", minimum=3, allow_empty=True),
        })
        print_result(run_calibrate(cfg, out, overwrite, progress=not quiet))


app.callback()(run)
app.command("run")(run)


@app.command("fit")
def fit(
    ratings: RatingsOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="maps file to write (.json or .parquet)  "
                                                                  "[required]", show_default=False)] = None,
    config: ConfigFile = None,
    method: Annotated[str | None, config_option(CalibrateFitConfig, "method", "--method")] = None,
    n_min: NMinOpt = None,
    group_column: GroupOpt = None,
    data_dir: DataDir = None,
    on_bad_row: OnBadRowOpt = None,
    model_scores: ModelScoresOpt = None,
    model_score: ModelScoreOpt = None,
    unsure: UnsureOpt = None,
    score_min: ScoreMinOpt = None,
    score_max: ScoreMaxOpt = None,
    engine: EngineOpt = None,
    model: ModelOpt = None,
    quiet: Quiet = False,
    overwrite: Annotated[bool, flag("--overwrite", help="replace --out when an earlier `rewardsmith calibrate fit` "
                                                        "wrote it (any other existing file is refused)")] = False,
) -> None:
    """Fit per-rater maps on all ratings and save them for `rewardsmith score --calibration FILE --rater ID`."""
    from rewardsmith.config import apply_overrides, load_yaml
    from rewardsmith.errors import ConfigError
    from rewardsmith.jobs.calibrate import run_calibrate_fit

    with handle_errors():
        if out is None:
            raise ConfigError("--out is required (a .json or .parquet file)")
        cfg = load_yaml(CalibrateFitConfig, config) if config else CalibrateFitConfig()
        apply_overrides(cfg, {
            **_source_overrides("source.", ratings, data_dir, on_bad_row, model_scores, model_score, unsure,
                                score_min, score_max, model),
            "method": method, "n_min": n_min, "group_column": group_column, "source.engine": engine})
        print_result(run_calibrate_fit(cfg, out, overwrite))
