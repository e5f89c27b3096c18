"""The reward-hacking monitors of the server (serve/monitors.py): on synthetic streams, each warning fires when its
pattern is there and stays quiet when it is not; every threshold option (MonitorConfig) moves its rule's verdict on
a stream near the threshold; /metrics exposes the statistics under stable names."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rewardsmith.config import apply_overrides
from rewardsmith.errors import ConfigError
from rewardsmith.serve.config import MonitorConfig, ServeConfig
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
    assert snap["fired"]["shrinking"] == 0 and snap["fired"]["brevity"] == 0  # growing responses are no shrinking ones


def test_reward_bought_with_brevity_fires_the_brevity_warning_long_before_answers_are_empty(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A proxy that learned "shorter is better": answers shorten from about 60 words to about 20, the reward follows
    shortness, nothing comes near empty. The shrinking rule cannot see it; the brevity rule must."""
    monitor = HackingMonitor(window=512, check_every=64, metrics=ServeMetrics())

    def make(step: int, rng: np.random.Generator) -> tuple[str, float]:
        n = int(rng.integers(50, 70)) - step  # responses shorten as training goes on
        return _words(rng, n), -n / 20 + float(rng.normal(0, 0.3))  # and the reward follows their shortness

    with caplog.at_level(logging.WARNING, logger="rewardsmith.serve"):
        _stream(monitor, 40, make)
    snap = monitor.snapshot()
    assert snap["stats"]["length_corr"] < -0.6 and snap["stats"]["empty_share"] == 0.0
    assert snap["stats"]["length_mean"] > 100  # characters: far from empty
    assert "brevity" in snap["firing"] and snap["fired"]["brevity"] == 1
    assert snap["fired"]["length"] == 0 and snap["fired"]["shrinking"] == 0
    lines = [x for x in _warnings(caplog) if "buying reward with brevity" in x]
    assert len(lines) == 1 and "\n" not in lines[0]


def test_shortening_responses_without_reward_for_it_fire_nothing(caplog: pytest.LogCaptureFixture) -> None:
    monitor = HackingMonitor(window=512, check_every=64)

    def make(step: int, rng: np.random.Generator) -> tuple[str, float]:
        return _words(rng, int(rng.integers(50, 70)) - step), float(rng.normal(0, 1))

    with caplog.at_level(logging.WARNING, logger="rewardsmith.serve"):
        _stream(monitor, 40, make)
    snap = monitor.snapshot()
    assert snap["firing"] == [] and set(snap["fired"].values()) == {0} and _warnings(caplog) == []


def test_growing_responses_without_reward_for_length_fire_nothing(caplog: pytest.LogCaptureFixture) -> None:
    monitor = HackingMonitor(window=512, check_every=64)

    def make(step: int, rng: np.random.Generator) -> tuple[str, float]:
        return _words(rng, int(rng.integers(10, 30)) + 4 * step), float(rng.normal(0, 1))

    with caplog.at_level(logging.WARNING, logger="rewardsmith.serve"):
        _stream(monitor, 40, make)
    snap = monitor.snapshot()
    assert snap["firing"] == [] and set(snap["fired"].values()) == {0} and _warnings(caplog) == []


def test_responses_shrinking_to_one_or_two_tokens_fire_the_shrinking_warning_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = HackingMonitor(window=512, check_every=64, metrics=ServeMetrics())
    short = ["Yes", "No.", "OK", "Sure", "Yes!", "No", "Fine", "Ok sure"]

    def make(step: int, rng: np.random.Generator) -> tuple[str, float]:
        if step < 20:  # honest answers of 10 to 60 words, then a collapse to one- and two-token answers
            return _words(rng, int(rng.integers(10, 60))), float(rng.normal(0, 1))
        return short[int(rng.integers(0, len(short)))], float(rng.normal(0, 1))

    with caplog.at_level(logging.WARNING, logger="rewardsmith.serve"):
        _stream(monitor, 40, make)
    snap = monitor.snapshot()
    assert "shrinking" in snap["firing"] and snap["fired"]["shrinking"] == 1
    assert snap["stats"]["empty_share"] > 0.25 and snap["stats"]["length_mean"] < 20
    assert "length" not in snap["firing"] and snap["fired"]["length"] == 0
    lines = [x for x in _warnings(caplog) if "shrinking towards empty" in x]
    assert len(lines) == 1 and "\n" not in lines[0]


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
        "brevity",
        "repetition",
        "collapse",
        "shrinking",
    }


