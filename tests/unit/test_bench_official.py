"""RewardBench's scores equal the official scoring code's, on the same rewards, to 1e-12.

The official code is the `rewardbench` package (allenai/reward-bench), a test-only dependency installed without its
dependencies by `make setup-test`, which `make test` runs (it pins transformers 4.51 and imports model code that later
transformers no longer has, so importing the package itself fails here). Its scoring functions are pure: this test runs
their own source, read from the installed package's files (rewardbench/utils.py: `reroll_and_score_dataset`,
`sample_stats`, `process_single_model`, `calculate_scores_per_section`; rewardbench/constants.py), beside rewardsmith's
suites on random rewards over synthetic releases in the published schema: every RewardBench 2 subset, ties at the
maximum, Ties prompts whose correct completions all score the same, prompts with only a ref or only a tied row, and
prompt ids written with and without leading zeros (the official code matches them by int())."""

from __future__ import annotations

import ast
import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_bench_fixtures import TableScore, rb2_row, write_reward_bench_2

from rewardsmith.bench.metrics import section_scores
from rewardsmith.bench.runner import load_suites, run_suites
from rewardsmith.bench.suite import EvalOptions
from rewardsmith.bench.suites.reward_bench import EXAMPLE_COUNTS, SUBSET_MAPPING

TOL = 1e-12
OPTIONS = EvalOptions(n_boot=20, seed=0)
SUBSETS = ("Factuality", "Precise IF", "Math", "Safety", "Focus")


def _package_file(name: str) -> Path:
    spec = importlib.util.find_spec("rewardbench")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the official `rewardbench` package is not installed (make setup-test installs it, --no-deps)")
    return Path(next(iter(spec.submodule_search_locations))) / name


def official(*names: str) -> dict[str, Any]:
    """The named top-level functions of rewardbench/utils.py, compiled from the installed file's own source."""
    from datasets import Dataset

    tree = ast.parse(_package_file("utils.py").read_text())
    wanted = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    assert {f.name for f in wanted} == set(names)
    namespace: dict[str, Any] = {"np": np, "math": math, "Dataset": Dataset, "pd": __import__("pandas")}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "rewardbench/utils.py", "exec"), namespace)
    return namespace


