"""Result blocks of docs/icrm.md (and the README's icrm-claims), rendered from committed metrics files only:

- docs/results/icrm.json: experiments/icrm.py summarise (every protocol over seeds, with hierarchical CIs);
- benchmarks/results/icrm.json: benchmarks/bench_icrm.py.

The claims and their verdicts are built by rewardsmith.icrm.claim_results against the bars declared in
rewardsmith.icrm.claims; these functions only lay them out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from blocks_common import BENCH, ci_text, load, table
from blocks_common import source as _source

from rewardsmith.claims import CLAIM_HEADER, claim_row
from rewardsmith.icrm.claim_results import icrm_claim_results, icrm_own_results
from rewardsmith.icrm.claims import RERUN


def _mci(rec: Any, decimals: int = 1) -> str:
    """A {"mean", "ci"} record as text."""
    if not rec:
        return "n/a"
    return ci_text(rec["mean"], rec.get("ci"), decimals)


def _decimals(rec: Any) -> int:
    return 3 if rec.get("mean") is not None and abs(rec["mean"]) < 1 else 1


def _intro(d: dict[str, Any]) -> str:
    seeds = ", ".join(map(str, d["seeds"]))
    ceilings = any("ceiling" in v for v in d["protocols"].get("steerability", {}).get("accuracy", {}).values())
    runs = "the ICRM, its BT baseline and the flipped-standard ceilings" if ceilings else "the ICRM and its BT baseline"
    return (
        f"Seeds {seeds} ({len(d['seeds'])} training runs of {runs}); trained on "
        f"{', '.join(d['training_sources'])} only. Intervals: 95% hierarchical bootstrap "
        "over seeds, then pairs within seed (paired for differences). held: the CI lies on the claimed side of "
        "the bar declared (src/rewardsmith/icrm/claims.py); not held: on the other side; inconclusive: it "
        "covers the bar; not run: these runs do not measure it."
    )


def block_claim_table() -> str:
    d = load("icrm")
    paper = [claim_row(r, _decimals({"mean": r.estimate})) for r in icrm_claim_results(d)]
    own = [claim_row(r, _decimals({"mean": r.estimate})) for r in icrm_own_results(d)]
    return (
        _intro(d)
        + "\n\n**The paper's claims**\n\n"
        + table(CLAIM_HEADER, paper)
        + "\n\n**The project's own questions**\n\n"
        + table(CLAIM_HEADER, own)
        + "\n\n"
        + _source("icrm")
    )


def block_claims_summary() -> str:
    """The README's compact form: one row per paper claim and scope."""
    d = load("icrm")
    rows = []
    for r in icrm_claim_results(d):
        # claim_row's "ours" cell marks a point shown without its interval
        ours = claim_row(r, _decimals({"mean": r.estimate}))[4]
        rows.append([r.claim.statement, r.scope or "-", r.claim.paper_figure or "none given", ours, r.verdict])
    return (
        f"Seeds {', '.join(map(str, d['seeds']))}; the measures, bars and the project's own questions are in "
        "docs/icrm.md.\n\n"
        + table(["claim", "scope", "paper", "ours [95% CI]", "verdict"], rows)
        + "\n\n"
        + _source("icrm")
    )


def _steerability(st: dict[str, Any]) -> str:
    ns = sorted({n for v in st["accuracy"].values() for n in v["icrm"]}, key=int)
    rows = [
        [
            std,
            *[_mci(v["icrm"].get(n)) for n in ns],
            _mci(v.get("bt")),
            _mci(v.get(f"icrm_n{ns[-1]}_minus_bt")),
            _mci(v.get("ceiling")),
            _mci(v.get("share_of_ceiling"), 2) if "share_of_ceiling" in v else "-",
        ]
        for std, v in st["accuracy"].items()
    ]
    return (
        f"**Steerability** (pku-saferlhf held-out test part, {st['test_pairs']} pairs; accuracy % against each "
        "standard; ceiling: the BT baseline's backbone trained directly on the flipped labels; share: (ICRM at "
        f"N={ns[-1]} - 50) / (ceiling - 50)):\n\n"
        + table(
            ["standard", *[f"N={n}" for n in ns], "BT", f"ICRM N={ns[-1]} - BT", "ceiling", "share of ceiling"], rows
        )
    )