# ----------------------------------------------------------------------------------------------------
# Thresholds: each option moves its rule's verdict on a stream whose statistic lies near the default


def _judge(older: list[Observation], newer: list[Observation], **options: float) -> list[str]:
    """The rules the two halves fire under MonitorConfig(**options): one check over a window of exactly them."""
    assert len(older) == len(newer)
    rules = MonitorConfig(**options)  # type: ignore[arg-type]
    monitor = HackingMonitor(window=2 * len(older), check_every=len(older), rules=rules)
    monitor.observe([*older, *newer])
    return monitor.snapshot()["firing"]


def _length_stream(growth: float, noise: float, shift: float) -> tuple[list[Observation], list[Observation]]:
    """32 responses of 40 to 68 characters, then the same grown by `growth`; reward 0.05 per character plus a
    pattern of +-noise that has nothing to do with length, the newer half's lowered by `shift`."""
    older_len = [40 + 4 * (i % 8) for i in range(32)]
    pattern = [noise * (-1) ** (i // 8 + i) * (1 + i % 3) for i in range(32)]

    def half(lengths: list[int], offset: float) -> list[Observation]:
        return [Observation(None, "x" * n, 0.05 * n + p - offset) for n, p in zip(lengths, pattern, strict=True)]

    return half(older_len, 0.0), half([round(n * growth) for n in older_len], shift)


def _brevity_stream(shrink: float, noise: float, shift: float) -> tuple[list[Observation], list[Observation]]:
    """The mirror of _length_stream: 32 responses of 40 to 68 characters, then the same shortened by `shrink`;
    reward -0.05 per character plus the same +-noise pattern, the newer half's lowered by `shift`."""
    older, newer = _length_stream(shrink, noise, shift)

    def mirrored(half: list[Observation], offset: float) -> list[Observation]:
        return [Observation(None, o.response, o.reward - 0.1 * len(o.response) + offset) for o in half]

    return mirrored(older, 0.0), mirrored(newer, 0.0)


def _length_stats(older: list[Observation], newer: list[Observation]) -> tuple[float, float, float]:
    """(reward rise in the window's sds, growth of the mean length, correlation in the newer half)."""
    both = np.array([o.reward for o in older + newer])
    rise = (np.mean([o.reward for o in newer]) - np.mean([o.reward for o in older])) / both.std()
    growth = np.mean([len(o.response) for o in newer]) / np.mean([len(o.response) for o in older])
    corr = np.corrcoef([o.reward for o in newer], [len(o.response) for o in newer])[0, 1]
    return float(rise), float(growth), float(corr)


def _groups(n_groups: int, distinct: int, sd: float, tag: str) -> list[Observation]:
    """n_groups prompts x 4 responses, `distinct` of them different (the rest copies of the first), rewards +-sd
    (a within-group sd of sd)."""
    out = []
    for g in range(n_groups):
        group = prompt_key(f"{tag} prompt {g}")
        out += [Observation(group, f"{tag} answer {g} {min(k, distinct - 1)}", sd * (-1) ** k) for k in range(4)]
    return out


def _texts(*parts: tuple[int, str]) -> list[Observation]:
    """count x response, rewards alternating +-1."""
    responses = [text for count, text in parts for _ in range(count)]
    return [Observation(None, text, (-1.0) ** k) for k, text in enumerate(responses)]


WORDS_40 = " ".join(f"w{k:02d}" for k in range(10))  # 39 characters, no 4-gram repeated
LOOP = "a b c d e a b c d e"  # 7 word 4-grams, 5 distinct: repeated rate 2/7


THRESHOLDS = [
    # option, value that flips the verdict, rule, fires under the default, (older, newer)
    ("length_reward_rise", 0.2, "length", True, _length_stream(1.5, 0.5, 1.15)),  # rise 0.16 sd
    ("length_growth", 1.3, "length", True, _length_stream(1.2, 0.1, 0.0)),  # growth 1.2
    ("length_corr", 0.5, "length", True, _length_stream(1.5, 0.7, 0.0)),  # correlation 0.43
    ("brevity_shrink", 0.75, "brevity", True, _brevity_stream(0.8, 0.1, 0.0)),  # 0.8 of the older length
    ("length_corr", 0.4, "brevity", True, _brevity_stream(0.8, 0.45, 0.0)),  # correlation -0.34
    ("length_reward_rise", 0.2, "brevity", True, _brevity_stream(0.8, 0.1, 0.47)),  # rise 0.15 sd
    ("repetition_rate", 0.3, "repetition", True, (_texts((32, WORDS_40)), _texts((32, LOOP)))),  # rate 0.29
    ("collapse_groups", 3, "collapse", False, (_groups(3, 4, 1.0, "o"), _groups(3, 1, 0.0, "n"))),  # 3 groups alike
    ("collapse_distinct", 0.6, "collapse", False, (_groups(4, 4, 1.0, "o"), _groups(4, 2, 1.0, "n"))),  # 1/2 distinct
    ("collapse_sd_fall", 0.35, "collapse", False, (_groups(4, 4, 1.0, "o"), _groups(4, 4, 0.3, "n"))),  # sd 1 -> 0.3
    ("shrink_fraction", 0.3, "shrinking", True, (_texts((32, "x" * 30)), _texts((32, "x" * 12)))),  # 30 -> 12 chars
    ("shrink_floor_chars", 30.0, "shrinking", False, (_texts((32, "x" * 60)), _texts((32, "x" * 25)))),  # -> 25 chars
    ("empty_chars", 4, "shrinking", False, (_texts((32, WORDS_40)), _texts((10, "Yes."), (22, WORDS_40)))),  # 10/32
    ("empty_share", 0.15, "shrinking", False, (_texts((32, WORDS_40)), _texts((6, "ok"), (26, WORDS_40)))),  # 6/32
]


@pytest.mark.parametrize(
    ("option", "flipped", "rule", "by_default", "stream"), THRESHOLDS, ids=[t[0] for t in THRESHOLDS]
)
def test_every_threshold_option_moves_its_rule(
    option: str, flipped: float, rule: str, by_default: bool, stream: tuple[list[Observation], list[Observation]]
) -> None:
    older, newer = stream
    assert (rule in _judge(older, newer)) is by_default
    assert (rule in _judge(older, newer, **{option: flipped})) is not by_default


def test_the_length_streams_lie_where_their_thresholds_are_tested() -> None:
    rise, _, _ = _length_stats(*_length_stream(1.5, 0.5, 1.15))
    _, growth, _ = _length_stats(*_length_stream(1.2, 0.1, 0.0))
    _, _, corr = _length_stats(*_length_stream(1.5, 0.7, 0.0))
    assert 0.1 < rise < 0.2 and 1.1 < growth < 1.3 and 0.3 < corr < 0.5
    rise, shrink, _ = _length_stats(*_brevity_stream(0.8, 0.1, 0.47))
    _, _, corr = _length_stats(*_brevity_stream(0.8, 0.45, 0.0))
    assert 0.1 < rise < 0.2 and 0.75 < shrink < 0.9 and -0.4 < corr < -0.3


def test_the_thresholds_are_serve_options_checked_on_load() -> None:
    settings = ServeConfig()
    assert settings.monitor == MonitorConfig() and settings.monitor.length_growth == 1.1
    apply_overrides(settings, {"monitor.shrink_floor_chars": 8, "monitor.collapse_groups": 2})
    assert settings.monitor.shrink_floor_chars == 8.0 and settings.monitor.collapse_groups == 2
    with pytest.raises(ConfigError, match=r"monitor\.empty_share"):
        apply_overrides(ServeConfig(), {"monitor.empty_share": 0})
    with pytest.raises(ConfigError, match=r"monitor\.length_corr"):
        apply_overrides(ServeConfig(), {"monitor.length_corr": 1.5})
