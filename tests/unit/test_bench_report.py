"""The report card lays out what it is given: every suite's tables and figures, the paired differences with
verdicts, the suites not run with what to put where, the texts scored; metrics.json-ready."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_bench_fixtures import TableScore, all_rewards, synthetic_releases, write_reward_bench_2

from rewardsmith.bench.compare import compare_models
from rewardsmith.bench.runner import bench_metrics, load_suites, run_suites
from rewardsmith.bench.suite import EvalOptions
from rewardsmith.report.bench import bench_report, main_rows, md_text, model_rows, secondary_rows, summary_rows

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def sample_metrics(data_dir: Path) -> dict[str, Any]:
    """Two models over synthetic releases of every suite but the local one (reported missing)."""
    models = synthetic_releases(data_dir)
    loaded, missing = load_suites(data_dir)
    options = EvalOptions(n_boot=200)
    results = {name: run_suites(loaded, TableScore(rewards), options) for name, rewards in models.rewards.items()}
    return bench_metrics(results, missing, compare_models(results, n_boot=200))


@pytest.mark.slow
def test_report_card_lays_out_every_suite(tmp_path: Path) -> None:
    metrics = sample_metrics(tmp_path / "data")
    json.dumps(metrics, allow_nan=False)  # JSON-ready
    md_path, html_path = bench_report(metrics, tmp_path / "run")
    text = md_path.read_text(encoding="utf-8")
    for heading in (
        "## Summary",
        "## RewardBench",
        "## RewardBench 2",
        "## PPE human preference",
        "## PPE correctness (best-of-K)",
        "## RM-Bench",
        "## Paired differences: rm-large vs rm-small",
        "## Not run",
        "## Models and texts scored",
    ):
        assert f"\n{heading}\n" in text, heading
    assert "**local**: missing: put the local preference sets (hh-rlhf/" in text
    assert "Ties score components" in text and "Style matrix" in text
    assert "better" in text or "worse" in text or "inconclusive" in text
    pngs = sorted(p.name for p in (tmp_path / "run" / "plots").glob("*.png"))
    assert "ppe_correctness_best_of_k.png" in pngs and "reward_bench_scores.png" in pngs
    assert "differences_rm_large_vs_rm_small.png" in pngs and "rm_bench_difficulty.png" in pngs
    for name in pngs:
        assert (tmp_path / "run" / "plots" / name).read_bytes()[:8] == PNG_MAGIC
        assert f"plots/{name}" in text
    assert "<table>" in html_path.read_text(encoding="utf-8")


def test_tables_show_scores_with_intervals_and_the_length_rule(tmp_path: Path) -> None:
    metrics = sample_metrics(tmp_path / "data")
    summary = {row["suite"]: row for row in summary_rows(metrics)}
    rb2 = summary["RewardBench 2"]
    record = next(
        m for m in metrics["results"]["rm-small"]["suites"]["reward-bench-2"]["measures"] if m["subset"] == "overall"
    )
    low, high = record["score_ci"]
    assert rb2["rm-small"] == f"{record['score']:.1f} [{low:.1f}, {high:.1f}]"
    assert rb2["length rule"].startswith(f"{record['length_rule']:.1f}")
    scores, diagnostics = main_rows(metrics, "reward-bench")
    assert [r["subset"] for r in scores[:5]] == ["overall", "Chat", "Chat Hard", "Safety", "Reasoning"]
    assert {"rm-small: length-controlled", "rm-large: corr(reward, length)"} <= set(diagnostics[0])
    secondary = secondary_rows(metrics, "rm-bench")
    assert {r["scored by"] for r in secondary} == {"rm-small", "rm-large", "length rule"}
    assert {"easy", "normal", "hard", "hard - easy"} <= set(secondary[0])
    # The length rule on RM-Bench: a more styled variant is longer, and "rejected" is longer than "chosen" in
    # the synthetic texts, so it wins every easy comparison and loses every other.
    rule = next(r for r in secondary if r["subset"] == "chat" and r["scored by"] == "length rule")
    assert [rule[k].split(" ")[0] for k in ("easy", "normal", "hard")] == ["100.0", "0.0", "0.0"]


def test_single_model_report_keeps_one_table_per_suite(tmp_path: Path) -> None:
    write_reward_bench_2(tmp_path / "data")
    loaded, missing = load_suites(tmp_path / "data", ["reward-bench-2"])
    result = run_suites(loaded, TableScore(all_rewards()), EvalOptions(n_boot=100))
    metrics = bench_metrics({"only": result}, missing)
    scores, diagnostics = main_rows(metrics, "reward-bench-2")
    assert diagnostics == [] and {"subset", "metric", "n", "chance", "length rule", "score"} <= set(scores[0])
    # Best-of-4 is not pairwise: the length-controlled column is n/a throughout and left out. Within each subset
    # the fixture's responses have one length (no correlation); pooled over subsets they do not.
    assert "length-controlled" not in scores[0]
    assert [row["corr(reward, length)"] == "n/a" for row in scores] == [False, True, True, True]
    md, _ = bench_report(metrics, tmp_path / "run")
    text = md.read_text(encoding="utf-8")
    assert "Paired differences" not in text and "## Not run" not in text
    assert np.isfinite(float(scores[0]["score"].split(" ")[0]))


def test_sets_a_model_was_trained_on_are_named_and_free_text_stays_literal(tmp_path: Path) -> None:
    write_reward_bench_2(tmp_path / "data")
    loaded, missing = load_suites(tmp_path / "data", ["reward-bench-2", "ppe-correctness"])
    options = EvalOptions(n_boot=50)
    results = {name: run_suites(loaded, TableScore(all_rewards()), options) for name in ("one", "two")}
    metrics = bench_metrics(results, missing, compare_models(results, n_boot=50))
    metrics["model_info"] = {
        "one": {
            "source": "runs/one/model",
            "kind": "rewardsmith",
            "template": "hh",
            "max_length": 256,
            "precision": "fp32",
            "trained_on": "Factuality",
            "training_sets": [{"suite": "reward-bench-2", "subset": "Factuality"}],
            "truncation": {"prompt_truncated": 3, "response_truncated": 1},
            "timing": {"texts_per_s": 12.5},
            "from_earlier_run": True,
        }
    }
    scores, _ = main_rows(metrics, "reward-bench-2")
    trained = {row["subset"]: row["trained on this set"] for row in scores}
    assert trained["Factuality"] == "one" and trained["overall"] == "" and trained["Focus"] == ""
    assert all(row["one"].split(" ")[0].replace(".", "").isdigit() for row in scores)  # numbers stay numbers
    rows = {row["model"]: row for row in model_rows(metrics)}
    assert rows["one"]["read as"] == "rewardsmith, hh template, 256 tokens, fp32"
    assert rows["one"]["prompt / response cut"] == "3 / 1" and rows["one"]["texts/s"] == "12.5 (earlier run)"
    assert "source" not in rows["two"]  # a model without model_info gets the counters only
    assert md_text("data/train-*.parquet and PPE-*-Best") == "data/train-\\*.parquet and PPE-\\*-Best"
    _, html_path = bench_report(metrics, tmp_path / "run")
    page = html_path.read_text(encoding="utf-8")
    assert "lmarena-ai/PPE-*-Best-of-K release folder" in page  # the glob reads literally, not as emphasis
    assert "<em>trained on this set</em>: one on Factuality" in page
