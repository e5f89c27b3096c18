"""Reward-hacking monitors of the reward server: what the stream of (prompt, response, reward) it scores says about
the policy being trained on it, which no trainer's log shows.

Every scored text is one observation: its prompt's key (a GRPO group: the texts of one prompt), its response (the
text after its prompt when the request gives the prompt; a whole rendered conversation counts whole), the reward
and whether the response was cut at the model's max_length. `observe` appends (O(1) per text, plus the response's
word 4-grams); the statistics are computed over the last `window` observations when read (/metrics, /v1/monitors)
and every `check_every` texts for the warnings. Statistics (their /metrics gauge is rewardsmith_monitor_<name>):

- texts: observations in the window; reward_mean, reward_sd;
- length_mean: response length in characters; length_corr: Pearson correlation of reward with response length;
  length_slope: the least-squares slope of reward on length, per 100 characters;
- cut_share: share of responses cut at max_length; empty_share: share of near-empty responses (at most
  --monitor-empty-chars characters, surrounding whitespace left out);
- repeated_ngram_rate: mean over responses of 1 - distinct / total word 4-grams (0: no 4-gram repeats);
- groups: prompts with at least two responses in the window; distinct_per_group: mean share of distinct responses
  in such a group; group_reward_sd: mean reward sd within such groups (GRPO's advantage signal).

Warnings, each judged on the window's older and newer halves (by arrival), each logged in one line when it starts
firing and counted in rewardsmith_monitor_warnings_total{rule}. Their thresholds are the options of MonitorConfig
(serve/config.py; `rewardsmith serve --monitor-<name>`), the defaults given here:

- length: the reward rose (newer - older mean > 0.1 reward sd, length_reward_rise) while responses grew (newer
  mean length > 1.1 x older, length_growth) and reward follows length in the newer half (correlation >= 0.3,
  length_corr): the policy may be buying reward with length;
- brevity: the mirror of length: the reward rose (as above) while responses shortened (newer mean length < 0.9 x
  older, brevity_shrink) and reward follows shortness in the newer half (correlation <= -0.3, minus length_corr):
  the policy may be buying reward with brevity, as against a proxy that learned "shorter is better", long before
  its answers are near-empty (the shrinking rule's case);
- repetition: the newer half's repeated 4-gram rate is >= 0.2 (repetition_rate);
- collapse: the newer half holds at least 4 groups (collapse_groups) and either fewer than half of a group's
  responses are distinct (collapse_distinct), or its within-group reward sd fell below a quarter of the older
  half's (collapse_sd_fall; the older half holding as many groups): the groups' responses have become alike, and
  GRPO's advantages vanish;
- shrinking: the newer half's mean response length is below half the older half's (shrink_fraction) and below 20
  characters (shrink_floor_chars), or at least a quarter of the newer half's responses are near-empty (at most 3
  characters, empty_chars; empty_share): the policy has collapsed towards empty or one- and two-token answers,
  which no other rule sees (their reward need not rise, nor anything repeat).

A rule fires while its pattern holds in the window (the length rule while length still grows), so a run that
stopped drifting goes quiet again, and fires anew if the pattern comes back.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rewardsmith.serve.config import MonitorConfig

log = logging.getLogger("rewardsmith.serve")

STATS = (
    "texts",
    "reward_mean",
    "reward_sd",
    "length_mean",
    "length_corr",
    "length_slope",
    "cut_share",
    "empty_share",
    "repeated_ngram_rate",
    "groups",
    "distinct_per_group",
    "group_reward_sd",
)
RULES = ("length", "brevity", "repetition", "collapse", "shrinking")
NGRAM = 4


@dataclass(frozen=True)
class Observation:
    """One scored text: its prompt's key (None: not known, no group), response, reward, cut at max_length."""

    group: str | None
    response: str
    reward: float
    cut: bool = False

    @property
    def repeated(self) -> float:
        words = self.response.split()
        grams = [tuple(words[k : k + NGRAM]) for k in range(len(words) - NGRAM + 1)]
        return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def prompt_key(prompt: Any) -> str | None:
    """A stable key of a prompt (turns or a string); None when there is none."""
    if prompt is None:
        return None
    text = prompt if isinstance(prompt, str) else "\x1e".join(f"{t.role}\x1f{t.content}" for t in prompt)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


Stats = dict[str, float | None]


