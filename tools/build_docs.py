"""Rebuilds the result tables of README.md and docs/*.md from the committed metrics files in docs/results/ and
benchmarks/results/, so every figure there can be traced to a file and the command that wrote it.

A generated block sits between `<!-- results:NAME -->` and `<!-- /results:NAME -->`; everything between the
markers is replaced. Typing into a block is pointless: `tests/unit/test_docs.py` fails when a block differs
from what this script generates.

    .venv/bin/python tools/build_docs.py                          # rewrite the blocks
    .venv/bin/python tools/build_docs.py --check                  # exit 1 when a block is stale
    .venv/bin/python tools/build_docs.py save NAME RUN_DIR --command "CMD"   # add a run's metrics as NAME
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from blocks_calibration import BLOCKS as CALIBRATION_BLOCKS
from blocks_scale import BLOCKS as SCALE_BLOCKS
from blocks_common import BENCH, RESULTS, ROOT, load
from blocks_common import ci_text as _ci
from blocks_common import source as _source
from blocks_common import table as _table
from blocks_common import verdict as _verdict_word

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)
# Bulky parts of a run's metrics.json that no document shows.
_DROP = {"reliability", "curve", "tables", "environment"}


# ----------------------------------------------------------------------------------------------------
# Blocks


def block_demo() -> str:
    demo = load("demo")
    train, shift, steer, cal = (demo[k] for k in ("train", "shift", "steer", "calibrate"))
    held = train["eval"]["hh-rlhf/harmless-base (held-out)"]
    target = shift["targets"][0]
    methods = shift["methods"]
    rows = [["1. train", f"MiniLM on {train['train']['pairs']} HH-RLHF harmless pairs, {held['n']} held out",
             f"accuracy {_ci(held['accuracy'], held['accuracy_ci'])}; length rule "
             f"{held['length_rule_accuracy']:.1f}; length-controlled "
             f"{_ci(held['length_controlled_accuracy'], held['length_controlled_accuracy_ci'])}"],
            ["2. stress-test", f"teacher, naive, anchor, ceiling; ID and {target}",
             "; ".join(f"{m} {methods[m]['id_acc']:.1f} / {methods[m][f'ood_acc.{target}']:.1f}"
                       for m in ("teacher", "naive", "anchor", "ceiling") if m in methods)],
            ["3. steer", f"ICRM on step 1's encoder, {steer['check']['n_demos']} demonstrations, "
                         f"{steer['check']['pairs']} held-out pairs",
             "; ".join(f"{k} {_ci(c['accuracy'], c['accuracy_ci'])}" for k, c in steer["check"]["conditions"].items())
             + f"; BT {_ci(steer['bt']['accuracy'], steer['bt']['accuracy_ci'])}"],
            ["4. calibrate", f"PEBS on PluriHarms ({cal['data']['raters']} raters)",
             f"RMSE gain vs pooled {_ci(cal['gain_vs_pooled_pct.pebs'], cal['gain_vs_pooled_ci.pebs'], 2)}%"]]
    return (f"Measured on a fresh clone on the 2-core machine (`make demo`, {demo['seconds'] / 60:.1f} min including "
            "model loading; accuracies in %, 95% bootstrap CIs):\n\n"
            + _table(["step", "what runs", "result"], rows) + "\n\n" + _source("demo"))


def block_train() -> str:
    rows = []
    names = [n for n in ("train-harmless", "train-helpful", "train-harmless-debiased", "train-helpful-debiased")
             if (RESULTS / f"{n}.json").exists()]
    if not names:
        return "Not run yet: no `docs/results/train-harmless.json`."
    for name in names:
        m = load(name)
        kind = m["config"]["train"].get("debias", {}).get("kind", "none")
        for dataset, b in m["eval"].items():
            if not b.get("n") or dataset.endswith("(validation)"):
                continue
            rows.append([m["train"]["dataset"], kind, dataset, f"{b['n']:,}", _ci(b["accuracy"], b["accuracy_ci"]),
                         f"{b['length_rule_accuracy']:.1f}",
                         _ci(b["length_controlled_accuracy"], b["length_controlled_accuracy_ci"]),
                         _ci(b.get("length_correlation"), b.get("length_correlation_ci"), 2)])
    return ("One seed (seed 0) per row; accuracies in %, 95% bootstrap CIs over pairs; corr is the Spearman "
            "correlation between reward and response length over every response of the set. Seed-to-seed "
            "comparisons of the debiasing objectives are in `docs/debias.md`.\n\n"
            + _table(["trained on", "debias", "evaluated on", "n", "accuracy", "length rule", "length-controlled",
                      "corr(reward, length)"], rows) + "\n\n" + _source(*names))


def _debias_summary(d: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    v = d["verdict"]
    kept = d["choice"]["kept"]
    rows = []
    for source in d["sources"]:
        if source not in v:
            continue
        r = v[source]
        rows.append([source, kept, _ci(r["cross_domain_lc_gain"], r["cross_domain_lc_gain_ci"]),
                     _ci(r["abs_corr_ratio"], r["abs_corr_ratio_ci"], 2),
                     _ci(r["held_out_accuracy_change"], r["held_out_accuracy_change_ci"])])
    return (["source", "kept objective", "cross-domain length-controlled gain (points)",
             "mean abs. corr(reward, length) / plain BT's",
             "held-out accuracy change (points)"], rows)


def _debias_per_set(sources: dict[str, Any], kinds: list[str]) -> str:
    per_set = []
    for source, src in sources.items():
        for k in kinds:
            if k == "none":
                continue
            c, raw = src["controlled_vs_none"][k], src["raw_vs_none"][k]
            per_set.append([source, k, "mean of cross-domain sets",
                            _ci(c["d.cross-domain"], c["d.cross-domain_ci"]),
                            _ci(raw["d.cross-domain"], raw["d.cross-domain_ci"]),
                            f"{src['correlation'][k]['mean_abs_corr']:.2f} vs "
                            f"{src['correlation']['none']['mean_abs_corr']:.2f}"])
            for split in [src["sets"]["validation"], src["sets"]["held_out"], *src["sets"]["cross_domain"]]:
                lv, base = src["levels"][k][split], src["levels"]["none"][split]
                per_set.append([source, k, split, _ci(c[f"d.{split}"], c[f"d.{split}_ci"]),
                                _ci(raw[f"d.{split}"], raw[f"d.{split}_ci"]),
                                f"{lv['length_correlation']:.2f} vs {base['length_correlation']:.2f}"])
    return _table(["source", "objective", "set", "length-controlled", "accuracy", "corr(reward, length)"], per_set)


def block_debias() -> str:
    d = load("debias")
    seeds = ", ".join(map(str, d["seeds"]))
    choice = d["choice"]
    cand = [[k, f"{c['validation_lc_gain']:+.1f}", f"{c['validation_accuracy_change']:+.1f}",
             "kept" if k == choice["kept"] else ""] for k, c in choice["candidates"].items()]
    choice_seeds = ", ".join(map(str, d.get("choice_seeds", d["seeds"])))
    parts = [f"Seeds {seeds}; every CI is a 95% hierarchical bootstrap over seeds, then pairs within seed.",
             f"**Choice, on the validation split only** (seeds {choice_seeds}; {choice['rule']}):",
             _table(["objective", "validation length-controlled gain", "validation accuracy change", ""], cand)]
    v = d["verdict"]
    if choice["kept"] != "none":
        header, rows = _debias_summary(d)
        parts += ["**The kept objective against plain Bradley-Terry on the reported sets:**", _table(header, rows)]
        cond = v["conditions"]
        parts.append("Shipping bar: length-controlled gain >= 3 points with CI above 0 on each source: "
                     f"{'met' if cond['lc_gain_at_least_3_with_ci_above_0'] else 'not met'}; mean |corr| halved: "
                     f"{'met' if cond['abs_corr_halved'] else 'not met'}; at most 1 point of held-out accuracy "
                     f"lost: {'met' if cond['held_out_cost_at_most_1'] else 'not met'}. Verdict: "
                     f"**{'held' if v['held'] else 'not held'}**.")
    else:
        parts.append(f"No objective gained on validation: **none kept** ({v.get('reason', '')}).")
    parts += [f"**Every objective on every set** (seeds {seeds}; difference to plain BT, points; corr: mean over "
              "seeds, this objective vs plain BT):", _debias_per_set(d["sources"], d["kinds"])]
    if "screening" in d:
        screen_seeds = ", ".join(map(str, d["choice_seeds"]))
        parts += [f"**Screening of every objective** (seeds {screen_seeds}, the runs the choice was made on; CIs over "
                  "pairs only when one seed):", _debias_per_set(d["screening"]["sources"], d["screening"]["kinds"])]
    return "\n\n".join(parts) + "\n\n" + _source("debias")


def block_calibration() -> str:
    m = load("calibrate-pluriharms")
    names = [k.split(".", 1)[1] for k in m if k.startswith("rmse.")]
    rows = []
    for method in names:
        row = [method, f"{m[f'rmse.{method}']:.2f}",
               "0 (reference)" if method == "pooled" else
               _ci(m.get(f"gain_vs_pooled_pct.{method}"), m.get(f"gain_vs_pooled_ci.{method}"), 2)]
        for size in (25, 18):
            value = m.get(f"fit_size.{size}.gain_vs_pooled_pct.{method}")
            row.append("n/a" if value is None else f"{value:.2f}")
        rows.append(row)
    return (_table(["method", "held-out RMSE (0-100)", "gain vs pooled % [95% CI]", "gain @25 %", "gain @18 %"],
                   rows) + "\n\n" + _source("calibrate-pluriharms"))


def block_serve() -> str:
    """The table benchmarks/bench_serve.py printed and stored with its results."""
    result = json.loads((BENCH / "serve.json").read_text(encoding="utf-8"))
    return (result["table"] + f"\n\nSource: `benchmarks/results/serve.json`; command: `{result['command']}`.")


def block_shift(name: str) -> str:
    """Every table of a shift run's report, from its committed metrics (the same code writes report.md)."""
    sys.path.insert(0, str(ROOT / "src"))
    from rewardsmith.config import from_dict
    from rewardsmith.report.w2s import shift_sections
    from rewardsmith.w2s.config import ShiftConfig

    m = load(name)
    report = shift_sections(from_dict(ShiftConfig, m["config"]), m)
    parts = [report.intro] + [f"#### {sec.heading}\n\n{sec.body}" for sec in report.sections]
    return "\n\n".join(parts) + f"\n\nWall time {m['seconds'] / 60:.0f} min. " + _source(name)


