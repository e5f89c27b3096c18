"""Typed configuration of calibration runs; light to import (the CLI reads its help text from here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rewardsmith.errors import ConfigError

if TYPE_CHECKING:
    from rewardsmith.data.ratings import RatingTable

OnBadRow = Literal["error", "skip"]
DEFAULT_METHODS = ("pooled", "group", "ols", "pebs", "pebs-centred", "pebs-uncentred", "mixedlm")


@dataclass(frozen=True)
class EvalConfig:
    """Options of the within-rater hold-out protocol (the CLI fills the same fields)."""

    holdout: float = field(default=0.2, metadata={"help": "fraction of each rater's ratings held out"})
    seeds: int = field(
        default=5, metadata={"help": "number of seeded splits (seeds first_seed, first_seed+1, ...)"}
    )
    first_seed: int = field(default=0, metadata={"help": "first split seed"})
    methods: tuple[str, ...] = field(default=DEFAULT_METHODS, metadata={"help": "calibrators to compare"})
    n_min: int = field(default=6, metadata={"help": "PEBS: fewest ratings for a rater's own OLS fit"})
    group_column: str | None = field(
        default=None,
        metadata={"help": "demographic column of the group baseline (default: the table's first one)"},
    )
    fit_per_rater: int | None = field(
        default=None,
        metadata={"help": "keep at most this many fit ratings per rater (held-out part unchanged)"},
    )
    pilot_per_rater: int = field(
        default=20,
        metadata={"help": "forecaster: ratings per rater in the pilot drawn from each rater's fit part"},
    )
    bootstrap: int = field(default=2000, metadata={"help": "bootstrap resamples of raters for the CIs"})
    confidence: float = field(default=0.95, metadata={"help": "confidence level of the intervals"})

    def validate(self) -> None:
        if not 0.0 < self.holdout < 1.0:
            raise ConfigError(f"holdout must be in (0, 1), got {self.holdout}")
        if self.seeds < 1:
            raise ConfigError(f"seeds must be at least 1, got {self.seeds}")
        if "pooled" not in self.methods:
            raise ConfigError("methods must include 'pooled' (every gain is measured against it)")
        if self.fit_per_rater is not None and self.fit_per_rater < 3:
            raise ConfigError(f"fit_per_rater must be at least 3, got {self.fit_per_rater}")


@dataclass(frozen=True)
class RatingsSource:
    """Where the ratings come from (the CLI's --ratings and friends fill these fields)."""

    ratings: str = field(
        metadata={
            "help": "a ratings file (CSV/Parquet/JSONL: rater_id, item_id, score, "
            "model_score) or a source name: pluriharms, dices-350, prism:FOLDER"
        }
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "data directory (else $REWARDSMITH_DATA_DIR, else ../shared/data)"}
    )
    on_bad_row: OnBadRow = field(
        default="skip",
        metadata={"help": "bad rows (NaN, out of range, duplicates): skip and count them, or error"},
    )
    model_scores: str | None = field(
        default=None,
        metadata={
            "help": "file of per-item model scores (item_id, model_score) replacing the source's default"
        },
    )
    model_score: str | None = field(default=None, metadata={"help": "dices-350 model score: panel or expert"})
    unsure: Literal["drop", "half"] = field(
        default="drop", metadata={"help": "dices-350 'Unsure' answers: drop them or score them 0.5"}
    )
    score_min: float | None = field(default=None, metadata={"help": "lowest valid score (file sources)"})
    score_max: float | None = field(default=None, metadata={"help": "highest valid score (file sources)"})
    seed: int = field(default=0, metadata={"help": "seed of any random choice the source makes"})

    def load(self) -> RatingTable:
        """Reads and cleans the ratings (DataError / ConfigError / UnknownNameError on bad input)."""
        from rewardsmith.data.ratings import load_ratings

        if (self.score_min is None) != (self.score_max is None):
            raise ConfigError("give both --score-min and --score-max, or neither")
        score_range = None if self.score_min is None else (float(self.score_min), float(self.score_max))  # type: ignore[arg-type]
        return load_ratings(
            self.ratings,
            data_dir=self.data_dir,
            on_bad_row=self.on_bad_row,
            model_scores=self.model_scores,
            model_score=self.model_score,
            unsure=self.unsure,
            score_range=score_range,
            seed=self.seed,
        )


@dataclass(frozen=True)
class CalibrateRunConfig:
    """A full evaluation run: source, protocol, extra fit sizes and the output folder."""

    source: RatingsSource
    out: Path = field(metadata={"help": "output folder"})
    evaluation: EvalConfig = field(default_factory=EvalConfig)
    fit_sizes: tuple[int, ...] = field(
        default=(25, 18), metadata={"help": "also evaluate with each rater's fit part capped at these sizes"}
    )
