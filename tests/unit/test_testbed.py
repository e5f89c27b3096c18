"""The testbed's instruments on constructed data with known answers: Gao's forms recover the alpha and beta that
made a curve, and the RL tracker's points are judged by best-of-n's verdict (over-optimised, misaligned, peaks at
the end) on a constructed run."""

from __future__ import annotations

import numpy as np
import pytest

from rewardsmith.testbed.claims import CLAIMS
from rewardsmith.testbed.fits import fit_form, fit_with_ci, peak, predict


@pytest.mark.parametrize("form", ["bon", "rl"])
def test_the_forms_recover_the_parameters_that_made_the_curve(form: str) -> None:
    d = np.sqrt(np.array([0.0, 0.19, 0.66, 1.4, 2.3, 3.2, 4.2]))
    gain = predict(d, 0.8, 0.3, form)
    alpha, beta = fit_form(d, gain, form)
    assert alpha == pytest.approx(0.8, abs=1e-9) and beta == pytest.approx(0.3, abs=1e-9)
    rng = np.random.default_rng(0)
    per_prompt = gain + rng.normal(scale=0.2, size=(300, len(d)))
    fitted = fit_with_ci(d, per_prompt, form, n_boot=200)
    assert fitted["alpha"]["low"] < 0.8 < fitted["alpha"]["high"]
    assert fitted["beta"]["low"] < 0.3 < fitted["beta"]["high"]
    assert max(abs(r) for r in fitted["residuals"]) < 0.1
    if form == "bon":
        assert fitted["peak_d"]["estimate"] == pytest.approx(
            peak(fitted["alpha"]["estimate"], fitted["beta"]["estimate"])
        )
    assert peak(1.0, 0.0) == float("inf")


def _points(curve: list[float], prompts: int = 60, noise: float = 0.05) -> list[dict]:
    rng = np.random.default_rng(1)
    ids = [f"prompt-{i}" for i in range(prompts)]
    out = []
    for k, level in enumerate(curve):
        values = level + rng.normal(scale=noise, size=prompts)
        out.append(
            {
                "step": 10 * k,
                "kl": {"estimate": float(k)},
                "per_prompt": {"ids": ids, "golds": {"gold": [float(v) for v in values]}},
            }
        )
    return out


def test_rl_runs_are_judged_by_the_best_of_n_verdict() -> None:
    from rewardsmith.rl.summary import overoptimisation

    assert overoptimisation(_points([0.0, 0.5, 0.9, 0.4, 0.0]), "gold", 200)["verdict"] == "over-optimised"
    assert overoptimisation(_points([0.0, -0.4, -0.6, -0.8, -0.9]), "gold", 200)["verdict"] == "misaligned"
    assert overoptimisation(_points([0.0, 0.2, 0.4, 0.6, 0.8]), "gold", 200)["verdict"] == "peaks at N"
    assert overoptimisation(_points([0.0, 0.0, 0.0, 0.0, 0.0], noise=0.3), "gold", 200)["verdict"] in (
        "inconclusive",
        "peaks at N",
        "not over-optimised",
    )


def test_every_testbed_claim_is_declared_with_a_bar_source() -> None:
    assert len({c.key for c in CLAIMS}) == len(CLAIMS)
    assert all(c.bar_source.endswith("testbed/claims.py") for c in CLAIMS)
