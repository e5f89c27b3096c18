"""Typed configuration of calibration runs, in the style of every rewardsmith config: dataclasses whose fields
carry their help text and checks; YAML (`rewardsmith calibrate --config FILE`) and flags only fill them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rewardsmith.config import MAX_SEED, option
from rewardsmith.errors import ConfigError

if TYPE_CHECKING:
    from rewardsmith.data.ratings import RatingTable

DEFAULT_METHODS = ["pooled", "group", "ols", "pebs", "pebs-centred", "pebs-uncentred", "mixedlm"]


@dataclass
class EvalConfig:
    """Options of the within-rater hold-out protocol."""

    holdout: float = option(0.2, "fraction of each rater's ratings held out", min=0.0, max=1.0, min_exclusive=True)
    seeds: int = option(5, "number of seeded splits (seeds first_seed, first_seed+1, ...)", min=1)
    first_seed: int = option(0, "first split seed", min=0, max=MAX_SEED)
    methods: list[str] = option(DEFAULT_METHODS, "calibrators to compare (pooled is always the reference)")
    n_min: int = option(6, "PEBS: fewest ratings for a rater's own OLS fit", min=2)
    group_column: str | None = option(None, "demographic column of the group baseline (default: the table's first one)")
    fit_per_rater: int | None = option(
        None, "keep at most this many fit ratings per rater (held-out part unchanged)", min=3
    )
    pilot_per_rater: int = option(
        20, "forecaster: ratings per rater in the pilot drawn from each rater's fit part", min=3
    )
    bootstrap: int = option(2000, "bootstrap resamples of raters for the CIs", min=10)
    confidence: float = option(0.95, "confidence level of the intervals", min=0.5, max=0.999)

    def validate(self) -> None:
        if not self.methods:
            raise ConfigError("methods is empty: give at least pooled and one calibrator, e.g. --methods pooled,pebs")
        if self.holdout >= 1.0:
            raise ConfigError(f"holdout must be below 1, got {self.holdout}")
        if "pooled" not in self.methods:
            raise ConfigError("methods must include 'pooled' (every gain is measured against it)")


@dataclass
class RatingsSource:
    """Where the ratings come from."""

    ratings: str = option(
        "",
        "a ratings file (CSV / Parquet / JSONL: rater_id, item_id, score, model_score) or a "
        "source name: pluriharms, dices-350, prism:FOLDER",
    )
    data_dir: str | None = option(
        None, "data directory (else $REWARDSMITH_DATA_DIR, else ../shared/data)", volatile=True
    )
    on_bad_row: str = option(
        "skip", "bad rows (NaN, out of range, duplicates): skip and count them, or error", choices=("skip", "error")
    )
    model_scores: str | None = option(
        None, "file of per-item model scores (item_id, model_score) replacing the source's default"
    )
    model_score: str | None = option(None, "dices-350 model score: panel or expert", choices=("panel", "expert"))
    unsure: str = option("drop", "dices-350 'Unsure' answers: drop them or score them 0.5", choices=("drop", "half"))
    score_min: float | None = option(None, "lowest valid score (file sources)")
    score_max: float | None = option(None, "highest valid score (file sources)")
    seed: int = option(0, "seed of any random choice the source makes", min=0, max=MAX_SEED)
    model: str | None = option(
        None,
        "a reward model (any kind `rewardsmith score` takes) that scores the rated items "
        "itself: its rewards replace the source's model score (the source must carry the items' "
        "texts: pluriharms, dices-350, or a file with prompt/response columns)",
    )
    engine: str = option(
        "memory",
        "what reads the ratings: memory (any source, cleaned in pandas), duckdb or spark "
        "(Parquet: a path, glob, folder or URI; the engine computes per-rater statistics and the "
        "rows never reach this process; docs/scale.md)",
    )

    def score_range(self) -> tuple[float, float] | None:
        """The declared [score_min, score_max] (None when neither is given); ConfigError for one without the other
        or an empty range."""
        if self.score_min is None and self.score_max is None:
            return None
        if self.score_min is None or self.score_max is None:
            raise ConfigError("give both --score-min and --score-max, or neither")
        if self.score_min >= self.score_max:
            raise ConfigError(f"score_min ({self.score_min:g}) must be below score_max ({self.score_max:g})")
        return float(self.score_min), float(self.score_max)

    def load(self) -> RatingTable:
        """Reads and cleans the ratings into memory (DataError / ConfigError / UnknownNameError on bad input);
        whatever `engine` says (calibrate.readers.ENGINES reads through it)."""
        from rewardsmith.data.ratings import load_ratings

        if not self.ratings:
            raise ConfigError("--ratings is required (a ratings file or a source name such as pluriharms)")
        score_range = self.score_range()
        return load_ratings(
            self.ratings,
            data_dir=self.data_dir,
            on_bad_row=self.on_bad_row,  # type: ignore[arg-type]
            model_scores=self.model_scores,
            model_score=self.model_score,
            unsure=self.unsure,  # type: ignore[arg-type]
            score_range=score_range,
            seed=self.seed,
        )


@dataclass
class CalibrateRunConfig:
    """A full evaluation run: the ratings, the hold-out protocol and the extra fit sizes."""

    source: RatingsSource = field(default_factory=RatingsSource)
    evaluation: EvalConfig = field(default_factory=EvalConfig)
    fit_sizes: list[int] = option([25, 18], "also evaluate with each rater's fit part capped at these sizes", min=3)


@dataclass
class CalibrateFitConfig:
    """Fitting one calibrator on all ratings, for `rewardsmith score --calibration`."""

    source: RatingsSource = field(default_factory=RatingsSource)
    method: str = option("pebs", "calibrator (pebs, ols, pooled, group, mixedlm, ...)")
    n_min: int = option(6, "PEBS: fewest ratings for a rater's own OLS fit", min=2)
    group_column: str | None = option(None, "demographic column of the group calibrator")
