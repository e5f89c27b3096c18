"""The reward-hacking monitors of the server (serve/monitors.py): on synthetic streams, each warning fires when its
pattern is there and stays quiet when it is not; /metrics exposes the statistics under stable names."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rewardsmith.serve.metrics import ServeMetrics
from rewardsmith.serve.monitors import RULES, STATS, HackingMonitor, Observation, prompt_key


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(f"w{int(x)}" for x in rng.integers(0, 5000, n))


def _stream(monitor: HackingMonitor, steps: int, make) -> None:
    """Feeds `steps` GRPO-like batches of 8 prompts x 4 responses; make(step, rng) -> (response, reward)."""
    rng = np.random.default_rng(0)
    for step in range(steps):
        batch = []
        for p in range(8):
            group = prompt_key(f"prompt {step} {p}")
            batch += [Observation(group, *make(step, rng)) for _ in range(4)]
        monitor.observe(batch)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("monitor: ")]


def test_reward_bought_with_length_fires_the_length_warning_once(caplog: pytest.LogCaptureFixture) -> None:
    monitor = HackingMonitor(window=512, check_every=64, metrics=ServeMetrics())

    def make(step: int, rng: np.random.Generator) -> tuple[str, float]:
        n = int(rng.integers(10, 30)) + 4 * step  # responses grow as training goes on
        return _words(rng, n), n / 50 + float(rng.normal(0, 0.3))  # and the reward follows their length

    with caplog.at_level(logging.WARNING, logger="rewardsmith.serve"):
        _stream(monitor, 40, make)
    snap = monitor.snapshot()
    assert snap["stats"]["length_corr"] > 0.6 and snap["stats"]["length_slope"] > 0
    assert "length" in snap["firing"] and snap["fired"]["length"] == 1
    lines = _warnings(caplog)
    assert len(lines) == 1 and "reward rises with response length" in lines[0] and "\n" not in lines[0]


def test_an_honest_stream_keeps_every_warning_quiet(caplog: pytest.LogCaptureFixture) -> None:
    monitor = HackingMonitor(window=512, check_every=64)

    def make(step: int, rng: np.random.Generator) -> tuple[str, float]:
        return _words(rng, int(rng.integers(10, 60))), float(rng.normal(0, 1))

    with caplog.at_level(logging.WARNING, logger="rewardsmith.serve"):
        _stream(monitor, 40, make)
    snap = monitor.snapshot()
    assert snap["firing"] == [] and set(snap["fired"].values()) == {0} and _warnings(caplog) == []
    assert abs(snap["stats"]["length_corr"]) < 0.2 and snap["stats"]["repeated_ngram_rate"] < 0.05
    assert snap["stats"]["groups"] > 0 and snap["stats"]["distinct_per_group"] == 1.0


def test_repeated_phrases_and_collapsed_groups_fire_their_warnings(caplog: pytest.LogCaptureFixture) -> None:
    monitor = HackingMonitor(window=512, check_every=64)

    def make(step: int, rng: np.random.Generator) -> tuple[str, float]:
        if step < 20:
            return _words(rng, 30), float(rng.normal(0, 1))
        return "I am so helpful. " * 8, 2.0  # every response the same loop, every reward the same

    with caplog.at_level(logging.WARNING, logger="rewardsmith.serve"):
        _stream(monitor, 36, make)
    snap = monitor.snapshot()
    assert {"repetition", "collapse"} <= set(snap["firing"])
    assert snap["stats"]["distinct_per_group"] < 0.5 and snap["stats"]["group_reward_sd"] < 0.1
    assert any("repeat themselves" in x for x in _warnings(caplog))
    assert any("collapsed" in x for x in _warnings(caplog))


def test_metrics_expose_the_monitors_under_stable_names() -> None:
    metrics = ServeMetrics()
    monitor = HackingMonitor(window=64, check_every=8, metrics=metrics)
    monitor.observe([Observation(prompt_key("p"), f"answer {k} " * k, float(k), k == 3) for k in range(1, 5)])
    monitor.snapshot()
    text = metrics.render().decode()
    for name in STATS:
        assert f"\nrewardsmith_monitor_{name} " in text, name
    assert "rewardsmith_monitor_texts 4.0" in text and "rewardsmith_monitor_cut_share 0.25" in text
    assert "# TYPE rewardsmith_monitor_warnings_total counter" in text and set(RULES) == {
        "length",
        "repetition",
        "collapse",
    }
