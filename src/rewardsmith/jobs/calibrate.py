"""`rewardsmith calibrate` (evaluate per-rater calibration into a run folder) and `rewardsmith calibrate fit`
(fit one calibrator's maps for `rewardsmith score --calibration`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardsmith.calibrate.config import CalibrateFitConfig, CalibrateRunConfig, RatingsSource
from rewardsmith.calibrate.maps import maps_bytes, save_maps
from rewardsmith.calibrate.run import evaluate_calibration, fit_calibration
from rewardsmith.data.ratings import RatingTable, with_model_scores
from rewardsmith.errors import ConfigError
from rewardsmith.inference import load_inference
from rewardsmith.io.environment import environment_info
from rewardsmith.io.outputs import check_output, write_output
from rewardsmith.jobs.common import JobResult, open_run, truncation_line, written_line
from rewardsmith.report.calibrate import calibration_report

HEADLINE = ("rmse.pooled", "rmse.ols", "rmse.pebs", "gain_vs_pooled_pct.pebs", "p_value.pebs", "forecast_gain_pct")


def _data_lines(data: dict[str, Any]) -> list[str]:
    dropped = {k: v for k, v in data.items() if k.startswith("dropped") and v}
    line = f"read {data['ratings_kept']} ratings from {data['raters']} raters"
    line += f" on {data['items']} items" if "items" in data else ""  # an engine's statistics do not count items
    if dropped:
        line += " (" + ", ".join(f"{k.replace('dropped_', 'dropped ')}: {v}" for k, v in dropped.items()) + ")"
    return [line]


def scored_by_model(source: RatingsSource) -> tuple[RatingTable | None, list[str]]:
    """With source.model: the ratings with every item scored by that reward model (its rewards as the model score)
    and a summary line; else (None, [])."""
    if source.model is None:
        return None, []
    if source.model_scores is not None or source.model_score is not None:
        raise ConfigError("--model scores the items itself: give it without --model-scores / --model-score")
    table = source.load()
    if not table.items:
        raise ConfigError(
            f"--model: the ratings of {table.name} carry no item texts to score (a ratings file needs a "
            "`response` column, and a `prompt` column for prompted items)"
        )
    inference = load_inference(source.model)
    ids = sorted(table.items)
    rewards = inference.score_texts([table.items[i] for i in ids]).rewards
    note = f"rewards of {source.model} ({inference.loaded.kind} model, template {inference.loaded.template})"
    lines = [
        f"scored {len(ids)} rated items with {source.model}",
        truncation_line(inference.counts, f"item texts (at {inference.loaded.max_length} tokens)"),
    ]
    return with_model_scores(table, dict(zip(ids, rewards.tolist(), strict=True)), note), lines


def run_calibrate(
    cfg: CalibrateRunConfig, out: str | Path, overwrite: bool = False, progress: bool = False
) -> JobResult:
    """Hold-out evaluation of every calibrator into the run folder `out` (metrics.json, report.md/html, plots/,
    maps.json with PEBS fitted on all ratings). progress: a line per split seed."""
    cfg.evaluation.validate()
    with open_run(out, "calibrate", cfg, overwrite) as folder:
        table, scored = scored_by_model(cfg.source)
        metrics, maps = evaluate_calibration(cfg, progress, table)
        metrics["environment"] = environment_info(cfg.evaluation.first_seed)
        save_maps(maps, folder.claim("maps.json"))
        folder.write_json("metrics.json", metrics)
        folder.claim("plots")
        calibration_report(metrics, folder)
        folder.mark_complete()
        rows = [{"metric": key, "value": f"{metrics[key]:.4g}"} for key in HEADLINE if key in metrics]
        sparse = metrics["pebs_full_fit"].get("n_sparse")
        summary = [*scored, *_data_lines(metrics.get("data", {}))]
        if sparse:
            summary.append(f"{sparse} raters have too few ratings for their own fit: they get the population map")
        bad = metrics["pebs_full_fit"].get("raters_with_nonpositive_shrunk_slope") or []
        if bad:
            summary.append(f"{len(bad)} rater(s) keep a non-positive shrunk slope: {', '.join(bad[:10])}")
        summary.append(written_line(folder, ["metrics.json", "report.md", "report.html", "plots", "maps.json"]))
        return JobResult(folder.path, f"rewardsmith calibrate -> {out}", metrics, rows, summary)


def run_calibrate_fit(cfg: CalibrateFitConfig, out: str | Path, overwrite: bool = False) -> JobResult:
    """Fits one calibrator on all ratings and writes its maps to `out` (.json or .parquet), atomically; an existing
    file is replaced only with `overwrite` and only when an earlier `calibrate fit` wrote it."""
    path = check_output(out, overwrite)
    if path.suffix.lower() not in (".json", ".parquet"):
        raise ConfigError(f"--out must be a .json or .parquet file, got {path.name!r}")
    table, scored = scored_by_model(cfg.source)
    maps = fit_calibration(cfg, table)
    write_output(path, lambda fh: fh.write(maps_bytes(maps, path.suffix)), "calibrate fit", overwrite)
    data = maps.info.get("data", {})
    return JobResult(
        path,
        f"fitted {maps.method} maps of {maps.n_raters} raters -> {path}",
        {"raters": maps.n_raters},
        [],
        [*scored, *_data_lines(data), f"wrote {path}"],
    )
