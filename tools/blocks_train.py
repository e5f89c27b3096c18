"""The training and length-debiasing blocks of README.md and docs/debias.md, rendered from
docs/results/train-*.json (`rewardsmith train` runs) and docs/results/debias.json (experiments/debias.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blocks_common import RESULTS, load
from blocks_common import ci_text as _ci
from blocks_common import source as _source
from blocks_common import table as _table


def block_train() -> str:
    rows = []
    names = [
        n
        for n in ("train-harmless", "train-helpful", "train-harmless-debiased", "train-helpful-debiased")
        if (RESULTS / f"{n}.json").exists()
    ]
    if not names:
        return "Not run yet: no `docs/results/train-harmless.json`."
    for name in names:
        m = load(name)
        kind = m["config"]["train"].get("debias", {}).get("kind", "none")
        for dataset, b in m["eval"].items():
            if not b.get("n") or dataset.endswith("(validation)"):
                continue
            rows.append(
                [
                    m["train"]["dataset"],
                    kind,
                    dataset,
                    f"{b['n']:,}",
                    _ci(b["accuracy"], b["accuracy_ci"]),
                    f"{b['length_rule_accuracy']:.1f}",
                    _ci(b["length_controlled_accuracy"], b["length_controlled_accuracy_ci"]),
                    _ci(b.get("length_correlation"), b.get("length_correlation_ci"), 2),
                ]
            )
    return (
        "One seed (seed 0) per row; accuracies in %, 95% bootstrap CIs over pairs; corr is the Spearman "
        "correlation between reward and response length over every response of the set. Seed-to-seed "
        "comparisons of the debiasing objectives are in `docs/debias.md`.\n\n"
        + _table(
            [
                "trained on",
                "debias",
                "evaluated on",
                "n",
                "accuracy",
                "length rule",
                "length-controlled",
                "corr(reward, length)",
            ],
            rows,
        )
        + "\n\n"
        + _source(*names)
    )


# The preference target of each cross-domain set: PKU-SafeRLHF's harmless and helpful labels are opposite targets,
# so a mean over the cross-domain sets mixes them; the summary gives the figure per target.
HARMLESS_SETS = frozenset({"hh-rlhf/harmless-base", "pku-saferlhf/harmless"})


def _target(name: str) -> str:
    return "harmless" if name in HARMLESS_SETS else "helpful"


def _per_target(d: dict[str, Any], source: str, kept: str) -> str:
    """The kept objective's length-controlled gain on each cross-domain set, grouped by the set's target."""
    src = d["sources"][source]
    c = src["controlled_vs_none"][kept]
    groups: dict[str, list[str]] = {}
    for name in src["sets"]["cross_domain"]:
        groups.setdefault(_target(name), []).append(f"{name} {_ci(c[f'd.{name}'], c[f'd.{name}_ci'])}")
    return "; ".join(f"{t} target: {', '.join(v)}" for t, v in sorted(groups.items(), key=lambda x: x[0] != source))


def _debias_summary(d: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    v = d["verdict"]
    kept = d["choice"]["kept"]
    rows = []
    for source in d["sources"]:
        if source not in v:
            continue
        r = v[source]
        rows.append(
            [
                source,
                kept,
                _ci(r["cross_domain_lc_gain"], r["cross_domain_lc_gain_ci"]),
                _per_target(d, source, kept),
                _ci(r["abs_corr_ratio"], r["abs_corr_ratio_ci"], 2),
                _ci(r["held_out_accuracy_change"], r["held_out_accuracy_change_ci"]),
            ]
        )
    return (
        [
            "source",
            "kept objective",
            "cross-domain length-controlled gain, mean over the sets (mixes targets; the bar's measure)",
            "per set, by the set's target (points)",
            "mean abs. corr(reward, length) / plain BT's",
            "held-out accuracy change (points)",
        ],
        rows,
    )


def _debias_per_set(sources: dict[str, Any], kinds: list[str]) -> str:
    per_set = []
    for source, src in sources.items():
        for k in kinds:
            if k == "none":
                continue
            c, raw = src["controlled_vs_none"][k], src["raw_vs_none"][k]
            per_set.append(
                [
                    source,
                    k,
                    "mean of cross-domain sets (mixes the harmless and helpful targets)",
                    _ci(c["d.cross-domain"], c["d.cross-domain_ci"]),
                    _ci(raw["d.cross-domain"], raw["d.cross-domain_ci"]),
                    f"{src['correlation'][k]['mean_abs_corr']:.2f} vs "
                    f"{src['correlation']['none']['mean_abs_corr']:.2f}",
                ]
            )
            for split in [src["sets"]["validation"], src["sets"]["held_out"], *src["sets"]["cross_domain"]]:
                lv, base = src["levels"][k][split], src["levels"]["none"][split]
                per_set.append(
                    [
                        source,
                        k,
                        split,
                        _ci(c[f"d.{split}"], c[f"d.{split}_ci"]),
                        _ci(raw[f"d.{split}"], raw[f"d.{split}_ci"]),
                        f"{lv['length_correlation']:.2f} vs {base['length_correlation']:.2f}",
                    ]
                )
    return _table(["source", "objective", "set", "length-controlled", "accuracy", "corr(reward, length)"], per_set)


def block_debias() -> str:
    d = load("debias")
    seeds = ", ".join(map(str, d["seeds"]))
    choice = d["choice"]
    cand = [
        [
            k,
            f"{c['validation_lc_gain']:+.1f}",
            f"{c['validation_accuracy_change']:+.1f}",
            "kept" if k == choice["kept"] else "",
        ]
        for k, c in choice["candidates"].items()
    ]
    choice_seeds = ", ".join(map(str, d.get("choice_seeds", d["seeds"])))
    parts = [
        f"Seeds {seeds}; every CI is a 95% hierarchical bootstrap over seeds, then pairs within seed.",
        f"**Choice, on the validation split only** (seeds {choice_seeds}; {choice['rule']}):",
        _table(["objective", "validation length-controlled gain", "validation accuracy change", ""], cand),
    ]
    v = d["verdict"]
    if choice["kept"] != "none":
        header, rows = _debias_summary(d)
        parts += ["**The kept objective against plain Bradley-Terry on the reported sets:**", _table(header, rows)]
        cond = v["conditions"]
        parts.append(
            "Shipping bar: length-controlled gain >= 3 points with CI above 0 on each source: "
            f"{'met' if cond['lc_gain_at_least_3_with_ci_above_0'] else 'not met'}; mean |corr| halved: "
            f"{'met' if cond['abs_corr_halved'] else 'not met'}; at most 1 point of held-out accuracy "
            f"lost: {'met' if cond['held_out_cost_at_most_1'] else 'not met'}. Verdict: "
            f"**{'held' if v['held'] else 'not held'}**."
        )
    else:
        parts.append(f"No objective gained on validation: **none kept** ({v.get('reason', '')}).")
    parts += [
        f"**Every objective on every set** (seeds {seeds}; difference to plain BT, points; corr: mean over "
        "seeds, this objective vs plain BT):",
        _debias_per_set(d["sources"], d["kinds"]),
    ]
    if "screening" in d:
        screen_seeds = ", ".join(map(str, d["choice_seeds"]))
        parts += [
            f"**Screening of every objective** (seeds {screen_seeds}, the runs the choice was made on; CIs over "
            "pairs only when one seed):",
            _debias_per_set(d["screening"]["sources"], d["screening"]["kinds"]),
        ]
    return "\n\n".join(parts) + "\n\n" + _source("debias")


def block_debias_summary() -> str:
    d = load("debias")
    kept = d["choice"]["kept"]
    if kept == "none":
        return (
            "No debiasing objective gained on the validation split, so the shipped configs keep plain "
            "Bradley-Terry. " + _source("debias")
        )
    header, rows = _debias_summary(d)
    v = d["verdict"]
    return (
        f"Kept on the validation split: `{kept}`; against plain Bradley-Terry over seeds "
        f"{', '.join(map(str, d['seeds']))} (95% hierarchical bootstrap CIs over seeds and pairs), the shipping "
        f"bar (length-controlled gain >= 3 points with CI above 0, |corr| halved, <= 1 point of held-out "
        f"accuracy lost) is **{'met' if v['held'] else 'not met'}**:\n\n"
        + _table(header, rows)
        + "\n\n"
        + _source("debias")
    )


BLOCKS: dict[str, Callable[[], str]] = {
    "train": block_train,
    "debias": block_debias,
    "debias-summary": block_debias_summary,
}