def _calibration(ca: dict[str, Any]) -> str:
    ns = sorted(ca["by_n"], key=int)
    reliability = all("reliability_slope" in ca["by_n"][n] for n in ns)
    intro = f"**Calibration to demonstrated mixtures** (moralchoice/low, unseen, {ca['test_pairs']} pairs). "
    if not reliability:
        rows = [[n, _mci(ca["by_n"][n]["ece"], 3), _mci(ca["by_n"][n]["mean_abs_error"], 3)] for n in ns]
        if "bt" in ca:
            rows.append(["BT", _mci(ca["bt"]["ece"], 3), _mci(ca["bt"]["mean_abs_error"], 3)])
        return (
            intro + "The committed summary holds the paper's ECE (probability mode) and the per-pair MAE of mu "
            "against the demonstrated rate; a constant forecast passes ECE, so neither tests the claim. The "
            f"reliability across rates (its slope and MAE, beside a constant and BT) is not run: `{RERUN}`.\n\n"
            + table(["N", "ECE", "per-pair MAE"], rows)
        )
    rows = [
        [n, *(_mci(ca["by_n"][n][k], 3) for k in ("reliability_slope", "reliability_mae", "ece", "mean_abs_error"))]
        for n in ns
    ]
    if "bt" in ca:
        b = ca["bt"]
        rows.append(["BT", *(_mci(b[k], 3) for k in ("reliability_slope", "reliability_mae", "ece", "mean_abs_error"))])
    c = ca["constant"]
    rows.append(["constant 0.5", f"{c['reliability_slope']:.3f}", f"{c['reliability_mae']:.3f}", "0 (one bin)", "-"])
    curve = [
        [
            f"{r:.1f}",
            *[f"{ca['by_n'][n]['mean_mu'][i]:.3f}" for n in ns],
            f"{ca['bt']['mean_mu'][i]:.3f}" if "bt" in ca else "-",
        ]
        for i, r in enumerate(ca["rates"])
    ]
    return (
        intro + "The reliability of mu across the standards: slope of the mean mu on the demonstrated rate 1 - p "
        "(1 = mu tracks the rate, 0 = it ignores it) and the mean absolute error of the mean mu against the rate; "
        "ECE and the per-pair MAE are kept for comparison with the paper (a constant forecast passes ECE):\n\n"
        + table(["N", "reliability slope", "reliability MAE", "ECE", "per-pair MAE"], rows)
        + "\n\nReliability diagram (mean mu at each demonstrated rate):\n\n"
        + table(["demonstrated rate", *[f"N={n}" for n in ns], "BT"], curve)
    )


def _rmbench(rb: dict[str, Any]) -> str:
    rows = []
    for subset, v in rb["accuracy"].items():
        for n, r in sorted(v["icrm"].items(), key=lambda x: int(x[0])):
            rows.append([subset, f"ICRM N={n}", *[_mci(r[k]) for k in ("easy", "normal", "hard", "avg")]])
        if v.get("bt"):
            rows.append([subset, "BT", *[_mci(v["bt"][k]) for k in ("easy", "normal", "hard", "avg")]])
    weighting = rb.get("overall_weighting", "every prompt alike (subsets by their prompt counts)")
    text = (
        "**RM-Bench** (unseen; prompts per subset: "
        + ", ".join(f"{k} {v}" for k, v in rb["prompts"].items())
        + f"; overall weights {weighting}):\n\n"
        + table(["subset", "model", "easy", "normal", "hard", "average"], rows)
    )
    if "change" not in rb:
        return text + (
            f"\n\nThe paired change per subset is not in the committed summary (not run: `{RERUN}`); "
            "the claim table shows each subset's point change from the levels above."
        )
    change = [[g, _mci(rec)] for g, rec in rb["change"].items()]
    return (
        text + f"\n\nChange of the average accuracy from N={rb['n_low']} to N={rb['n_high']} (points; the mean "
        "of subsets weights each subset alike):\n\n" + table(["subset", "change"], change)
    )


