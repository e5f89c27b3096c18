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
- cut_share: share of responses cut at max_length;
- repeated_ngram_rate: mean over responses of 1 - distinct / total word 4-grams (0: no 4-gram repeats);
- groups: prompts with at least two responses in the window; distinct_per_group: mean share of distinct responses
  in such a group; group_reward_sd: mean reward sd within such groups (GRPO's advantage signal).

Warnings, each judged on the window's older and newer halves (by arrival), each logged in one line when it starts
firing and counted in rewardsmith_monitor_warnings_total{rule}:

- length: the reward rose (newer - older mean > 0.1 reward sd) while responses grew (newer mean length > 1.1 x
  older) and reward follows length in the newer half (correlation >= 0.3): the policy may be buying reward with
  length;
- repetition: the newer half's repeated 4-gram rate is >= 0.2;
- collapse: the newer half holds at least 4 groups and either fewer than half of a group's responses are distinct,
  or its within-group reward sd fell below a quarter of the older half's: the groups' responses have become
  alike, and GRPO's advantages vanish.

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
from typing import Any

import numpy as np

log = logging.getLogger("rewardsmith.serve")

STATS = (
    "texts",
    "reward_mean",
    "reward_sd",
    "length_mean",
    "length_corr",
    "length_slope",
    "cut_share",
    "repeated_ngram_rate",
    "groups",
    "distinct_per_group",
    "group_reward_sd",
)
RULES = ("length", "repetition", "collapse")
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


def window_stats(rows: Sequence[tuple[str | None, float, float, bool, float, str]]) -> dict[str, float | None]:
    """The statistics (STATS) of rows (group, reward, length, cut, repeated rate, response); None where undefined."""
    n = len(rows)
    out: dict[str, float | None] = dict.fromkeys(STATS)
    out["texts"] = float(n)
    if not n:
        return out
    reward = np.array([r[1] for r in rows])
    length = np.array([r[2] for r in rows])
    out["reward_mean"], out["reward_sd"] = float(reward.mean()), float(reward.std())
    out["length_mean"] = float(length.mean())
    out["cut_share"] = float(np.mean([r[3] for r in rows]))
    out["repeated_ngram_rate"] = float(np.mean([r[4] for r in rows]))
    if n >= 3 and reward.std() > 0 and length.std() > 0:
        out["length_corr"] = float(np.corrcoef(reward, length)[0, 1])
        out["length_slope"] = float(np.polyfit(length / 100.0, reward, 1)[0])
    groups: dict[str, list[tuple[float, str]]] = {}
    for group, r, _, _, _, response in rows:
        if group is not None:
            groups.setdefault(group, []).append((r, response))
    multi = [g for g in groups.values() if len(g) >= 2]
    out["groups"] = float(len(multi))
    if multi:
        out["distinct_per_group"] = float(np.mean([len({x[1] for x in g}) / len(g) for g in multi]))
        out["group_reward_sd"] = float(np.mean([np.std([x[0] for x in g]) for g in multi]))
    return out


def firing(older: dict[str, float | None], newer: dict[str, float | None], overall_sd: float) -> list[str]:
    """The warning rules (RULES) the window's halves fire (see the module docstring)."""
    rules = []
    o_r, n_r, o_l, n_l = older["reward_mean"], newer["reward_mean"], older["length_mean"], newer["length_mean"]
    corr = newer["length_corr"]
    if None not in (o_r, n_r, o_l, n_l, corr) and overall_sd > 0:
        rose = n_r - o_r > 0.1 * overall_sd  # type: ignore[operator]
        grew = n_l > 1.1 * o_l  # type: ignore[operator]
        if rose and grew and corr >= 0.3:  # type: ignore[operator]
            rules.append("length")
    if (newer["repeated_ngram_rate"] or 0.0) >= 0.2:
        rules.append("repetition")
    if (newer["groups"] or 0) >= 4:
        alike = (newer["distinct_per_group"] or 1.0) < 0.5
        o_g, n_g = older["group_reward_sd"], newer["group_reward_sd"]
        fell = bool(o_g) and (older["groups"] or 0) >= 4 and n_g is not None and n_g < o_g / 4  # type: ignore[operator]
        if alike or fell:
            rules.append("collapse")
    return rules


class HackingMonitor:
    """The sliding window of one server's scored texts and its warnings (thread-safe). window: observations
    kept; check_every: texts between warning checks; metrics: a ServeMetrics whose monitor gauges and warning
    counter are kept up to date (None: none)."""

    def __init__(self, window: int = 1024, check_every: int = 64, metrics: Any = None):
        self.window = window
        self.check_every = max(1, check_every)
        self.metrics = metrics
        self._rows: deque[tuple[str | None, float, float, bool, float, str]] = deque(maxlen=window)
        self._lock = threading.Lock()
        self._since_check = 0
        self._firing: set[str] = set()
        self.fired: dict[str, int] = dict.fromkeys(RULES, 0)
        self.nonfinite_skipped = 0

    def observe(self, observations: Sequence[Observation]) -> None:
        """Appends the observations to the window; one whose reward is not finite is left out and counted
        (nonfinite_skipped): no statistic is computed over a NaN."""
        kept = [o for o in observations if math.isfinite(o.reward)]
        rows = [(o.group, float(o.reward), float(len(o.response)), o.cut, o.repeated, o.response) for o in kept]
        with self._lock:
            self.nonfinite_skipped += len(observations) - len(kept)
            self._rows.extend(rows)
            self._since_check += len(rows)
            if self._since_check < self.check_every:
                return
            self._since_check = 0
            rows = list(self._rows)
        self._check(rows)

    def _check(self, rows: list[tuple[str | None, float, float, bool, float, str]]) -> None:
        if len(rows) < 2 * self.check_every:
            return
        half = len(rows) // 2
        overall = window_stats(rows)
        now = set(firing(window_stats(rows[:half]), window_stats(rows[half:]), overall["reward_sd"] or 0.0))
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
    "repetition": "responses repeat themselves (repeated 4-gram rate {repeated_ngram_rate})",
    "collapse": "rewards within a prompt's group have collapsed (within-group sd {group_reward_sd}, distinct "
    "responses per group {distinct_per_group}): GRPO's advantages vanish",
}
