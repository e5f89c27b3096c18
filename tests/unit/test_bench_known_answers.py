"""Known answers the other bench tests leave out: RM-Bench easy / normal / hard / avg and the style gap through
its suite, the local suite's overall (each set weighs the same), and a suite added as one new module of
bench/suites/ being found, selected and scored with nothing else changed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_bench_fixtures import TableScore, write_rm_bench_chat

from rewardsmith.bench import suites as suites_package
from rewardsmith.bench.registry import discover_suites, select_suites
from rewardsmith.bench.runner import BenchResult, load_suites, run_suites
from rewardsmith.bench.schema import BenchRow, SuiteData
from rewardsmith.bench.suite import EvalOptions
from rewardsmith.data.schema import Turn

OPTIONS = EvalOptions(n_boot=100, seed=0)


def _measures(result: BenchResult, suite: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["subset"], m["metric"]): m for m in result.suites[suite]["measures"]}


# Responses of write_rm_bench_chat: f"c{prompt}{style}" + "." * style (chosen), "r..." (rejected).
RM_REWARDS = {
    # prompt 0: chosen styles 1, 2, 3 against rejected 0, 2.5, 4
    "c00": 1.0,
    "c01.": 2.0,
    "c02..": 3.0,
    "r00": 0.0,
    "r01.": 2.5,
    "r02..": 4.0,
    # prompt 1: every chosen style 5 against rejected 5, 1, 1 (5 = 5 is a tie: wrong)
    "c10": 5.0,
    "c11.": 5.0,
    "c12..": 5.0,
    "r10": 5.0,
    "r11.": 1.0,
    "r12..": 1.0,
}


def test_rm_bench_difficulties_and_style_gap_by_hand(tmp_path: Path) -> None:
    write_rm_bench_chat(tmp_path, prompts=2)
    loaded, missing = load_suites(tmp_path, ["rm-bench"])
    assert not missing
    result = run_suites(loaded, TableScore(RM_REWARDS), OPTIONS)
    m = _measures(result, "rm-bench")
    # Cell (i, j): chosen in style i beats rejected in style j. Prompt 0: row i=0 [T F F], i=1 [T F F],
    # i=2 [T T F]; hard (i < j) 0/3, normal (i = j) 1/3, easy (i > j) 3/3, avg 4/9.
    # Prompt 1: every row [F T T]; hard 3/3, normal 2/3, easy 1/3, avg 6/9.
    expected = {"hard": (0 + 1) / 2, "normal": (1 / 3 + 2 / 3) / 2, "easy": (1 + 1 / 3) / 2, "avg": (4 / 9 + 6 / 9) / 2}
    for subset in ("overall", "chat"):  # chat is the one domain present, so it is the overall
        for metric, value in expected.items():
            assert m[(subset, metric)]["score"] == pytest.approx(100 * value), (subset, metric)
        assert m[(subset, "hard - easy")]["score"] == pytest.approx(100 * ((0 - 1) + (1 - 1 / 3)) / 2)
        assert m[(subset, "avg")]["n"] == 2
    assert m[("overall", "avg")]["primary"] and not m[("overall", "hard")]["primary"]
    matrix = result.suites["rm-bench"]["extras"]["matrices"]["overall"]["matrix"]
    assert [[round(v, 6) for v in row] for row in matrix] == [
        [50.0, 50.0, 50.0],
        [50.0, 50.0, 50.0],
        [50.0, 100.0, 50.0],
    ]
    notes = result.suites["rm-bench"]["summary"]["notes"]
    assert any(n.startswith("code: missing: put code_filtered.json") for n in notes)


def _pair(row_id: str, subset: str, preferred: str, other: str) -> BenchRow:
    return BenchRow(row_id, subset, (Turn("user", f"question {row_id}"),), (preferred, other))


def test_local_overall_is_the_plain_mean_of_the_sets() -> None:
    # Set "big": right, right, a tie (1/2) -> 5/6; set "small": wrong -> 0. The overall is (5/6 + 0) / 2, not the
    # pooled 2.5 / 4.
    rows = [
        _pair("b1", "big", "good 1", "bad 1"),
        _pair("b2", "big", "good 2", "bad 2"),
        _pair("b3", "big", "tie a", "tie b"),
        _pair("s1", "small", "good s", "bad s"),
    ]
    rewards = {
        "good 1": 1.0,
        "bad 1": 0.0,
        "good 2": 3.0,
        "bad 2": -1.0,
        "tie a": 2.0,
        "tie b": 2.0,
        "good s": 0.0,
        "bad s": 1.0,
    }
    result = run_suites([SuiteData("local", rows, sources=["x"], read=4)], TableScore(rewards), OPTIONS)
    m = _measures(result, "local")
    assert m[("big", "accuracy")]["score"] == pytest.approx(100 * 5 / 6)
    assert m[("small", "accuracy")]["score"] == pytest.approx(0.0)
    assert m[("overall", "accuracy")]["score"] == pytest.approx(100 * (5 / 6 + 0) / 2)
    assert m[("overall", "accuracy")]["level"] == "overall"


EXTRA_SUITE = '''
"""A suite that exists only in this test: every row's first response is right."""
from rewardsmith.bench.build import pairwise_measure, rows_by_subset
from rewardsmith.bench.schema import BenchRow, SuiteData
from rewardsmith.bench.suite import Suite, SuiteMeasures
from rewardsmith.data.schema import Turn


def load(request):
    rows = [BenchRow("1", "only", (Turn("user", "q"),), ("extra right", "extra wrong"))]
    return SuiteData("extra-suite", rows, sources=["inline"], read=1)


def measure(data, rewards, options):
    return SuiteMeasures([pairwise_measure(name, "accuracy", data, rewards, rows, strict=True)
                          for name, rows in rows_by_subset(data).items()])


SUITE = Suite(name="extra-suite", title="Extra", order=55, release="inline", source="this test", load=load,
              measure=measure, group="extra")
'''


def test_a_suite_is_one_new_module(tmp_path: Path) -> None:
    (tmp_path / "extra_suite.py").write_text(textwrap.dedent(EXTRA_SUITE), encoding="utf-8")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(suites_package, "__path__", [*suites_package.__path__, str(tmp_path)])
            found = discover_suites()
            assert list(found)[-3:] == ["rm-bench", "extra-suite", "local"]  # its order puts it between them
            assert select_suites(["extra"]) == ["extra-suite"] and "extra-suite" in select_suites(None)
            loaded, missing = load_suites(tmp_path, ["extra-suite"])
            assert not missing
            result = run_suites(loaded, TableScore({"extra right": 1.0, "extra wrong": 0.0}), OPTIONS)
            assert _measures(result, "extra-suite")[("only", "accuracy")]["score"] == pytest.approx(100.0)
    finally:
        sys.modules.pop("rewardsmith.bench.suites.extra_suite", None)
        if hasattr(suites_package, "extra_suite"):
            delattr(suites_package, "extra_suite")
    assert "extra-suite" not in discover_suites()  # gone with its module
