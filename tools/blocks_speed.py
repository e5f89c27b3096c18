"""The README's speed block (training, scoring and CPU kernels), rendered from benchmarks/results/*.json (the
benchmarks/ scripts write them)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

from blocks_common import BENCH, RESULTS
from blocks_common import table as _table

from rewardsmith.evaluate.formatting import with_range
from rewardsmith.stats import interval_verdict


def block_speed() -> str:
    parts = []
    train_path, score_path, kernels_path = (BENCH / f"{n}.json" for n in ("train_throughput", "score", "kernels"))
    if train_path.exists():
        parts.append(_training(json.loads(train_path.read_text(encoding="utf-8"))))
    if score_path.exists():
        sc = json.loads(score_path.read_text(encoding="utf-8"))
        rows = []
        for r in sc["results"]:
            f = r["fraction_of_bare"]
            rows.append(
                [
                    str(r["max_length"]),
                    r["precision"],
                    f"{r['median_pairs_per_s']['score']:.1f}",
                    f"{r['median_pairs_per_s']['bare']:.1f}",
                    with_range(f, percent=True),
                    f"{r['median_load_seconds']:.1f}",
                ]
            )
        parts.append(
            f"**Scoring** (`rewardsmith score` on {sc['pairs']} pairs, model load timed apart; bf16 "
            "rewards stay within 5% of the fp32 rewards' standard deviation, "
            "`tests/integration/test_scoring_bf16.py`):\n\n"
            + _table(
                ["tokens", "precision", "score pairs/s", "bare forward pairs/s", "of the bare limit", "model load s"],
                rows,
            )
            + f"\n\nCommand: `{sc['command']}`; results: `benchmarks/results/score.json`."
        )
    if kernels_path.exists():
        parts.append(_kernels_part(json.loads(kernels_path.read_text(encoding="utf-8"))))
    if parts:
        parts.append(
            "The bf16 rows above come from a CPU that multiplies bf16 natively (bf16 ran faster than fp32 there). On a "
            "CPU without native bf16 (AVX2 only) rewardsmith runs a bf16 request in fp32 and says so in one line "
            "(`src/rewardsmith/models/precision.py`), so there its fp32 rows apply."
        )
    return "\n\n".join(parts) if parts else "Not measured yet."


def _kernels_part(k: dict[str, Any]) -> str:
    """The two CPU kernel choices (models/attention.py, train/trainer.py): speed-up of the fp32 attention core
    over the bf16 one per shape, pass and length, and fused over multi-tensor AdamW."""
    lengths = sorted({a["length"] for a in k["attention"]})
    by_row: dict[tuple[str, str], dict[int, str]] = {}
    for a in k["attention"]:
        s = a["speedup_of_fp32_core"]
        by_row.setdefault((a["shape"], a["mode"]), {})[a["length"]] = f"{s['median']:.2f}x"
    rows = [[shape, mode] + [cells.get(n, "") for n in lengths] for (shape, mode), cells in by_row.items()]
    w = k["adamw_minilm"]
    s = w["speedup_of_fused"]
    return (
        "**CPU kernels** (attention under bf16 autocast: time with the bf16 core / time with the core upcast "
        f"to fp32, median of {k['rounds']} fresh-process rounds; rewardsmith upcasts heads of at most 32 dims, "
        "`src/rewardsmith/models/attention.py`):\n\n"
        + _table(["heads", "pass"] + [f"{n} tokens" for n in lengths], rows)
        + f"\n\nAdamW step over MiniLM's parameters: {w['foreach_ms']:.1f} ms multi-tensor, {w['fused_ms']:.1f} "
        f"ms fused ({s['median']:.1f}x, {s['min']:.1f}-{s['max']:.1f}); rewardsmith's Trainer uses the fused "
        f"kernel. Command: `{k['command']}`; results: `benchmarks/results/kernels.json`."
    )


# What each rewardsmith variant of the training benchmark runs (benchmarks/bench_train_throughput.py VARIANTS).
_LEVERS = {
    "rs-none": "random batches, one pass a batch",
    "rs-grouped": "length-grouped batches",
    "rs-forward": "forward groups",
    "rewardsmith": "length-grouped batches + forward groups (the defaults)",
    "rs-compile": "the defaults + train.compile",
}
SPEED_BAR = 2.0  # rewardsmith / TRL pairs/s, whole default recipe, each precision


def _training(t: dict[str, Any]) -> str:
    rows = []
    for r in t["results"]:
        med = r["median"]
        vs, bare, again = (
            r[k] for k in ("ratio_vs_trl_pairs_per_s", "fraction_of_bare_tokens_per_s", "second_over_first_training")
        )
        rounds = vs["per_round"]
        held = sum(x >= SPEED_BAR for x in rounds)
        verdict = "held" if vs["median"] >= SPEED_BAR else "NOT held"  # on the median paired ratio
        rows.append(
            [
                r["precision"],
                f"{med['rewardsmith']['pairs_per_s']:.2f}",
                f"{med['trl']['pairs_per_s']:.2f}",
                f"{with_range(vs)}: {verdict} ({held} of {len(rounds)} rounds)",
                f"{med['rewardsmith']['tokens_per_s']:.0f} / {med['bare']['tokens_per_s']:.0f}",
                with_range(bare, percent=True),
                f"{100 * med['rewardsmith']['padding_fraction']:.0f}% / {100 * med['trl']['padding_fraction']:.0f}%",
                f"{again['median']:.2f}",
                f"{r['pairs_kept']['rewardsmith']} / {r['pairs_kept']['trl']} of {r['pairs_kept']['of']}",
            ]
        )
    out = (
        f"**Training** ({t['pairs']} hh-rlhf/harmless-base pairs that fit {t['max_length']} tokens whole under both "
        f"tools, so each trains on the same pairs; {t['batch_size']} pairs a step, one epoch, MiniLM; "
        f"{t['rounds']} rounds; bar: the median paired ratio of pairs/s >= {SPEED_BAR:.0f}x TRL):\n\n"
        + _table(
            [
                "precision",
                "rewardsmith pairs/s",
                "TRL pairs/s",
                "ratio, bar",
                "tokens/s (ours / bare)",
                "of the bare limit",
                "padding (ours / TRL)",
                "2nd / 1st training",
                "pairs kept",
            ],
            rows,
        )
    )
    lever_rows = []
    for r in t["results"]:
        for name, what in _LEVERS.items():
            if name not in r["median"]:
                continue
            m, vs = r["median"][name], r["variants_vs_trl_pairs_per_s"][name]
            warm = ""
            runs = r["runs"][name]
            if "second" in runs[0]:
                warm = f"{statistics.median(x['second']['pairs_per_s'] for x in runs):.2f}"
            lever_rows.append(
                [
                    r["precision"],
                    what,
                    f"{m['pairs_per_s']:.2f}",
                    with_range(vs),
                    f"{100 * m['padding_fraction']:.0f}%",
                    warm,
                    f"{r['process_seconds'][name]:.0f}",
                ]
            )
    if lever_rows:
        out += (
            "\n\nEach lever alone and together (same pairs and rounds; pairs/s of the first training in a fresh "
            "process, compile time included; the second training in the same process beside it where run):\n\n"
            + _table(
                [
                    "precision",
                    "rewardsmith with",
                    "pairs/s",
                    "/ TRL",
                    "padding computed",
                    "2nd training pairs/s",
                    "process s",
                ],
                lever_rows,
            )
        )
    for r in t["results"]:
        if "process_seconds" in r:
            p = r["process_seconds"]
            out += (
                f"\n\nWhole process from outside ({r['precision']}: imports, data, model load and training): TRL "
                f"{p['trl']:.0f} s, rewardsmith with length-grouped batches {p.get('rs-grouped', float('nan')):.0f} s "
                f"for one training; the defaults' {p['rewardsmith']:.0f} s hold two trainings (the 2nd / 1st check)."
            )
    return out + f"\n\nCommand: `{t['command']}`; results: `benchmarks/results/train_throughput.json`."


def block_batching() -> str:
    """Length-grouped against random batches on accuracy (experiments/batching.py -> docs/results/batching.json)."""
    path = RESULTS / "batching.json"
    if not path.exists():
        return "Not run: `python experiments/batching.py run` then `summarise` write docs/results/batching.json."
    b = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for s in b["sets"]:
        g, r, d = b["levels"]["length-grouped"][s], b["levels"]["random"][s], b["grouped_minus_random"][s]
        verdict = interval_verdict(*d["ci"], n=b["pairs"][s], unit="pairs") or "not computed"
        verdict = {"held": "grouped higher", "not held": "grouped lower"}.get(verdict, verdict)
        rows.append(
            [
                s,
                str(b["pairs"][s]),
                f"{g['accuracy']:.1f} [{g['ci'][0]:.1f}, {g['ci'][1]:.1f}]",
                f"{r['accuracy']:.1f} [{r['ci'][0]:.1f}, {r['ci'][1]:.1f}]",
                f"{d['points']:+.1f} [{d['ci'][0]:+.1f}, {d['ci'][1]:+.1f}] {verdict}",
            ]
        )
    d0 = b["default_seed0"]
    now, before = d0["now"], d0["before"]
    within = "within" if d0["within_before_ci"] else "OUTSIDE"
    seeds = ", ".join(map(str, b["seeds"]))
    return (
        f"**What batching changes in the model** (`{b['config']}`, seeds {seeds}; accuracy in %, 95% hierarchical "
        "bootstrap CIs over seeds and pairs):\n\n"
        + _table(["scored on", "pairs", "length-grouped", "random", "grouped - random (points)"], rows)
        + f"\n\nThe default recipe with forward groups, seed 0, on {d0['set']}: {now['accuracy']:.1f} "
        f"[{now['ci'][0]:.1f}, {now['ci'][1]:.1f}] ({now['n']} pairs), against {before['accuracy']:.1f} "
        f"[{before['ci'][0]:.1f}, {before['ci'][1]:.1f}] ({before['n']} pairs) committed before them "
        f"(`docs/results/train-harmless.json`): {within} its CI. "
        f"Source: `docs/results/batching.json`; commands: `{'`; `'.join(b['command'].split('; '))}`."
    )


def _machine_text(result: dict[str, Any]) -> str:
    """'Measured on CPU (capability, bf16 native or not). ' from a result's machine record; '' where it has none."""
    m = result.get("machine", {})
    if not m.get("cpu"):
        return ""
    bf16 = "native bf16" if m.get("bf16_native") else "no native bf16"
    return f"Measured on {m['cpu']} ({m.get('cpus')} cores, {m.get('cpu_capability')}, {bf16}). "


