"""Result blocks of docs/serve.md (and a one-paragraph summary for the README), rendered from
benchmarks/results/serve.json as benchmarks/bench_serve.py writes it: per torch thread count, per client count the
server's texts/s against the bare batched forward and the one-request-one-forward server (medians over rounds,
per-round ratios with their range), latencies and round sizes; the mixed run (one large request among small
ones); and whether the issue's bars held (>= 90% of the bare batched forward and >= 2x one-request-one-forward at
32 clients; the small requests' p99 within 3x with the large request)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from blocks_common import BENCH, table

from rewardsmith.evaluate.formatting import with_range

BARE_BAR = 0.9  # server texts/s over the bare batched forward's, at BAR_CLIENTS clients
ONE_PER_FORWARD_BAR = 2.0  # server texts/s over the one-request-one-forward server's
BAR_CLIENTS = 32
P99_BAR = 3.0  # small requests' p99 with the large request over their p99 without it
DISTURBED = 1.25  # server / bare above this in a round: the bare run was slowed by other work


def _load() -> dict[str, Any]:
    return json.loads((BENCH / "serve.json").read_text(encoding="utf-8"))


def _threads(block: dict[str, Any]) -> str:
    return f"{block['threads']} torch thread{'s' if block['threads'] > 1 else ''}"


def _held(ratio: dict[str, Any], bar: float, above: bool = True) -> str:
    """held / not held by the median of the per-round ratios, with how many rounds were on the right side."""
    values = ratio["per_round"]
    ok = [v >= bar if above else v <= bar for v in values]
    median_ok = ratio["median"] >= bar if above else ratio["median"] <= bar
    return f"{'held' if median_ok else 'NOT held'} ({sum(ok)} of {len(ok)} rounds)"


def _disturbed(ratio: dict[str, Any]) -> str:
    """A note when the server beat the bare forward of the same texts by more than DISTURBED in some round: the
    bare run was slowed by other work on the machine, and those rounds say nothing about the bar."""
    n = sum(v > DISTURBED for v in ratio["per_round"])
    if not n:
        return ""
    return (
        f"; in {n} of {len(ratio['per_round'])} rounds the server ran over {DISTURBED:g}x the bare forward, "
        "which other work on the machine had slowed: those rounds do not test the bar"
    )


def verdicts(result: dict[str, Any]) -> list[str]:
    """One line per bar of the issue, for the first (the machine's) thread count."""
    block = result["by_threads"][0]
    level = next((lv for lv in block["levels"] if lv["concurrency"] == BAR_CLIENTS), None)
    lines = []
    if level is not None:
        lines.append(
            f"{BAR_CLIENTS} clients, {_threads(block)}: server / bare batched forward "
            f"{with_range(level['batched_over_bare'], percent=True)}, bar >= {100 * BARE_BAR:.0f}%: "
            f"{_held(level['batched_over_bare'], BARE_BAR)}{_disturbed(level['batched_over_bare'])}"
        )
        ceiling = level.get("bare_over_bare_one")
        lines.append(
            f"{BAR_CLIENTS} clients, {_threads(block)}: server / one-request-one-forward server "
            f"{with_range(level['batched_over_one_per_forward'])}, bar >= {ONE_PER_FORWARD_BAR:g}x: "
            f"{_held(level['batched_over_one_per_forward'], ONE_PER_FORWARD_BAR)}"
            + (
                ""
                if ceiling is None
                else f" (the bare forward itself, {BAR_CLIENTS} texts per call over one at a time: "
                f"{with_range(ceiling)}: what batching buys the forward pass itself on this machine)"
            )
        )
    mixed = block.get("mixed")
    if mixed:
        lines.append(
            f"small requests' p99 with / without the large request, {_threads(block)}: "
            f"{with_range(mixed['p99_with_over_without'])}, bar <= {P99_BAR:g}x: "
            f"{_held(mixed['p99_with_over_without'], P99_BAR, above=False)}"
        )
    return lines


def _levels_table(block: dict[str, Any]) -> str:
    rows = [
        [
            str(lv["concurrency"]),
            f"{lv['batched_texts_per_s']:.1f}",
            f"{lv['bare_texts_per_s']:.1f}",
            "-" if lv.get("bare_over_bare_one") is None else with_range(lv["bare_over_bare_one"]),
            with_range(lv["batched_over_bare"], percent=True),
            f"{lv['one_per_forward_texts_per_s']:.1f}",
            with_range(lv["batched_over_one_per_forward"]),
            f"{lv['batched_p50_ms']:.0f} / {lv['batched_p99_ms']:.0f}",
            f"{lv['one_per_forward_p50_ms']:.0f} / {lv['one_per_forward_p99_ms']:.0f}",
            f"{lv['batched_texts_per_round']:.1f}",
            str(lv["failed"]),
        ]
        for lv in block["levels"]
    ]
    return table(
        [
            "clients",
            "server texts/s",
            "bare batched forward texts/s",
            "bare, C per call / 1 per call",
            "server / bare",
            "one-per-forward server texts/s",
            "server / one-per-forward",
            "server p50 / p99 ms",
            "one-per-forward p50 / p99 ms",
            "texts per round",
            "failed",
        ],
        rows,
    )


def _mixed_text(result: dict[str, Any], block: dict[str, Any]) -> str:
    m = block.get("mixed")
    if not m:
        return "No mixed run at this thread count."
    s = result["settings"]
    return (
        f"Mixed run ({s['mixed']}): the small requests' p99 was {m['small_p99_ms_with_large']:.0f} ms while the "
        f"large one was scored ({m['small_answered_during_large']:.0f} small requests answered meanwhile; the "
        f"large one took {m['large_seconds']:.1f} s), {m['small_p99_ms_alone']:.0f} ms without it: "
        f"{with_range(m['p99_with_over_without'])}. Failed requests: {m['failed']}."
    )


def block_serve() -> str:
    """The load benchmark of docs/serve.md: one table per thread count, the mixed run, the bars, the load."""
    result = _load()
    s = result["settings"]
    parts = [
        f"Model: {s['model']}. Texts: {s['texts']}; connections: {s['connections']}. Each configuration ran "
        f"in a fresh process, in rotating order, {s['rounds']} rounds ({s['warmup_s']:g} s warm-up, "
        f"{s['measure_s']:g} s measured); ratios are taken within a round (median over rounds, range in "
        "brackets). The load generator shares the machine with the server."
    ]
    for block in result["by_threads"]:
        load = block["load_average_at_start"]
        parts.append(
            f"**{_threads(block)}** (rounds of at most {block['max_batch_tokens']} tokens):\n\n"
            + _levels_table(block)
            + "\n\n"
            + _mixed_text(result, block)
            + f" Largest score difference from the bare forward: "
            f"{block['max_abs_score_difference_vs_bare']:.1e}. Server RSS at most "
            f"{block['server_rss_mb_max']:.0f} MB; SIGTERM to exit at most "
            f"{block['server_shutdown_seconds_max']:.1f} s (exit codes {block['server_exit_codes']}). "
            f"1-minute load average at the start of the runs: {min(load):.1f}-{max(load):.1f}."
        )
    parts.append(
        "Bars of the issue (median of the per-round ratios):\n\n" + "\n".join(f"- {line}" for line in verdicts(result))
    )
    parts.append(f"Source: `benchmarks/results/serve.json`; command: `{result['command']}`.")
    return "\n\n".join(parts)


def block_serve_summary() -> str:
    """One paragraph for the README: the 32-client ratios and the mixed run, each with its verdict."""
    result = _load()
    return (
        "Reward server under load (`docs/serve.md`): "
        + "; ".join(verdicts(result))
        + ". Source: `benchmarks/results/serve.json`."
    )


BLOCKS: dict[str, Callable[[], str]] = {"serve": block_serve, "serve-summary": block_serve_summary}