MIN_TEACHER_GAP = 8.0  # points of ID accuracy between the ceiling and the teacher that a W2S run should leave


def block_w2s_claims() -> str:
    """Each paper claim, per source, as held / not held / inconclusive by its hierarchical CI."""
    rows = []
    names = [n for n in ("shift-harmless", "shift-helpful") if (RESULTS / f"{n}.json").exists()]
    if not names:
        return "Not run yet: no `docs/results/shift-harmless.json`."
    notes = []
    for name in names:
        m = load(name)
        source = m["name"]
        seeds = m["config"]["seeds"]
        notes.append(f"{source}: seeds {', '.join(map(str, seeds))}")

        def _verdict(ci: Any, bar: float = 0.0, n_seeds: int = len(seeds)) -> str:
            word = _verdict_word(ci, bar)
            if n_seeds >= 3 or word == "n/a":
                return word
            return f"{word} (on {n_seeds} seed{'s' if n_seeds > 1 else ''}: seed variance not in the CI)"

        naive = m["methods"].get("naive", {})
        rows.append([source, "weak-to-strong generalisation: the naive student beats its teacher in domain (WRG > 0)",
                     _ci(naive.get("wrg"), naive.get("wrg_ci")), _verdict(naive.get("wrg_ci"))])
        for method, claim in (("confidence", "the confidence loss beats naive in domain"),
                              ("seam", "SEAM's refined labels beat naive in domain")):
            d = m["vs_naive"].get(method)
            if d:
                rows.append([source, claim, _ci(d["d.id"], d["d.id_ci"]), _verdict(d["d.id_ci"])])
        for method in [k for k in m["vs_naive"] if k.startswith("anchor")]:
            d = m["vs_naive"][method]
            rows.append([source, f"ANCHOR ({method}) beats naive out of distribution (mean over targets)",
                         _ci(d.get("d.targets"), d.get("d.targets_ci")), _verdict(d.get("d.targets_ci"))])
            lc = m["vs_naive_length_controlled"][method]
            rows.append([source, "... the same on length-controlled accuracy",
                         _ci(lc.get("d.targets"), lc.get("d.targets_ci")), _verdict(lc.get("d.targets_ci"))])
        for method in [k for k in m["vs_naive"] if k.startswith("naive-")]:  # debiased naive students
            lc = m["vs_naive_length_controlled"][method]
            rows.append([source, f"the length-debiased student ({method}) beats naive out of distribution, "
                                 "length-controlled (mean over targets)",
                         _ci(lc.get("d.targets"), lc.get("d.targets_ci")), _verdict(lc.get("d.targets_ci"))])
        gap = m["gap_ceiling_minus_teacher"].get("id", {})
        rows.append([source, f"a gap to recover: ceiling minus teacher in domain is at least {MIN_TEACHER_GAP:g} "
                             "points",
                     _ci(gap.get("value"), gap.get("ci")), _verdict(gap.get("ci"), MIN_TEACHER_GAP)])
    return ("Differences in points with 95% hierarchical bootstrap CIs (seeds, then pairs); held: the CI is above "
            "0 (or the stated bar); not held: below it; inconclusive: it covers it. A verdict on fewer than 3 seeds "
            f"says so: its CI covers the pairs but not the spread between seeds ({'; '.join(notes)}).\n\n"
            + _table(["source", "claim", "estimate", "verdict"], rows) + "\n\n" + _source(*names))


