"""Every suite end to end on tiny releases in its published schema: loaders, the one scoring call, and each
metric against its value computed by hand; missing releases reported, wrong schemas refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_bench_fixtures import (
    PPE_BOK_REWARDS,
    PPE_CURVE_A,
    PPE_CURVE_B,
    PPE_HUMAN_REWARDS,
    RB1_REWARDS,
    RB2_FACTUALITY,
    RB2_REWARDS,
    RB2_TIES_SCORE,
    TableScore,
    all_rewards,
    rb2_row,
    write_parquet,
    write_ppe_correctness,
    write_ppe_human,
    write_reward_bench,
    write_reward_bench_2,
)

from rewardsmith.bench.registry import discover_suites, get_suites
from rewardsmith.bench.runner import BenchResult, load_suites, run_suites
from rewardsmith.bench.schema import Missing
from rewardsmith.bench.suite import EvalOptions, LoadRequest
from rewardsmith.errors import DataError, UnknownNameError

OPTIONS = EvalOptions(n_boot=200, seed=0)


def _measures(result: BenchResult, suite: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["subset"], m["metric"]): m for m in result.suites[suite]["measures"]}


def _run(data_dir: Path, names: list[str], rewards: dict[str, float] | None = None) -> BenchResult:
    loaded, missing = load_suites(data_dir, names)
    assert not missing, [str(m) for m in missing]
    return run_suites(loaded, TableScore(rewards or all_rewards()), OPTIONS)


def test_registry_finds_every_suite_module() -> None:
    suites = discover_suites()
    assert list(suites) == [
        "reward-bench",
        "reward-bench-2",
        "ppe-human-preference",
        "ppe-correctness",
        "rm-bench",
        "local",
    ]
    assert all(s.name == name for name, s in suites.items())
    assert [s.name for s in get_suites(["local", "rm-bench"])] == ["local", "rm-bench"]
    with pytest.raises(UnknownNameError, match="benchmark suite 'nope'"):
        get_suites(["nope"])


def test_missing_suites_are_reported_not_raised(tmp_path: Path) -> None:
    write_reward_bench_2(tmp_path)
    loaded, missing = load_suites(tmp_path)
    assert [d.suite for d in loaded] == ["reward-bench-2"]
    assert all(isinstance(m, Missing) for m in missing)
    by_suite = {m.suite: m for m in missing}
    assert set(by_suite) == {"reward-bench", "ppe-human-preference", "ppe-correctness", "rm-bench", "local"}
    note = by_suite["reward-bench"]
    assert note.message.startswith("missing: put the allenai/reward-bench release folder")
    assert str(tmp_path / "reward-bench") in note.message and "\n" not in note.message
    assert str(tmp_path / "ppe" / "PPE-Human-Preference-V1") in by_suite["ppe-human-preference"].message


def test_reward_bench_subsets_sections_and_overall_by_hand(tmp_path: Path) -> None:
    write_reward_bench(tmp_path)
    result = _run(tmp_path, ["reward-bench"], RB1_REWARDS)
    m = _measures(result, "reward-bench")
    assert m[("alpacaeval-easy", "accuracy")]["score"] == pytest.approx(50.0)  # 2 > 1 right; a 1 = 1 tie wrong
    assert m[("mt-bench-easy", "accuracy")]["score"] == pytest.approx(100.0)
    assert m[("math-prm", "accuracy")]["score"] == pytest.approx(0.0)
    chat = (50.0 * 100 + 100.0 * 28) / (100 + 28)
    safety = 50.0
    reasoning = (100.0 * 164 + 0.0 * 984) / (164 + 984)
    assert m[("Chat", "accuracy")]["score"] == pytest.approx(chat)
    assert m[("Safety", "accuracy")]["score"] == pytest.approx(safety)
    assert m[("Reasoning", "accuracy")]["score"] == pytest.approx(reasoning)
    assert ("Chat Hard", "accuracy") not in m  # no subset of it present
    assert m[("overall", "accuracy")]["score"] == pytest.approx((chat + safety + reasoning) / 3)
    # The length rule under the same strict definition: a1's chosen is longer (right), a2's sides are equal
    # in length (a tie: wrong).
    assert m[("alpacaeval-easy", "accuracy")]["length_rule"] == pytest.approx(50.0)
    # corr(reward, length) of subset alpacaeval-easy over its four responses, by hand with scipy.
    from scipy.stats import spearmanr

    texts = ["a1 chosen, long and right", "a1 no", "a2 tie c", "a2 tie r"]
    rho = spearmanr([RB1_REWARDS[t] for t in texts], [len(t) for t in texts]).statistic
    assert m[("alpacaeval-easy", "accuracy")]["length_correlation"] == pytest.approx(rho)
    summary = result.suites["reward-bench"]["summary"]
    assert summary["rows"] == summary["read"] == 7 and summary["subsets"]["alpacaeval-easy"] == 2


def test_reward_bench_2_best_of_4_and_ties_by_hand(tmp_path: Path) -> None:
    write_reward_bench_2(tmp_path)
    result = _run(tmp_path, ["reward-bench-2"], RB2_REWARDS)
    m = _measures(result, "reward-bench-2")
    factuality = m[("Factuality", "best-of-4 accuracy")]
    assert factuality["score"] == pytest.approx(100 * RB2_FACTUALITY)
    assert factuality["chance"] == pytest.approx(25.0)
    assert "length_controlled" not in factuality  # not a pairwise measure
    assert m[("Focus", "best-of-4 accuracy")]["score"] == pytest.approx(100.0)
    ties = m[("Ties", "Ties score")]
    assert ties["score"] == pytest.approx(100 * RB2_TIES_SCORE) and ties["n"] == 2  # two prompt ids
    overall = m[("overall", "mean of subsets")]
    assert overall["score"] == pytest.approx((100 * RB2_FACTUALITY + 100 + 100 * RB2_TIES_SCORE) / 3)
    components = result.suites["reward-bench-2"]["extras"]["ties_components"]
    assert components["ref accuracy"] == 0.5 and components["tied accuracy"] == 1.0
    assert components["margin score"] == pytest.approx((math.tanh(-0.5) + math.tanh(-3.0)) / 2)


def test_ppe_human_preference_excludes_ties_and_scores_categories(tmp_path: Path) -> None:
    write_ppe_human(tmp_path)
    result = _run(tmp_path, ["ppe-human-preference"], {k: float(v) for k, v in PPE_HUMAN_REWARDS.items()})
    m = _measures(result, "ppe-human-preference")
    assert m[("overall", "accuracy")]["score"] == pytest.approx(100 * (1 + 0 + 0.5) / 3)
    assert m[("overall", "accuracy")]["n"] == 3
    assert result.suites["ppe-human-preference"]["summary"]["dropped"] == {"tie": 2}
    assert m[("hard_prompt", "accuracy")]["score"] == pytest.approx(100.0)  # q1 only: all 7 criteria
    assert m[("criteria_v0.1/complexity", "accuracy")]["n"] == 1
    assert m[("is_code", "accuracy")]["score"] == pytest.approx(0.0)  # q2
    assert m[("if_v0.1/if", "accuracy")]["score"] == pytest.approx(50.0)  # q5: a reward tie


def test_ppe_correctness_conflict_pairs_best_of_k_and_auc(tmp_path: Path) -> None:
    write_ppe_correctness(tmp_path)
    result = _run(tmp_path, ["ppe-correctness"], {k: float(v) for k, v in PPE_BOK_REWARDS.items()})
    m = _measures(result, "ppe-correctness")
    # Conflict pairs: row A (0,1) wrong, (2,3) wrong, (0,2) not a conflict; row B (0,1) tie 1/2, (2,3) right.
    assert m[("math", "conflict accuracy")]["score"] == pytest.approx(100 * 1.5 / 4)
    curve = (np.array(PPE_CURVE_A) + np.array(PPE_CURVE_B)) / 2
    assert m[("math", "best-of-K area")]["score"] == pytest.approx(
        100 * (np.mean(PPE_CURVE_A) + np.mean(PPE_CURVE_B)) / 2
    )
    assert m[("math", "best-of-K end")]["score"] == pytest.approx(100 * curve[-1])
    assert m[("math", "best-of-K max")]["score"] == pytest.approx(100 * curve.max())
    assert m[("math", "ROC AUC")]["score"] == pytest.approx(8.5 / 16) and m[("math", "ROC AUC")]["unit"] == ""
    assert m[("math", "best-of-K area")]["chance"] == pytest.approx(50.0)  # a random pick: half are correct
    extras = result.suites["ppe-correctness"]["extras"]["curves"]["math"]
    np.testing.assert_allclose(extras["curve"], 100 * curve)
    np.testing.assert_allclose(extras["oracle"], 100 * np.array([0.5, 5 / 6, 1.0, 1.0]))
    assert all(lo <= v <= hi for lo, v, hi in zip(extras["low"], extras["curve"], extras["high"], strict=True))
    assert m[("overall", "conflict accuracy")]["score"] == pytest.approx(100 * 1.5 / 4)
    notes = result.suites["ppe-correctness"]["summary"]["notes"]
    assert len(notes) == 4 and notes[0].startswith("mmlu_pro: missing: put the lmarena-ai/PPE-MMLU-Pro-Best-of-K")


def test_ppe_correctness_reads_ppe_folder_names_and_jsonl(tmp_path: Path) -> None:
    from test_bench_fixtures import PPE_BOK_ROWS

    path = tmp_path / "ppe" / "gpqa_best_of_k" / "data" / "train.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(r) for r in PPE_BOK_ROWS) + "\n", encoding="utf-8")
    data = discover_suites()["ppe-correctness"].load(LoadRequest(tmp_path))
    assert not isinstance(data, Missing)
    assert {r.subset for r in data.rows} == {"gpqa"} and len(data.rows) == 2
    assert data.rows[0].row_id == "gpqa:A:gen" and data.rows[0].fields["pairs"] == ((0, 1), (2, 3), (0, 2))


def test_one_scoring_call_and_the_reuse_counter(tmp_path: Path) -> None:
    # RewardBench 2 rows repeat a prompt and response of RewardBench: the shared text is scored once.
    write_reward_bench(tmp_path, [("mt-bench-easy", 1, "shared answer", "rb1 only")])
    write_reward_bench_2(
        tmp_path, [rb2_row("x", "Focus", ["shared answer"], ["rb2 a", "rb2 b", "rb2 b"], prompt="prompt 1")]
    )
    loaded, _ = load_suites(tmp_path, ["reward-bench", "reward-bench-2"])
    score = TableScore({"shared answer": 1.0, "rb1 only": 0.0, "rb2 a": 0.5, "rb2 b": 2.0})
    result = run_suites(loaded, score, OPTIONS)
    # 2 + 4 texts asked for; distinct: shared answer, rb1 only, rb2 a, rb2 b.
    assert result.texts == {"requested": 6, "scored": 4, "reused": 2}
    assert score.calls == [4]


def test_non_finite_reward_is_refused_naming_the_row(tmp_path: Path) -> None:
    write_reward_bench_2(tmp_path)
    loaded, _ = load_suites(tmp_path, ["reward-bench-2"])
    rewards = {k: float(v) for k, v in RB2_REWARDS.items()}
    rewards["f2a"] = float("nan")
    with pytest.raises(DataError) as err:
        run_suites(loaded, TableScore(rewards), OPTIONS)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("reward-bench-2: row 'f2': the score function returned nan for response 2 ('f2a')")


def test_wrong_schema_is_one_line_naming_file_and_column(tmp_path: Path) -> None:
    path = write_parquet(
        tmp_path / "reward-bench" / "data" / "filtered-00000-of-00001.parquet",
        [{"prompt": "p", "chosen": "c", "rejected": "r", "id": 1}],
    )
    with pytest.raises(DataError) as err:
        load_suites(tmp_path, ["reward-bench"])
    assert str(err.value).startswith(f"{path}, field 'subset': missing column 'subset'") and "\n" not in str(err.value)

    bad = dict(rb2_row("f1", "Factuality", ["a"], ["b", "c", "d"]), chosen="a")  # a string, not a list
    path = write_parquet(tmp_path / "reward-bench-2" / "data" / "test-00000-of-00001.parquet", [bad])
    with pytest.raises(DataError, match=r"row 1, field 'chosen': expected list\[str\], got str"):
        load_suites(tmp_path, ["reward-bench-2"])

    inconsistent = dict(rb2_row("f1", "Factuality", ["a"], ["b", "c", "d"]), total_completions=5)
    write_parquet(tmp_path / "reward-bench-2" / "data" / "test-00000-of-00001.parquet", [inconsistent])
    with pytest.raises(DataError, match="field 'total_completions': is 5 but chosen"):
        load_suites(tmp_path, ["reward-bench-2"])

    jsonl = tmp_path / "j" / "reward-bench" / "data" / "filtered.jsonl"
    jsonl.parent.mkdir(parents=True)
    rows = [
        {"prompt": "p", "chosen": "c", "rejected": "r", "subset": "s", "id": 1},
        {"prompt": "p", "chosen": "c", "rejected": 3, "subset": "s", "id": 2},
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"filtered.jsonl, row 2, field 'rejected': expected str, got int 3"):
        load_suites(tmp_path / "j", ["reward-bench"])

    write_ppe_human(
        tmp_path, [{"question_id": "q", "prompt": "p", "response_1": "a", "response_2": "b", "winner": "model_c"}]
    )
    with pytest.raises(DataError, match="field 'winner': expected one of model_a"):
        load_suites(tmp_path, ["ppe-human-preference"])


def test_limit_keeps_rows_per_subset_in_file_order(tmp_path: Path) -> None:
    write_reward_bench(tmp_path)
    data = discover_suites()["reward-bench"].load(LoadRequest(tmp_path, limit=1))
    assert not isinstance(data, Missing)
    assert [r.row_id for r in data.rows] == ["1", "3", "4", "6", "7"] and data.read == 7


def test_results_round_trip_through_json(tmp_path: Path) -> None:
    write_reward_bench_2(tmp_path)
    result = _run(tmp_path, ["reward-bench-2"], RB2_REWARDS)
    metrics = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    units = json.loads(json.dumps(result.units_dict(), allow_nan=False))
    back = BenchResult.from_dicts(metrics, units)
    ties = back.units["reward-bench-2"]["Ties::Ties score"]
    assert ties.value() == pytest.approx(100 * RB2_TIES_SCORE)  # type: ignore[union-attr]
    assert back.suites == result.suites


def test_hub_request_offline_is_reported_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded, missing = load_suites(tmp_path, ["reward-bench", "ppe-correctness"], hub=True)
    assert loaded == []
    messages = {m.suite: m.message for m in missing}
    assert messages["reward-bench"].startswith(
        "missing: cannot read allenai/reward-bench from the hub: "
        "HF_HUB_OFFLINE is set; or put the allenai/reward-bench release"
    )
    assert "\n" not in messages["reward-bench"] and "ppe-correctness" in messages