def official_constants() -> dict[str, Any]:
    path = _package_file("constants.py")
    spec = importlib.util.spec_from_file_location("rewardbench_constants", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


def random_release(rng: np.random.Generator) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Rows of every subset and their rewards (small integers, so ties at the top and equal correct rewards are
    common)."""
    rows: list[dict[str, Any]] = []
    rewards: dict[str, float] = {}

    def texts(prefix: str, n: int) -> list[str]:
        out = [f"{prefix}-{k}" for k in range(n)]
        rewards.update({t: float(rng.integers(0, 4)) for t in out})
        return out

    for subset in SUBSETS:
        for i in range(int(rng.integers(3, 9))):
            rid = f"{subset[:3]}{i}"
            rows.append(rb2_row(rid, subset, texts(rid + "c", 1), texts(rid + "r", 3)))
    for p in range(int(rng.integers(4, 12))):
        kinds = [("ref", "tied"), ("ref",), ("tied",)][int(rng.choice(3, p=[0.7, 0.15, 0.15]))]
        for kind in kinds:
            written = f"{p:03d}" if kind == "tied" and p % 2 else str(p)  # "tied:007" is prompt 7
            n_correct = 1 if kind == "ref" else int(rng.integers(1, 4))
            rid = f"{kind}:{written}"
            chosen, rejected = texts(rid + "c", n_correct), texts(rid + "r", int(rng.integers(1, 4)))
            if kind == "tied" and rng.random() < 0.3:  # every correct completion scores the same
                rewards.update({t: rewards[chosen[0]] for t in chosen})
            rows.append(rb2_row(rid, "Ties", chosen, rejected))
    return rows, rewards


def official_rb2(rows: list[dict[str, Any]], rewards: dict[str, float]) -> dict[str, float]:
    """Each subset's score as the official code computes it (scripts/run_v2.py: best-of-n rows through
    `reroll_and_score_dataset`, Ties through `process_single_model`)."""
    from datasets import Dataset

    code = official("reroll_and_score_dataset", "sample_stats", "process_single_model")
    out: dict[str, float] = {}
    for subset in SUBSETS:
        mine = [r for r in rows if r["subset"] == subset]
        flat = [
            {"text": t, "scores": rewards[t], "id": r["id"], "subset": subset}
            for r in mine
            for t in [*r["chosen"], *r["rejected"]]
        ]
        rerolled = code["reroll_and_score_dataset"](
            Dataset.from_list(flat), [r["total_completions"] for r in mine], cols_to_combine=["text", "scores"]
        )
        out[subset] = float(np.mean(rerolled["results"]))
    ties = [
        {"id": r["id"], "scores": [rewards[t] for t in [*r["chosen"], *r["rejected"]]], "num_correct": r["num_correct"]}
        for r in rows
        if r["subset"] == "Ties"
    ]
    out["Ties"] = float(code["process_single_model"](Dataset.from_list(ties))[1])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_reward_bench_2_equals_the_official_scoring(tmp_path: Path, seed: int) -> None:
    rows, rewards = random_release(np.random.default_rng(seed))
    want = official_rb2(rows, rewards)
    write_reward_bench_2(tmp_path, rows)
    loaded, missing = load_suites(tmp_path, ["reward-bench-2"])
    assert not missing
    result = run_suites(loaded, TableScore(rewards), OPTIONS)
    got = {(m["subset"], m["metric"]): m["score"] for m in result.suites["reward-bench-2"]["measures"]}
    for subset in SUBSETS:
        assert abs(got[(subset, "best-of-4 accuracy")] / 100 - want[subset]) <= TOL, subset
    assert abs(got[("Ties", "Ties score")] / 100 - want["Ties"]) <= TOL
    overall = got[("overall", "mean of subsets")] / 100
    assert abs(overall - float(np.mean(list(want.values())))) <= TOL


def test_ties_edge_cases_equal_the_official_scoring() -> None:
    """Cases the random releases may miss: no prompt with both rows (the official 0, not NaN), and every tied
    prompt's correct completions scoring the same (no margin left: 0)."""
    from datasets import Dataset

    from rewardsmith.bench.metrics import ties_statistic, ties_units

    code = official("sample_stats", "process_single_model")
    cases = [
        [("ref:1", 1, [2.0, 1.0]), ("tied:2", 2, [3.0, 1.0, 0.0])],  # nothing in common
        [("ref:1", 1, [2.0, 1.0]), ("tied:01", 2, [3.0, 3.0, 0.0])],  # spread 0: margin mean of nothing
        [("ref:5", 1, [0.0, 1.0]), ("tied:5", 3, [1.0, 2.0, 3.0, 0.0]), ("ref:6", 1, [4.0, 4.0])],
    ]
    for case in cases:
        rows = [{"id": i, "num_correct": k, "scores": s} for i, k, s in case]
        want = float(code["process_single_model"](Dataset.from_list(rows))[1])
        _, values = ties_units([i for i, _, _ in case], [k for _, k, _ in case], [s for _, _, s in case])
        assert abs(ties_statistic(values) - want) <= TOL, case


def test_reward_bench_sections_equal_the_official_weighting() -> None:
    constants = official_constants()
    assert dict(EXAMPLE_COUNTS) == constants["EXAMPLE_COUNTS"]
    assert {k: list(v) for k, v in SUBSET_MAPPING.items()} == constants["SUBSET_MAPPING"]
    weigh = official("calculate_scores_per_section")["calculate_scores_per_section"]
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores = {s: float(rng.random()) for s in EXAMPLE_COUNTS}
        want = weigh(constants["EXAMPLE_COUNTS"], constants["SUBSET_MAPPING"], scores)
        got = section_scores(scores, EXAMPLE_COUNTS, SUBSET_MAPPING)
        assert got.keys() == want.keys()
        assert all(abs(got[k] - want[k]) <= TOL for k in want)