def block_teachers() -> str:
    t = load("teachers")
    rows = []
    for config, res in t["configs"].items():
        for name, c in res["candidates"].items():
            lab = c["labels"]
            rows.append([Path(config).stem, name, _ci(c["id_acc"], c["id_acc_ci"]),
                         _ci(c.get("gap_id"), c.get("gap_id_ci")), f"{lab['mean_confidence']:.3f}",
                         f"{lab['ece']:.3f}" if lab.get("ece") is not None else "n/a"])
    ceilings = "; ".join(f"{Path(c).stem} {_ci(r.get('ceiling_seed0_id_acc'), r.get('ceiling_seed0_id_acc_ci'))}"
                         for c, r in t["configs"].items() if r.get("ceiling_seed0_id_acc") is not None)
    return ("ID accuracy (%) of each candidate teacher fitted on the gold pool, its gap to the seed-0 ceiling "
            f"(ceiling ID accuracy: {ceilings}) and its calibrated labels on the W2S pool (mean confidence, ECE "
            "against gold).\n\n"
            + _table(["config", "teacher", "ID accuracy", "ceiling - teacher", "label confidence", "label ECE"], rows)
            + "\n\n" + _source("teachers"))




def block_debias_summary() -> str:
    d = load("debias")
    kept = d["choice"]["kept"]
    if kept == "none":
        return ("No debiasing objective gained on the validation split, so the shipped configs keep plain "
                "Bradley-Terry. " + _source("debias"))
    header, rows = _debias_summary(d)
    v = d["verdict"]
    return (f"Kept on the validation split: `{kept}`; against plain Bradley-Terry over seeds "
            f"{', '.join(map(str, d['seeds']))} (95% hierarchical bootstrap CIs over seeds and pairs), the shipping "
            f"bar (length-controlled gain >= 3 points with CI above 0, |corr| halved, <= 1 point of held-out "
            f"accuracy lost) is **{'met' if v['held'] else 'not met'}**:\n\n" + _table(header, rows)
            + "\n\n" + _source("debias"))


