"""Paired comparison of two models' benchmark results: per measure, the difference candidate - baseline on the
units (rows) both were scored on, a paired percentile bootstrap CI (both models resampled with the same indices)
and a verdict: "better" when the interval lies above 0, "worse" below it, "inconclusive" when it covers 0, "too few
units" when fewer than rewardsmith.stats.MIN_UNITS units are shared (Interval.verdict)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.bench.measures import MeasureUnits, paired_difference
from rewardsmith.bench.runner import BenchResult
from rewardsmith.stats import HELD, INCONCLUSIVE, NOT_HELD, Interval, json_float

VERDICTS = {HELD: "better", NOT_HELD: "worse", INCONCLUSIVE: "inconclusive"}


def verdict(diff: Interval) -> str | None:
    """ "better" / "worse" / "inconclusive" from a difference's CI against 0, "too few units" below MIN_UNITS units
    (Interval.verdict); None without a finite CI."""
    claim = diff.verdict(0.0, "units")
    return None if claim is None else VERDICTS.get(claim, claim)


SuiteUnits = Mapping[str, Mapping[str, MeasureUnits]]


def compare_units(
    candidate: SuiteUnits,
    baseline: SuiteUnits,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    labels: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """One record per measure both hold: suite, key, subset, metric, level, unit, n (units in common), difference
    (candidate - baseline, in the measure's unit), difference_ci, verdict.

    candidate, baseline: suite -> measure key -> per-unit values (BenchResult.units or read back from units_dict);
    labels: suite -> key -> {subset, metric, level, unit} for the records (default: parsed from the key).
    """
    records = []
    for suite, units in candidate.items():
        other = baseline.get(suite)
        if other is None:
            continue
        for key in units:
            if key not in other:
                continue
            try:
                diff = paired_difference(units, other, key, n_boot=n_boot, seed=seed, confidence=confidence)
            except KeyError:  # a composite whose parts the baseline lacks
                continue
            if diff.n == 0:
                continue
            subset, _, metric = key.partition("::")
            label = dict((labels or {}).get(suite, {}).get(key, {}))
            records.append(
                {
                    "suite": suite,
                    "key": key,
                    "subset": label.get("subset", subset),
                    "metric": label.get("metric", metric),
                    "level": label.get("level", "subset"),
                    "unit": label.get("unit", "%"),
                    "n": diff.n,
                    "difference": json_float(diff.estimate),
                    "difference_ci": diff.ci,
                    "verdict": verdict(diff),
                }
            )
    return records


def _labels(result: BenchResult) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        suite: {
            f"{m['subset']}::{m['metric']}": {k: m[k] for k in ("subset", "metric", "level", "unit")}
            for m in metrics["measures"]
        }
        for suite, metrics in result.suites.items()
    }


def compare_results(
    candidate: BenchResult, baseline: BenchResult, *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> list[dict[str, Any]]:
    """compare_units on two BenchResults (records labelled from the candidate's measures)."""
    return compare_units(
        candidate.units, baseline.units, n_boot=n_boot, seed=seed, confidence=confidence, labels=_labels(candidate)
    )


def compare_models(
    results: Mapping[str, BenchResult],
    baseline: str | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, list[dict[str, Any]]]:
    """Every model against the baseline (default: the first): {"<model> vs <baseline>": records}; {} with fewer
    than two models."""
    names = list(results)
    if len(names) < 2:
        return {}
    base = baseline or names[0]
    if base not in results:
        raise KeyError(f"baseline {base!r} is not among the models {names}")
    return {
        f"{name} vs {base}": compare_results(
            results[name], results[base], n_boot=n_boot, seed=seed, confidence=confidence
        )
        for name in names
        if name != base
    }
