"""The Beta negative ELBO against numerical integration, and its interior optimum."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import integrate, optimize, stats

from rewardsmith.errors import UnknownNameError
from rewardsmith.losses.beta_elbo import (
    KL_SCHEDULES,
    beta_elbo_loss,
    beta_kl_to_uniform,
    beta_posterior,
    expected_log_z,
    kl_weight,
)
from rewardsmith.losses.bt import bradley_terry_loss

CASES = [(0.7, 1.3), (2.0, 5.0), (1.0, 1.0), (12.0, 3.5), (0.4, 0.6)]


@pytest.mark.parametrize(("a", "b"), CASES)
def test_expected_log_z_matches_integration(a: float, b: float) -> None:
    dist = stats.beta(a, b)
    want, _ = integrate.quad(lambda z: math.log(z) * dist.pdf(z), 0, 1, limit=200)
    got = expected_log_z(torch.tensor([a], dtype=torch.float64), torch.tensor([b], dtype=torch.float64))
    assert float(got) == pytest.approx(want, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize(("a", "b"), CASES)
def test_kl_to_uniform_matches_integration(a: float, b: float) -> None:
    dist = stats.beta(a, b)
    # KL(q || U(0, 1)) = integral of q log q, since the uniform density is 1.
    want, _ = integrate.quad(lambda z: dist.pdf(z) * dist.logpdf(z), 0, 1, limit=200)
    got = beta_kl_to_uniform(torch.tensor([a], dtype=torch.float64), torch.tensor([b], dtype=torch.float64))
    assert float(got) == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_kl_of_the_prior_is_zero_and_hand_value() -> None:
    one = torch.tensor([1.0], dtype=torch.float64)
    assert float(beta_kl_to_uniform(one, one)) == pytest.approx(0.0, abs=1e-12)
    # Beta(2, 1) has density 2z: KL = integral 2z log(2z) dz = log 2 - 1/2.
    assert float(beta_kl_to_uniform(2 * one, one)) == pytest.approx(math.log(2) - 0.5, rel=1e-9)


def test_posterior_parameters() -> None:
    post = beta_posterior(torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([2.0]))
    mu = 1 / (1 + math.exp(-1.0))
    tau = math.log(2.0) + math.log1p(math.exp(2.0)) + 1.0
    assert float(post.mu) == pytest.approx(mu, rel=1e-6)
    assert float(post.tau) == pytest.approx(tau, rel=1e-6)
    assert float(post.alpha) == pytest.approx(mu * tau, rel=1e-6)
    assert float(post.beta) == pytest.approx((1 - mu) * tau, rel=1e-6)


def test_loss_matches_formula_and_is_shift_invariant() -> None:
    u_w, u_l = torch.tensor([0.3, -1.0]), torch.tensor([-0.2, 0.5])
    s_w, s_l = torch.tensor([0.1, 1.0]), torch.tensor([-0.5, 2.0])
    n = torch.tensor([0.0, 16.0])
    out = beta_elbo_loss(u_w, u_l, s_w, s_l, n, schedule="inverse", kl_base=0.5, kl_scale=8.0)
    post = beta_posterior(u_w, u_l, s_w, s_l)
    lam = torch.tensor([0.5, 0.5 / 3.0])
    want = (-expected_log_z(post.alpha, post.beta) + lam * beta_kl_to_uniform(post.alpha, post.beta)).mean()
    assert float(out.total) == pytest.approx(float(want), rel=1e-6)
    shifted = beta_elbo_loss(u_w + 3.0, u_l + 3.0, s_w, s_l, n, schedule="inverse", kl_base=0.5, kl_scale=8.0)
    assert float(shifted.total) == pytest.approx(float(out.total), rel=1e-6)
    assert set(out.terms) >= {"total", "nll", "kl", "kl_weight", "mu", "tau", "accuracy"}


def test_soft_label_swaps_sides() -> None:
    u_w, u_l, s_w, s_l = torch.tensor([0.8]), torch.tensor([-0.1]), torch.tensor([0.3]), torch.tensor([0.7])
    n = torch.tensor([4.0])
    a = beta_elbo_loss(u_w, u_l, s_w, s_l, n, labels=torch.tensor([0.0]))
    b = beta_elbo_loss(u_l, u_w, s_l, s_w, n, labels=torch.tensor([1.0]))
    assert float(a.total) == pytest.approx(float(b.total), rel=1e-6)


def test_schedule_decreases_and_option_changes_the_loss() -> None:
    n = torch.tensor([0.0, 1.0, 8.0, 64.0])
    for name in ("inverse", "inverse_sqrt", "exp"):
        lam = kl_weight(n, name, 1.0, 8.0)
        assert torch.all(lam[1:] < lam[:-1]), name
    assert torch.allclose(kl_weight(n, "constant", 0.3, 8.0), torch.full((4,), 0.3))
    args = (
        torch.tensor([2.0]),
        torch.tensor([0.0]),
        torch.tensor([3.0]),
        torch.tensor([3.0]),
        torch.tensor([2.0]),
    )
    assert float(beta_elbo_loss(*args, kl_base=0.0).total) != pytest.approx(
        float(beta_elbo_loss(*args, kl_base=1.0).total)
    )
    with pytest.raises(UnknownNameError):
        kl_weight(n, "no-such-schedule")
    assert "inverse" in KL_SCHEDULES


def _elbo_of(params: np.ndarray, lam: float) -> float:
    """Loss of one pair labelled 1 as a function of (margin, log(tau - 1)); tau - 1 = softplus sum."""
    margin, log_evidence = (float(v) for v in params)
    mu = 1.0 / (1.0 + math.exp(-margin))
    tau = 1.0 + math.exp(log_evidence)
    a, b = torch.tensor([mu * tau], dtype=torch.float64), torch.tensor([(1 - mu) * tau], dtype=torch.float64)
    return float(-expected_log_z(a, b) + lam * beta_kl_to_uniform(a, b))


def test_interior_optimum_where_bt_runs_to_infinity() -> None:
    # Beta ELBO: the minimiser over (margin, concentration) is finite: mu < 1 and tau finite.
    result = optimize.minimize(
        _elbo_of,
        x0=np.array([0.0, 0.0]),
        args=(0.5,),
        method="Nelder-Mead",
        options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 5000},
    )
    assert result.success
    margin, log_evidence = result.x
    mu, tau = 1 / (1 + math.exp(-margin)), 1 + math.exp(log_evidence)
    assert 0.5 < mu < 0.999
    assert 1.0 < tau < 100.0
    # Moving past the optimum (larger margin or more concentration) costs loss.
    assert _elbo_of(np.array([margin + 2.0, log_evidence]), 0.5) > result.fun
    assert _elbo_of(np.array([margin, log_evidence + 2.0]), 0.5) > result.fun
    # Plain BT on the same pair keeps decreasing as the margin grows: no finite minimiser.
    margins = torch.tensor([0.0, 2.0, 5.0, 10.0, 20.0])
    bt = [float(bradley_terry_loss(m.view(1), torch.zeros(1)).total) for m in margins]
    assert all(later < earlier for earlier, later in itertools.pairwise(bt))
    assert bt[-1] < 1e-8


def test_weaker_kl_moves_the_optimum_outward() -> None:
    """More demonstrations (smaller lambda) let the posterior mean move further toward the label."""
    mus = []
    for lam in (1.0, 0.25, 0.05):
        res = optimize.minimize(
            _elbo_of,
            x0=np.array([0.0, 0.0]),
            args=(lam,),
            method="Nelder-Mead",
            options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 5000},
        )
        mus.append(1 / (1 + math.exp(-res.x[0])))
    assert mus[0] < mus[1] < mus[2] < 1.0