class Row(NamedTuple):
    """One observation as the window keeps it: what the statistics read."""

    group: str | None
    reward: float
    length: float  # characters
    cut: bool
    repeated: float  # the response's repeated 4-gram rate
    empty: bool  # near-empty: at most MonitorConfig.empty_chars characters, surrounding whitespace left out
    response: str


def window_stats(rows: Sequence[Row]) -> Stats:
    """The statistics (STATS) of rows; None where undefined."""
    n = len(rows)
    out: Stats = dict.fromkeys(STATS)
    out["texts"] = float(n)
    if not n:
        return out
    reward = np.array([r.reward for r in rows])
    length = np.array([r.length for r in rows])
    out["reward_mean"], out["reward_sd"] = float(reward.mean()), float(reward.std())
    out["length_mean"] = float(length.mean())
    out["cut_share"] = float(np.mean([r.cut for r in rows]))
    out["empty_share"] = float(np.mean([r.empty for r in rows]))
    out["repeated_ngram_rate"] = float(np.mean([r.repeated for r in rows]))
    if n >= 3 and reward.std() > 0 and length.std() > 0:
        out["length_corr"] = float(np.corrcoef(reward, length)[0, 1])
        out["length_slope"] = float(np.polyfit(length / 100.0, reward, 1)[0])
    groups: dict[str, list[tuple[float, str]]] = {}
    for row in rows:
        if row.group is not None:
            groups.setdefault(row.group, []).append((row.reward, row.response))
    multi = [g for g in groups.values() if len(g) >= 2]
    out["groups"] = float(len(multi))
    if multi:
        out["distinct_per_group"] = float(np.mean([len({x[1] for x in g}) / len(g) for g in multi]))
        out["group_reward_sd"] = float(np.mean([np.std([x[0] for x in g]) for g in multi]))
    return out


def firing(older: Stats, newer: Stats, overall_sd: float, rules: MonitorConfig | None = None) -> list[str]:
    """The warning rules (RULES) the window's halves fire, under the thresholds `rules` (default: MonitorConfig's
    defaults; see the module docstring)."""
    rules = rules if rules is not None else MonitorConfig()
    judged = {
        "length": _length_rule(older, newer, overall_sd, rules),
        "brevity": _brevity_rule(older, newer, overall_sd, rules),
        "repetition": (newer["repeated_ngram_rate"] or 0.0) >= rules.repetition_rate,
        "collapse": _collapse_rule(older, newer, rules),
        "shrinking": _shrinking_rule(older, newer, rules),
    }
    return [rule for rule in RULES if judged[rule]]


def _length_rule(older: Stats, newer: Stats, overall_sd: float, rules: MonitorConfig) -> bool:
    """The reward rose while responses grew, and reward follows length in the newer half."""
    moved = _reward_rose_as_length_moved(older, newer, overall_sd, rules)
    return moved is not None and moved[0] > rules.length_growth and moved[1] >= rules.length_corr


def _brevity_rule(older: Stats, newer: Stats, overall_sd: float, rules: MonitorConfig) -> bool:
    """The reward rose while responses shortened, and reward follows shortness in the newer half."""
    moved = _reward_rose_as_length_moved(older, newer, overall_sd, rules)
    return moved is not None and moved[0] < rules.brevity_shrink and moved[1] <= -rules.length_corr


def _reward_rose_as_length_moved(
    older: Stats, newer: Stats, overall_sd: float, rules: MonitorConfig
) -> tuple[float, float] | None:
    """(newer / older mean length, reward-length correlation in the newer half) when the reward rose by more than
    length_reward_rise sds; None when it did not, or a statistic is undefined."""
    o_r, n_r, o_l, n_l = older["reward_mean"], newer["reward_mean"], older["length_mean"], newer["length_mean"]
    corr = newer["length_corr"]
    if o_r is None or n_r is None or o_l is None or n_l is None or corr is None or overall_sd <= 0:
        return None
    if n_r - o_r <= rules.length_reward_rise * overall_sd:
        return None
    return (n_l / o_l if o_l else math.inf if n_l else 1.0), corr


def _collapse_rule(older: Stats, newer: Stats, rules: MonitorConfig) -> bool:
    """Enough groups in the newer half, and their responses alike or their reward sd fallen."""
    if (newer["groups"] or 0) < rules.collapse_groups:
        return False
    alike = (newer["distinct_per_group"] or 1.0) < rules.collapse_distinct
    o_g, n_g = older["group_reward_sd"], newer["group_reward_sd"]
    compared = bool(o_g) and (older["groups"] or 0) >= rules.collapse_groups and n_g is not None
    fell = compared and n_g < o_g * rules.collapse_sd_fall  # type: ignore[operator]
    return alike or fell