def block_speed() -> str:
    parts = []
    train_path, score_path, kernels_path = (BENCH / f"{n}.json" for n in ("train_throughput", "score", "kernels"))
    if train_path.exists():
        t = json.loads(train_path.read_text(encoding="utf-8"))
        rows = []
        for r in t["results"]:
            med = r["median"]
            vs, bare, again = (r[k] for k in ("ratio_vs_trl_pairs_per_s", "fraction_of_bare_tokens_per_s",
                                              "second_over_first_training"))
            rows.append([r["precision"], f"{med['rewardsmith']['pairs_per_s']:.2f}", f"{med['trl']['pairs_per_s']:.2f}",
                         f"{vs['median']:.2f}x ({vs['min']:.2f}-{vs['max']:.2f})",
                         f"{med['rewardsmith']['tokens_per_s']:.0f} / {med['bare']['tokens_per_s']:.0f}",
                         f"{100 * bare['median']:.0f}% ({100 * bare['min']:.0f}-{100 * bare['max']:.0f}%)",
                         f"{100 * med['rewardsmith']['padding_fraction']:.0f}% / "
                         f"{100 * med['trl']['padding_fraction']:.0f}%",
                         f"{again['median']:.2f}",
                         f"{r['pairs_kept']['rewardsmith']} / {r['pairs_kept']['trl']} of {r['pairs_kept']['of']}"])
        parts.append(f"**Training** ({t['pairs']} hh-rlhf/harmless-base pairs, {t['max_length']} tokens, "
                     f"{t['batch_size']} pairs a step, one epoch, MiniLM; {t['rounds']} rounds):\n\n"
                     + _table(["precision", "rewardsmith pairs/s", "TRL pairs/s", "ratio", "tokens/s (ours / bare)",
                               "of the bare limit", "padding (ours / TRL)", "2nd / 1st training", "pairs kept"], rows)
                     + f"\n\nCommand: `{t['command']}`; results: `benchmarks/results/train_throughput.json`.")
    if score_path.exists():
        sc = json.loads(score_path.read_text(encoding="utf-8"))
        rows = []
        for r in sc["results"]:
            f = r["fraction_of_bare"]
            rows.append([str(r["max_length"]), r["precision"], f"{r['median_pairs_per_s']['score']:.1f}",
                         f"{r['median_pairs_per_s']['bare']:.1f}",
                         f"{100 * f['median']:.0f}% ({100 * f['min']:.0f}-{100 * f['max']:.0f}%)",
                         f"{r['median_load_seconds']:.1f}"])
        parts.append(f"**Scoring** (`rewardsmith score` on {sc['pairs']} pairs, model load timed apart; bf16 "
                     "rewards stay within 5% of the fp32 rewards' standard deviation, "
                     "`tests/integration/test_scoring_bf16.py`):\n\n"
                     + _table(["tokens", "precision", "score pairs/s", "bare forward pairs/s", "of the bare limit",
                               "model load s"], rows)
                     + f"\n\nCommand: `{sc['command']}`; results: `benchmarks/results/score.json`.")
    if kernels_path.exists():
        parts.append(_kernels_part(json.loads(kernels_path.read_text(encoding="utf-8"))))
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
    return ("**CPU kernels** (attention under bf16 autocast: time with the bf16 core / time with the core upcast "
            f"to fp32, median of {k['rounds']} fresh-process rounds; rewardsmith upcasts heads of at most 32 dims, "
            "`src/rewardsmith/models/attention.py`):\n\n"
            + _table(["heads", "pass"] + [f"{n} tokens" for n in lengths], rows)
            + f"\n\nAdamW step over MiniLM's parameters: {w['foreach_ms']:.1f} ms multi-tensor, {w['fused_ms']:.1f} "
            f"ms fused ({s['median']:.1f}x, {s['min']:.1f}-{s['max']:.1f}); rewardsmith's Trainer uses the fused "
            f"kernel. Command: `{k['command']}`; results: `benchmarks/results/kernels.json`.")


