"""experiments/icrm.py's summary statistics: the verdict rule, paired hierarchical intervals, ECE over seeds and
the commands each seed runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def experiment() -> ModuleType:
    spec = importlib.util.spec_from_file_location("icrm_experiment", ROOT / "experiments" / "icrm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_verdict_rule(experiment) -> None:
    assert experiment.verdict(0.1, 3.0) == "held"
    assert experiment.verdict(-3.0, -0.1) == "not held"
    assert experiment.verdict(-0.1, 3.0) == "inconclusive"  # the interval covers 0
    assert experiment.verdict(0.0, 3.0) == "inconclusive"
    assert experiment.verdict(None, 1.0) == "inconclusive"
    assert experiment.verdict(float("nan"), 1.0) == "inconclusive"


def test_paired_difference_interval(experiment) -> None:
    rng = np.random.default_rng(0)
    bt = rng.integers(0, 2, size=(3, 200)).astype(float)
    icrm = np.clip(bt + (rng.random((3, 200)) < 0.3), 0, 1)  # BT's correct pairs plus 30% of the others
    est = experiment.mean_ci(100 * (icrm - bt), 500)
    assert est["mean"] == pytest.approx(100 * (icrm - bt).mean(), abs=1e-4)
    assert 0 < est["ci"][0] < est["mean"] < est["ci"][1]
    assert experiment.verdict(*est["ci"]) == "held"
    # An array constant over seeds and pairs has a degenerate interval at its value.
    assert experiment.mean_ci(np.full((2, 50), 7.0), 200) == {"mean": 7.0, "ci": [7.0, 7.0]}


def test_ece_over_seeds_known_answers(experiment) -> None:
    rates = np.array([0.0, 0.5, 1.0])  # demonstrated preference rates 1, 0.5, 0
    perfect = np.tile(1.0 - rates, (40, 1))  # (K, R): mu equals the demonstrated rate
    ece = experiment._ece(rates)
    assert ece(perfect) == pytest.approx(0.0)
    # One constant forecast: a single bin whose mean outcome is the average rate 0.5, so ECE is |0.75 - 0.5|,
    # while the mean absolute error sees every rate: (0.25 + 0.25 + 0.75) / 3.
    flat = np.full((40, 3), 0.75)
    assert ece(flat) == pytest.approx(0.25)
    assert experiment._mae(flat[None], rates).mean() == pytest.approx((0.25 + 0.25 + 0.75) / 3)
    assert experiment.statistic_ci([perfect, perfect], ece, 50) == {"mean": 0.0, "ci": [0.0, 0.0]}
    mu = {"1": np.stack([flat] * 2), "8": np.stack([perfect] * 2)}
    claim = experiment.claim_ece(mu, rates, [0, 1, 8], 100)
    assert claim["mean"] == pytest.approx(0.25, abs=1e-4) and claim["verdict"] == "held"
    assert claim["mean_abs_error_drop"]["mean"] == pytest.approx(5 / 12, abs=1e-4)
    assert "N=1 minus ECE at N=8" in claim["measure"]


def test_pareto_claim_uses_the_range_over_seeds(experiment) -> None:
    def metrics(hv_low: float, hv_high: float) -> dict:
        return {"hypervolume": [{"demos": 0, "hypervolume": 0.0}, {"demos": 1, "hypervolume": hv_low},
                                {"demos": 64, "hypervolume": hv_high}]}

    rising = experiment.claim_pareto([metrics(0.2, 0.5), metrics(0.3, 0.4)], [0, 1, 64])
    assert (rising["min"], rising["max"], rising["verdict"]) == (0.1, 0.3, "held")
    mixed = experiment.claim_pareto([metrics(0.2, 0.5), metrics(0.4, 0.3)], [0, 1, 64])
    assert mixed["verdict"] == "inconclusive"


def test_commands_of_one_seed(experiment, tmp_path: Path) -> None:
    cmds = experiment.commands(2, "configs/icrm-tiny.yaml", tmp_path, 20)
    assert list(cmds) == ["s2", "bt-s2", "eval-s2"]
    train, bt, ev = cmds.values()
    assert train[1:3] == ["icrm", "train"] and train[train.index("--steps") + 1] == "20"
    assert "--bt" in bt and "--steps" not in bt and bt[bt.index("--out") + 1] == str(tmp_path / "bt-s2")
    assert ev[ev.index("--model") + 1] == f"{tmp_path / 's2'}/model"
    assert ev[ev.index("--bt-model") + 1] == f"{tmp_path / 'bt-s2'}/model"
    assert ev[ev.index("--seed") + 1] == "2"
