"""Loading the suites whose data is present and evaluating them with one score function.

    loaded, missing = load_suites(data_dir, limit=200)          # what is there, and what to put where
    result = run_suites(loaded, score)                          # every distinct text scored in one call
    metrics = bench_metrics({"my-rm": result}, missing)         # the report card's metrics dict

`run_suites` collects every distinct (prompt, response) across all suites (multi-completion rows included),
calls `score` once on them, refuses a non-finite reward with a one-line DataError naming the suite, row and
response, and evaluates each suite's measures: the score with its bootstrap CI, the length rule, the
length-controlled accuracy where the measure is pairwise, and the reward-length Spearman correlation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rewardsmith.bench.measures import MeasureUnits, Units, interval, measure_value, units_from_dict
from rewardsmith.bench.metrics import reward_length_correlation
from rewardsmith.bench.registry import discover_suites, get_suites
from rewardsmith.bench.schema import Missing, ScoreFn, SuiteData, Text
from rewardsmith.bench.suite import EvalOptions, LoadRequest, Measure, PairView, Suite
from rewardsmith.data.adapters._common import one_line
from rewardsmith.data.sources import resolve_data_dir
from rewardsmith.errors import DataError
from rewardsmith.evaluate.metrics import json_float, length_controlled_accuracy
from rewardsmith.io.jsonsafe import json_ready

FloatArray = NDArray[np.float64]


# ----------------------------------------------------------------------------------------------------- loading


def load_suites(
    data_dir: str | Path | None = None,
    names: Sequence[str] | None = None,
    *,
    limit: int | None = None,
    hub: bool = False,
) -> tuple[list[SuiteData], list[Missing]]:
    """Loads every suite (or those named) whose data is present.

    data_dir: the data directory (default: $REWARDSMITH_DATA_DIR, else ../shared/data); limit: at most this many
    rows per subset; hub: read a release that is not on disk from the hub (needs the network). Returns (the loaded
    suites' data, in report order; a Missing note for each suite whose release is absent). A release present with
    a wrong schema raises a one-line DataError.
    """
    request = LoadRequest(resolve_data_dir(data_dir), limit, hub)
    loaded: list[SuiteData] = []
    missing: list[Missing] = []
    for suite in get_suites(names):
        outcome = suite.load(request)
        (missing if isinstance(outcome, Missing) else loaded).append(outcome)  # type: ignore[arg-type]
    return loaded, missing


# ----------------------------------------------------------------------------------------------------- results


@dataclass
class BenchResult:
    """One model's results over the suites it was run on.

    suites: suite name -> JSON-ready metrics {title, release, source, summary, measures (records in display order),
    extras}; units: suite name -> measure key -> the per-unit values behind it (for paired comparisons; saved with
    units_dict); texts: {requested, scored, reused}: texts the suites asked for, distinct texts scored, and the
    difference.
    """

    suites: dict[str, dict[str, Any]]
    units: dict[str, dict[str, MeasureUnits]]
    texts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready metrics (NaN as null): {"texts": ..., "suites": ...}."""
        return dict(json_ready({"texts": dict(self.texts), "suites": self.suites}))

    def units_dict(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The JSON-ready per-unit values: {suite: {measure key: Units / Composite .to_dict()}}."""
        return {suite: {key: u.to_dict() for key, u in units.items()} for suite, units in self.units.items()}

    @classmethod
    def from_dicts(
        cls, metrics: Mapping[str, Any], units: Mapping[str, Mapping[str, Mapping[str, Any]]]
    ) -> BenchResult:
        """A result read back from its to_dict and units_dict forms."""
        return cls(
            dict(metrics["suites"]),
            {s: {k: units_from_dict(u) for k, u in per.items()} for s, per in units.items()},
            dict(metrics.get("texts", {})),
        )


def _ci(low: float, high: float) -> list[float | None]:
    return [json_float(low), json_float(high)]


def _n_units(units: Mapping[str, MeasureUnits], key: str) -> int:
    measure = units[key]
    if isinstance(measure, Units):
        return measure.n
    return sum(_n_units(units, part) for part in measure.weights)


def _length_controlled(pairs: PairView, options: EvalOptions) -> dict[str, Any]:
    # A strict measure counts a tied margin as wrong: margins mapped to +1 / -1 make the shared definition's
    # 1/2-for-a-tie rule never apply.
    margins = np.where(pairs.margins > 0, 1.0, -1.0) if pairs.strict else pairs.margins
    lc = length_controlled_accuracy(
        margins,
        pairs.preferred_len,
        pairs.dispreferred_len,
        n_boot=options.n_boot,
        confidence=options.confidence,
        seed=options.seed,
    )
    return {
        "length_controlled": json_float(lc.value.estimate),
        "length_controlled_ci": lc.value.ci,
        "length_controlled_n": lc.value.n,
        "equal_length_n": lc.n_equal,
    }


def _parts(measures: Mapping[str, Measure], key: str) -> list[Measure]:
    """The base measures under a measure (itself when it is one)."""
    measure = measures[key]
    if isinstance(measure.units, Units):
        return [measure]
    return [base for part in measure.units.weights for base in _parts(measures, part)]


def _diagnostics(measures: Mapping[str, Measure], key: str) -> tuple[PairView | None, tuple[int, ...] | None]:
    """(pairs, rows) behind a measure for its length diagnostics; a composite pools its base measures' pairs and
    rows (None where a part has none)."""
    measure = measures[key]
    if isinstance(measure.units, Units):
        return measure.pairs, measure.rows
    parts = _parts(measures, key)
    pairs = [p.pairs for p in parts]
    rows = [p.rows for p in parts]
    pooled = None
    if parts and all(v is not None for v in pairs):
        views = [v for v in pairs if v is not None]
        pooled = PairView(
            np.concatenate([v.margins for v in views]),
            np.concatenate([v.preferred_len for v in views]),
            np.concatenate([v.dispreferred_len for v in views]),
            strict=views[0].strict,
        )
    union = None
    if parts and all(r is not None for r in rows):
        union = tuple(sorted({i for r in rows if r is not None for i in r}))
    return pooled, union


def evaluate_suite(
    suite: Suite, data: SuiteData, rewards: Sequence[FloatArray], options: EvalOptions = EvalOptions()
) -> tuple[dict[str, Any], dict[str, MeasureUnits]]:
    """One suite's metrics and per-unit values from its rows' rewards (one (K_i,) array per row).

    Calls suite.measure with the rewards and again with the response lengths (the length rule). Each measure
    record holds subset, metric, level, primary, unit, n (units), score and score_ci, length_rule and
    length_rule_ci, chance, and where defined length_controlled (+ _ci, _n, equal_length_n) and
    length_correlation (+ _ci); a composite's length diagnostics pool the pairs and rows of its parts.
    Returns (metrics {title, release, source, summary, measures, extras}, units).
    """
    model = suite.measure(data, rewards, options)
    rule = suite.measure(data, [row.lengths() for row in data.rows], options)
    by_key = {m.key: m for m in model.measures}
    units = {m.key: m.units for m in model.measures}
    rule_units = {m.key: m.units for m in rule.measures}
    correlations: dict[tuple[int, ...], Any] = {}
    records = []
    for m in model.measures:
        record: dict[str, Any] = {
            "subset": m.subset,
            "metric": m.metric,
            "level": m.level,
            "primary": m.primary,
            "unit": m.unit,
            "n": _n_units(units, m.key),
        }
        low, high = interval(units, m.key, options.n_boot, options.seed, options.confidence)
        record.update(score=json_float(measure_value(units, m.key)), score_ci=_ci(low, high))
        if m.key in rule_units:
            low, high = interval(rule_units, m.key, options.n_boot, options.seed, options.confidence)
            record.update(length_rule=json_float(measure_value(rule_units, m.key)), length_rule_ci=_ci(low, high))
        record["chance"] = m.chance
        pairs, rows = _diagnostics(by_key, m.key)
        if pairs is not None and pairs.margins.size:
            record.update(_length_controlled(pairs, options))
        if rows:
            if rows not in correlations:
                correlations[rows] = reward_length_correlation(
                    [rewards[i] for i in rows],
                    [data.rows[i].lengths() for i in rows],
                    n_boot=options.n_boot,
                    confidence=options.confidence,
                    seed=options.seed,
                )
            corr = correlations[rows]
            record.update(length_correlation=json_float(corr.estimate), length_correlation_ci=corr.ci)
        records.append(record)
    extras = dict(model.extras)
    if rule.extras:
        extras["length_rule"] = rule.extras
    metrics = {
        "title": suite.title,
        "release": suite.release,
        "source": suite.source,
        "summary": data.summary(),
        "measures": records,
        "extras": extras,
    }
    return metrics, units


# ----------------------------------------------------------------------------------------------------- scoring


def collect_texts(datasets: Sequence[SuiteData]) -> tuple[list[Text], list[list[NDArray[np.int64]]], int]:
    """(distinct texts in order of first use, per suite per row the indices of its responses' texts, texts
    requested). A (prompt, response) shared by several rows or suites is listed once."""
    index: dict[Text, int] = {}
    texts: list[Text] = []
    refs: list[list[NDArray[np.int64]]] = []
    requested = 0
    for data in datasets:
        suite_refs = []
        for row in data.rows:
            ids = []
            for text in row.texts():
                requested += 1
                position = index.get(text)
                if position is None:
                    position = index[text] = len(texts)
                    texts.append(text)
                ids.append(position)
            suite_refs.append(np.asarray(ids, dtype=np.int64))
        refs.append(suite_refs)
    return texts, refs, requested


def _refuse_non_finite(
    rewards: FloatArray, datasets: Sequence[SuiteData], refs: Sequence[Sequence[NDArray[np.int64]]]
) -> None:
    bad = ~np.isfinite(rewards)
    if not bad.any():
        return
    for data, suite_refs in zip(datasets, refs, strict=True):
        for row, ids in zip(data.rows, suite_refs, strict=True):
            for k, position in enumerate(ids):
                if bad[position]:
                    raise DataError(
                        f"{data.suite}: row {row.row_id!r}: the score function returned "
                        f"{rewards[position]} for response {k + 1} "
                        f"({one_line(row.responses[k], 60)!r}); rewards must be finite numbers"
                    )


def run_suites(
    datasets: Sequence[SuiteData],
    score: ScoreFn,
    options: EvalOptions = EvalOptions(),
    suites: Mapping[str, Suite] | None = None,
) -> BenchResult:
    """Scores every distinct text of the loaded suites with one call of `score` and evaluates each suite.

    datasets: from load_suites (or a suite's load); score: texts -> rewards (len(texts),) float64; suites: name ->
    Suite (default: every suite found). Raises DataError when score returns the wrong shape or a non-finite
    reward (naming suite, row and response).
    """
    suites = dict(suites) if suites is not None else discover_suites()
    texts, refs, requested = collect_texts(datasets)
    rewards = np.asarray(score(texts), dtype=np.float64) if texts else np.empty(0)
    if rewards.shape != (len(texts),):
        raise DataError(f"the score function returned shape {rewards.shape} for {len(texts)} texts")
    _refuse_non_finite(rewards, datasets, refs)
    result = BenchResult({}, {}, {"requested": requested, "scored": len(texts), "reused": requested - len(texts)})
    for data, suite_refs in zip(datasets, refs, strict=True):
        metrics, units = evaluate_suite(suites[data.suite], data, [rewards[ids] for ids in suite_refs], options)
        result.suites[data.suite] = metrics
        result.units[data.suite] = units
    return result


def bench_metrics(
    results: Mapping[str, BenchResult],
    missing: Sequence[Missing] = (),
    comparisons: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The report card's metrics dict: {"models": [names in order], "results": {model: result.to_dict()},
    "missing": [Missing.to_dict()], "comparisons": {"<candidate> vs <baseline>": [records]}} (see
    rewardsmith.bench.compare.compare_models)."""
    return {
        "models": list(results),
        "results": {name: r.to_dict() for name, r in results.items()},
        "missing": [m.to_dict() for m in missing],
        "comparisons": {k: [dict(r) for r in v] for k, v in (comparisons or {}).items()},
    }