BLOCKS: dict[str, Callable[[], str]] = {"demo": block_demo, "train": block_train, "calibration": block_calibration,
                                         "debias": block_debias, "w2s-claims": block_w2s_claims,
                                         "teachers": block_teachers, "serve": block_serve,
                                         "debias-summary": block_debias_summary, "speed": block_speed}


def block_anchor_speed() -> str:
    a = json.loads((BENCH / "anchor.json").read_text(encoding="utf-8"))
    rows = [[m, f"{a['median_step_s'][m]:.2f}", f"{a['ratio_to_naive'][m]:.2f}"] for m in a["median_step_s"]]
    return (f"{a['backbone']}, {a['batch_pairs']} pairs a step, {a['max_length']} tokens, {a['dtype']}, "
            f"{a['threads']} thread, median of {a['steps']} steps:\n\n"
            + _table(["method", "median step (s)", "x naive"], rows)
            + f"\n\nCache: {a['cache_mb']:.2f} MB for {a['cache_pairs']} pairs (last layer, fp16), built in "
              f"{a['cache_build_s']:.1f} s. Source: `benchmarks/results/anchor.json`; command: "
              "`OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_anchor.py`.")


BLOCKS["anchor-speed"] = block_anchor_speed


def _mci(rec: Any, decimals: int = 1) -> str:
    """A {"mean", "ci"} (or {"mean", "min", "max"}) record as text."""
    if not rec:
        return "n/a"
    if "ci" in rec:
        return _ci(rec["mean"], rec["ci"], decimals)
    return _ci(rec["mean"], [rec.get("min"), rec.get("max")], decimals) + " (min-max over seeds)"