def block_first_run() -> str:
    """A first run as a user starts one, whole processes timed from outside: `rewardsmith train` against a TRL
    script (benchmarks/results/train_process.json) and `rewardsmith demo` idle and beside one CPU-bound process,
    with OpenMP's wait policy under that load (benchmarks/results/contention.json)."""
    parts = []
    process = BENCH / "train_process.json"
    if process.exists():
        t = json.loads(process.read_text(encoding="utf-8"))
        rows = []
        for r in t["results"]:
            if "not_run" in r:
                rows.append([r["precision"], "not run", "not run", r["not_run"], "not run"])
                continue
            ratio, med, loop = r["trl_over_rewardsmith_seconds"], r["median_seconds"], r["median_loop_seconds"]
            rows.append(
                [
                    r["precision"],
                    f"{med['rewardsmith']:.1f} ({loop['rewardsmith']:.1f} training)",
                    f"{med['trl']:.1f} ({loop['trl']:.1f} training)",
                    with_range(ratio),
                    "met" if ratio["median"] >= 2.0 else "not met",
                ]
            )
        parts.append(
            f"**A first training run, whole process** ({t['pairs']} hh-rlhf/harmless-base pairs both tools take whole "
            f"at {t['max_length']} tokens, in one JSONL file both read; `rewardsmith train` with everything it "
            "writes (run folder, report, plots) against a script that trains TRL's RewardTrainer; seconds from "
            f"outside, median of {t['rounds']} rounds, tools alternating; bar: 2x):\n\n"
            + _table(["precision", "rewardsmith s", "TRL s", "TRL / rewardsmith, median (range)", "2x bar"], rows)
            + f"\n\n{_machine_text(t)}Command: `.venv/bin/{t['command']}`; results: "
            "`benchmarks/results/train_process.json`."
        )
    contention = BENCH / "contention.json"
    if contention.exists():
        c = json.loads(contention.read_text(encoding="utf-8"))
        rows = []
        for variant, v in c.get("demo", {}).items():
            steps = v.get("step_seconds") or []
            per_step = ", ".join(
                f"{k} {statistics.median(s[k] for s in steps):.0f}" for k in (steps[0] if steps else {})
            )
            bar = 240 if variant == "idle" else 480
            rows.append(
                [
                    f"`make demo`, {variant}",
                    f"{v['median_s']:.0f}",
                    ", ".join(f"{x:.0f}" for x in v["runs_s"]),
                    per_step or "-",
                    f"{'met' if v['median_s'] < bar else 'not met'} (< {bar} s)",
                ]
            )
        threads = c.get("threads") or {}
        for condition, result in threads.items():
            for k in ("PASSIVE", "ACTIVE", "unset"):
                chose = ", ".join(sorted(set(map(str, result["unset_chose"])))) if k == "unset" else ""
                rows.append(
                    [
                        f"train, 30 steps, {condition}, OMP_WAIT_POLICY="
                        + (f"unset (the command chose {chose})" if k == "unset" else k),
                        f"{result[k]['median_s']:.0f}",
                        ", ".join(f"{x:.0f}" for x in result[k]["runs_s"]),
                        "-",
                        "-",
                    ]
                )
        ratios = "; ".join(
            f"{condition}: {with_range(result['active_over_passive'])}" for condition, result in threads.items()
        )
        parts.append(
            f"**Whole commands idle and on a loaded machine** ({c['rounds']} fresh runs each, variants alternating; "
            "the load is one Python process spinning on one of the 2 cores):\n\n"
            + _table(["command", "median s", "runs s", "median s per step", "bar"], rows)
            + (
                f"\n\nSpinning over passive OpenMP threads, the seconds of the same run: {ratios}. Where "
                "OMP_WAIT_POLICY is unset, the `rewardsmith` command spins on an idle machine and sleeps beside other "
                "work or in `serve` (rewardsmith/launch.py)."
                if ratios
                else ""
            )
            + f" {_machine_text(c)}Command: `.venv/bin/{c['command']}`; results: `benchmarks/results/contention.json`."
            + "".join(
                f" The {section} rows are kept from an earlier run, `.venv/bin/{k['command']}`"
                + (f", on {k['machine']['cpu']}." if (k.get("machine") or {}).get("cpu") else " (CPU not recorded).")
                for section, k in c.get("kept", {}).items()
            )
        )
    load = BENCH / "policy_load.json"
    if load.exists():
        b = json.loads(load.read_text(encoding="utf-8"))
        labels = {
            "gguf": "read from its GGUF (de-quantised on every load)",
            "cache": "read from the de-quantised cache folder",
            "build": "the cache folder's build (the first load, once)",
        }
        timed = {**b["median"], "build": b["build"]}
        rows = [[labels[k], f"{timed[k]['load_seconds']:.1f}", f"{timed[k]['process_seconds']:.1f}"] for k in labels]
        parts.append(
            "**Loading the embedded SmolLM2** (the policy of `bon`, `rl`, `sample` and `label`; "
            f"{b['rounds']} fresh processes each, variants alternating):\n\n"
            + _table(["load", "load s (median)", "process s (median)"], rows)
            + f"\n\nGGUF over cache, whole process: {with_range(b['gguf_over_cache_process'])}. {_machine_text(b)}"
            f"Command: `.venv/bin/{b['command']}`; results: `benchmarks/results/policy_load.json`."
        )
    sampling = BENCH / "sampling.json"
    if sampling.exists():
        m = json.loads(sampling.read_text(encoding="utf-8"))
        rows = [
            [k, f"{m['median']['sampler 1'][k]:.1f}", f"{m['median']['sampler 2'][k]:.1f}", with_range(ratio)]
            for k, ratio in m["sampler_1_over_sampler_2"].items()
        ]
        parts.append(
            f"**Sampling the policy** (`sample`, `bon --policy`, the RL gold tracker; {m['prompts']} HH-RLHF prompts, "
            f"{m['n']} completions of {m['max_new_tokens']} tokens each, {m['rounds']} fresh processes each, "
            "alternating): sampler 2 reads the prompt once for all rows and draws without sorting the vocabulary; "
            "sampler 1 read the prompt in every row and sorted the vocabulary at every step.\n\n"
            + _table(["setting", "sampler 1 s (median)", "sampler 2 s (median)", "sampler 1 / 2"], rows)
            + f"\n\n{_machine_text(m)}Command: `.venv/bin/{m['command']}`; results: `benchmarks/results/sampling.json`."
        )
    return (
        "\n\n".join(parts) if parts else "Not run yet: no `benchmarks/results/train_process.json` or `contention.json`."
    )


BLOCKS: dict[str, Callable[[], str]] = {"speed": block_speed, "batching": block_batching, "first-run": block_first_run}