def _shrinking_rule(older: Stats, newer: Stats, rules: MonitorConfig) -> bool:
    """The newer half's responses much shorter than the older half's and short outright, or many near-empty."""
    o_l, n_l = older["length_mean"], newer["length_mean"]
    shrank = (
        o_l is not None and n_l is not None and n_l < rules.shrink_fraction * o_l and n_l < rules.shrink_floor_chars
    )
    return shrank or (newer["empty_share"] or 0.0) >= rules.empty_share


class HackingMonitor:
    """The sliding window of one server's scored texts and its warnings (thread-safe). window: observations
    kept; check_every: texts between warning checks; metrics: a ServeMetrics whose monitor gauges and warning
    counter are kept up to date (None: none); rules: the rules' thresholds (None: MonitorConfig's defaults)."""

    def __init__(
        self, window: int = 1024, check_every: int = 64, metrics: Any = None, rules: MonitorConfig | None = None
    ):
        self.window = window
        self.check_every = max(1, check_every)
        self.metrics = metrics
        self.rules = rules if rules is not None else MonitorConfig()
        self._rows: deque[Row] = deque(maxlen=window)
        self._lock = threading.Lock()
        self._since_check = 0
        self._firing: set[str] = set()
        self.fired: dict[str, int] = dict.fromkeys(RULES, 0)
        self.nonfinite_skipped = 0

    def observe(self, observations: Sequence[Observation]) -> None:
        """Appends the observations to the window; one whose reward is not finite is left out and counted
        (nonfinite_skipped): no statistic is computed over a NaN."""
        kept = [o for o in observations if math.isfinite(o.reward)]
        rows = [self._row(o) for o in kept]
        with self._lock:
            self.nonfinite_skipped += len(observations) - len(kept)
            self._rows.extend(rows)
            self._since_check += len(rows)
            if self._since_check < self.check_every:
                return
            self._since_check = 0
            rows = list(self._rows)
        self._check(rows)

    def _row(self, o: Observation) -> Row:
        empty = len(o.response.strip()) <= self.rules.empty_chars
        return Row(o.group, float(o.reward), float(len(o.response)), o.cut, o.repeated, empty, o.response)

    def _check(self, rows: list[Row]) -> None:
        if len(rows) < 2 * self.check_every:
            return
        half = len(rows) // 2
        overall = window_stats(rows)
        older, newer = window_stats(rows[:half]), window_stats(rows[half:])
        now = set(firing(older, newer, overall["reward_sd"] or 0.0, self.rules))
        with self._lock:
            started = sorted(now - self._firing)
            self._firing = now
            for rule in started:
                self.fired[rule] += 1
        for rule in started:
            if self.metrics is not None:
                self.metrics.monitor_warnings.labels(rule).inc()
            log.warning("monitor: %s", _WARNINGS[rule].format(**{k: _show(v) for k, v in overall.items()}))

    def snapshot(self) -> dict[str, Any]:
        """The window's statistics, the rules firing now and how often each has started firing."""
        with self._lock:
            rows = list(self._rows)
            firing_now = sorted(self._firing)
            fired = dict(self.fired)
        stats = window_stats(rows)
        if self.metrics is not None:
            for name, value in stats.items():
                self.metrics.monitor[name].set(float("nan") if value is None else value)
        return {
            "window": self.window,
            "stats": stats,
            "firing": firing_now,
            "fired": fired,
            "rules": list(RULES),
            "nonfinite_skipped": self.nonfinite_skipped,
        }


def _show(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


_WARNINGS = {
    "length": "reward rises with response length (correlation {length_corr}, slope {length_slope} per 100 "
    "characters, mean length {length_mean}): the policy may be buying reward with length",
    "brevity": "reward rises as responses shorten (correlation {length_corr}, slope {length_slope} per 100 "
    "characters, mean length {length_mean}): the policy may be buying reward with brevity",
    "repetition": "responses repeat themselves (repeated 4-gram rate {repeated_ngram_rate})",
    "collapse": "rewards within a prompt's group have collapsed (within-group sd {group_reward_sd}, distinct "
    "responses per group {distinct_per_group}): GRPO's advantages vanish",
    "shrinking": "responses are shrinking towards empty (mean length {length_mean} characters, near-empty share "
    "{empty_share}): the policy may have collapsed to one- and two-token answers",
}