def block_icrm_claims() -> str:
    d = load("icrm")
    rows = []
    for c in d["claims"]:
        if "mean" in c:
            estimate = _mci(c, 3 if abs(c["mean"]) < 1 else 1)
        elif "proxy" in c:
            estimate = f"not measured; proxy ({c['proxy']['measure']}): {_mci(c['proxy'])}"
        else:
            estimate = c.get("evidence") or c.get("reason", "")
        rows.append([c["claim"], c.get("measure", ""), estimate, f"**{c['verdict']}**"])
    seeds = ", ".join(map(str, d["seeds"]))
    return (f"Seeds {seeds}; trained on {', '.join(d['training_sources'])} only. Intervals: 95% hierarchical "
            "bootstrap over seeds, then pairs within seed (paired for differences), unless marked min-max; held: "
            "above 0; not held: below 0; inconclusive: covers 0.\n\n"
            + _table(["claim", "measure", "estimate", "verdict"], rows) + "\n\n" + _source("icrm"))


def block_icrm_results() -> str:
    d = load("icrm")
    p = d["protocols"]
    parts = []
    if "steerability" in p:
        st = p["steerability"]
        ns = sorted({n for v in st["accuracy"].values() for n in v["icrm"]}, key=int)
        rows = [[std, *[_mci(v["icrm"].get(n)) for n in ns], _mci(v.get("bt")), _mci(v.get(f"icrm_n{ns[-1]}_minus_bt"))]
                for std, v in st["accuracy"].items()]
        parts.append(f"**Steerability** (pku-saferlhf held-out test part, {st['test_pairs']} pairs; accuracy % "
                     "against each standard):\n\n"
                     + _table(["standard", *[f"N={n}" for n in ns], "BT", f"ICRM N={ns[-1]} - BT"], rows))
    if "calibration" in p:
        ca = p["calibration"]
        rows = [[n, _mci(v["ece"], 3), _mci(v["mean_abs_error"], 3)] for n, v in sorted(ca["by_n"].items(),
                                                                                          key=lambda x: int(x[0]))]
        rows.append(["BT", _mci(ca["bt"]["ece"], 3), _mci(ca["bt"]["mean_abs_error"], 3)])
        parts.append(f"**Calibration to demonstrated mixtures** (moralchoice/low, unseen, {ca['test_pairs']} pairs; "
                     "ECE of mu and its mean absolute error against 1 - p):\n\n"
                     + _table(["N", "ECE", "MAE"], rows))
    if "rmbench" in p:
        rb = p["rmbench"]
        rows = []
        for subset, v in rb["accuracy"].items():
            for n, r in sorted(v["icrm"].items(), key=lambda x: int(x[0])):
                rows.append([subset, f"ICRM N={n}", *[_mci(r[k]) for k in ("easy", "normal", "hard", "avg")]])
            bt = v.get("bt")
            if bt:
                rows.append([subset, "BT", *[_mci(bt[k]) for k in ("easy", "normal", "hard", "avg")]])
        parts.append("**RM-Bench** (unseen; prompts per subset: " + ", ".join(f"{k} {v}" for k, v in
                                                                          rb["prompts"].items()) + "):\n\n"
                     + _table(["subset", "model", "easy", "normal", "hard", "average"], rows))
    if "pareto" in p:
        pa = p["pareto"]
        rows = [[n, _mci(v, 3)] for n, v in sorted(pa["hypervolume"].items(), key=lambda x: int(x[0]))]
        rows.append(["BT", _mci(pa["bt_hypervolume"], 3)])
        parts.append("**Pareto frontier** (rm-bench safety-response / safety-refuse, unseen; hypervolume):\n\n"
                     + _table(["N", "hypervolume"], rows))
    if "math500" in p:
        ma = p["math500"]
        rows = [[n, _mci(v)] for n, v in sorted(ma["accuracy"].items(), key=lambda x: int(x[0]))]
        rows.append(["BT", _mci(ma["bt"])])
        parts.append(f"**MATH-500 verifier proxy** ({ma['test_pairs']} pairs; accuracy %):\n\n"
                     + _table(["N", "accuracy"], rows))
    removed = {proto: {k: v for k, v in t.get("overlap_removed", {}).items() if v} for proto, t in d["targets"].items()}
    note = "; ".join(f"{proto}: " + ", ".join(f"{k} {v}" for k, v in r.items()) for proto, r in removed.items() if r)
    parts.append("Target pairs dropped for sharing a conversation with a training pair: " + (note or "none") + ".")
    return "\n\n".join(parts) + "\n\n" + _source("icrm")