def _pareto(pa: dict[str, Any]) -> str:
    def cell(v: dict[str, Any]) -> str:
        if v.get("ci"):
            return _mci(v, 3)
        return f"{v['mean']:.3f} (seeds {v['min']:.3f}-{v['max']:.3f})" if "min" in v else _mci(v, 3)

    rows = [
        [n, cell(v), ", ".join(f"{x:.3f}" for x in v.get("per_seed", []))]
        for n, v in sorted(pa["hypervolume"].items(), key=lambda x: int(x[0]))
    ]
    if "bt_hypervolume" in pa:
        rows.append(
            [
                "BT (one point)",
                cell(pa["bt_hypervolume"]),
                ", ".join(f"{x:.3f}" for x in pa["bt_hypervolume"].get("per_seed", [])),
            ]
        )
    means = {int(n): v["mean"] for n, v in pa["hypervolume"].items()}
    peak = pa.get("peak_n", max(means, key=lambda n: means[n]))
    interval = (
        "95% CIs resampling seeds then pairs"
        if "high_minus_low" in pa
        else f"min-max over seeds; the committed summary has no per-pair interval (not run: `{RERUN}`)"
    )
    return (
        f"**Pareto frontier** (rm-bench safety-response {pa['respond_pairs']} / safety-refuse "
        f"{pa['refuse_pairs']} pairs, unseen; hypervolume of the (respond, refuse) accuracies over the mixing "
        f"weights at every N, {interval}; the curve of means peaks at N={peak}):\n\n"
        + table(["N", "hypervolume", "per seed"], rows)
    )


def _math500(ma: dict[str, Any]) -> str:
    rows = [[n, _mci(v)] for n, v in sorted(ma["accuracy"].items(), key=lambda x: int(x[0]))]
    if "bt" in ma:
        rows.append(["BT", _mci(ma["bt"])])
    return (
        f"**MATH-500 verifier proxy** ({ma['test_pairs']} pairs; the reference solution above a corrupted one, "
        f"accuracy %; the paper's RL comparison: {ma.get('rl', 'not run')}):\n\n" + table(["N", "accuracy"], rows)
    )


def block_results() -> str:
    d = load("icrm")
    p = d["protocols"]
    parts = [
        f(p[k])
        for k, f in (
            ("steerability", _steerability),
            ("calibration", _calibration),
            ("rmbench", _rmbench),
            ("pareto", _pareto),
            ("math500", _math500),
        )
        if k in p
    ]
    removed = {proto: {k: v for k, v in t.get("overlap_removed", {}).items() if v} for proto, t in d["targets"].items()}
    note = "; ".join(f"{proto}: " + ", ".join(f"{k} {v}" for k, v in r.items()) for proto, r in removed.items() if r)
    parts.append("Target pairs dropped for sharing a conversation with a training pair: " + (note or "none") + ".")
    return "\n\n".join(parts) + "\n\n" + _source("icrm")


def block_speed() -> str:
    b = json.loads((BENCH / "icrm.json").read_text(encoding="utf-8"))
    rows = [
        [label, f"{b['best_cpu_seconds'][k]:.1f}", f"{b['best_wall_seconds'][k]:.1f}", f"{b['pairs_per_cpu_s'][k]:.1f}"]
        for k, label in (
            ("none", "no demonstrations"),
            ("demos", f"N = {b['demos']} demonstrations (cached per standard)"),
        )
    ]
    passes = b["backbone_passes"]
    return (
        f"Scoring {b['pairs']:,} held-out {b['source']} pairs under one standard (set mode, MiniLM, "
        f"{b['max_length']} tokens, {b['precision']}, batch {b['batch_size']}, {b['torch_threads']} thread, best "
        f"of {b['repeats']}):\n\n"
        + table(["condition", "CPU s", "wall s", "pairs per CPU s"], rows)
        + f"\n\nRatio {b['ratio']:.3f} on CPU time (expected from the backbone passes: "
        f"{passes['demos_cached']:,} / {passes['none']:,} = {passes['demos_cached'] / passes['none']:.3f}); "
        f"without the cache every pair would re-encode its demonstrations ({passes['demos_uncached']:,} "
        "passes). Source: `benchmarks/results/icrm.json`; command: `OMP_NUM_THREADS=1 .venv/bin/python "
        "benchmarks/bench_icrm.py --pairs 1000 --demos 64 --repeats 2`."
    )


BLOCKS: dict[str, Callable[[], str]] = {
    "icrm-claims": block_claims_summary,
    "icrm-claim-table": block_claim_table,
    "icrm-results": block_results,
    "icrm-speed": block_speed,
}