def block_icrm_speed() -> str:
    b = json.loads((BENCH / "icrm.json").read_text(encoding="utf-8"))
    rows = [[label, f"{b['best_cpu_seconds'][k]:.1f}", f"{b['best_wall_seconds'][k]:.1f}",
             f"{b['pairs_per_cpu_s'][k]:.1f}"]
            for k, label in (("none", "no demonstrations"),
                             ("demos", f"N = {b['demos']} demonstrations (cached per standard)"))]
    passes = b["backbone_passes"]
    return (f"Scoring {b['pairs']:,} held-out {b['source']} pairs under one standard (set mode, MiniLM, "
            f"{b['max_length']} tokens, {b['precision']}, batch {b['batch_size']}, {b['torch_threads']} thread, best "
            f"of {b['repeats']}):\n\n"
            + _table(["condition", "CPU s", "wall s", "pairs per CPU s"], rows)
            + f"\n\nRatio {b['ratio']:.3f} on CPU time (expected from the backbone passes: "
              f"{passes['demos_cached']:,} / {passes['none']:,} = {passes['demos_cached'] / passes['none']:.3f}); "
              f"without the cache every pair would re-encode its demonstrations ({passes['demos_uncached']:,} "
              "passes). Source: `benchmarks/results/icrm.json`; command: `OMP_NUM_THREADS=1 .venv/bin/python "
              "benchmarks/bench_icrm.py --pairs 1000 --demos 64 --repeats 2`.")


BLOCKS["icrm-speed"] = block_icrm_speed
BLOCKS["icrm-claims"] = block_icrm_claims
BLOCKS["icrm-results"] = block_icrm_results

BLOCKS.update(CALIBRATION_BLOCKS)
BLOCKS.update(SCALE_BLOCKS)


def render_block(name: str) -> str:
    if name in BLOCKS:
        try:
            return BLOCKS[name]()
        except FileNotFoundError as missing:
            return f"Not run yet: no `{Path(missing.filename).relative_to(ROOT)}`."
    if name.startswith("shift-"):
        if not (RESULTS / f"{name}.json").exists():
            return f"Not run yet: no `docs/results/{name}.json`."
        return block_shift(name)
    raise SystemExit(f"unknown results block {name!r}")


# ----------------------------------------------------------------------------------------------------


def slim(metrics: Any) -> Any:
    if isinstance(metrics, dict):
        return {k: slim(v) for k, v in metrics.items() if k not in _DROP}
    if isinstance(metrics, list):
        return [slim(v) for v in metrics]
    return metrics


def save(name: str, run_dir: Path, command: str) -> Path:
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps({"command": command, **slim(metrics)}, indent=1) + "\n", encoding="utf-8")
    return out


def rebuild(check: bool) -> list[str]:
    """Rewrites every block (or, with check, lists the files whose blocks are stale)."""
    stale = []
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text(encoding="utf-8")

        def fill(match: re.Match[str], doc: Path = doc) -> str:
            return f"{match.group(1)}{render_block(match.group('name'))}\n{match.group(4)}"

        new = BLOCK.sub(fill, text)
        if new != text:
            stale.append(str(doc.relative_to(ROOT)))
            if not check:
                doc.write_text(new, encoding="utf-8")
    return stale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action")
    saver = sub.add_parser("save", help="copy a run's metrics.json (slimmed) to docs/results/NAME.json")
    saver.add_argument("name")
    saver.add_argument("run_dir", type=Path)
    saver.add_argument("--command", required=True, help="the command that produced the run")
    parser.add_argument("--check", action="store_true", help="exit 1 when a block is stale")
    args = parser.parse_args()
    if args.action == "save":
        print(save(args.name, args.run_dir, args.command))
        return
    stale = rebuild(args.check)
    if args.check and stale:
        print("stale results blocks in: " + ", ".join(stale), file=sys.stderr)
        raise SystemExit(1)
    print("rebuilt: " + (", ".join(stale) or "nothing changed"))


if __name__ == "__main__":
    main()
