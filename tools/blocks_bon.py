"""Result blocks of docs/bon.md (and the README's bon section), rendered from committed metrics files only:

- docs/results/bon.json: experiments/bon.py summarise (the bon run's estimates, pair accuracies, the commands);
- benchmarks/results/bon.json: benchmarks/bench_bon.py.

The claims and their verdicts are built by rewardsmith.bon.claim_results against the bars declared in
rewardsmith.bon.claims; these functions only lay them out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from blocks_common import BENCH, ci_text, claim_results_block, load, policy_name, sampler_line, table
from blocks_common import source as _source

from rewardsmith.bon.claim_results import bon_claim_results
from rewardsmith.bon.estimate import LENGTH, ORACLE
from rewardsmith.claims import CLAIM_HEADER, claim_row
from rewardsmith.evaluate.formatting import with_range

NAMES = {LENGTH: "length selector (longest)", ORACLE: "oracle (gold picks)"}


def _ci(entry: Mapping[str, Any] | None, decimals: int = 3) -> str:
    if not entry:
        return "n/a"
    return ci_text(entry.get("estimate"), [entry.get("low"), entry.get("high")], decimals)


def _names(d: Mapping[str, Any]) -> dict[str, str]:
    """Selector label -> the experiment's name for it (the proxy's role), references by what they are."""
    return {**{label: name for name, label in d.get("proxy_labels", {}).items()}, **NAMES}


def _accuracy(d: Mapping[str, Any], label: str) -> str:
    name = _names(d).get(label, label)
    acc = d.get("pair_accuracy", {}).get(name)
    return ci_text(acc["accuracy"], acc.get("ci"), 1) if acc else "-"


def _gold_rows(d: Mapping[str, Any], gold: str, full: bool) -> list[list[str]]:
    rows = []
    for label, entry in d["golds"][gold]["selectors"].items():
        over = entry["overoptimisation"]
        gain = entry["gain_over_random"]
        row = [
            _names(d).get(label, label),
            _accuracy(d, label),
            _ci(entry["gold_at_n"][0]),
            _ci(entry["gold_at_n"][-1]),
            f"{_ci(gain)} {gain.get('verdict') or ''}".strip(),
            f"{over['peak_n']}: {_ci(over['drop'])} {over['verdict']}" if over.get("drop") else over["verdict"],
        ]
        if full:
            corr = entry["rank_correlation"]
            row += [f"{_ci(corr, 2)} ({corr['prompts']})", _ci(entry["length_at_n"][-1], 0)]
        rows.append(row)
    return rows


def _header(d: Mapping[str, Any], full: bool) -> list[str]:
    n = d["ns"][-1]
    head = [
        "selector",
        "pair acc. % (held-out)",
        "gold@1 (random)",
        f"gold@{n}",
        f"gold@{n} - gold@1",
        f"peak n (validation): gold@{n} - peak (test)",
    ]
    return head + (["rank corr. with gold (prompts)", f"length@{n} (chars)"] if full else [])


def _setup(d: Mapping[str, Any]) -> str:
    s = d["sampling"]
    return (
        f"{d['prompts']} prompts ({d['prompts_source']}), {d['n']} samples each from {policy_name(s['policy'])}, "
        f"temperature {s['temperature']}, top-p {s['top_p']}, at most {s['max_new_tokens']} new tokens "
        f"({s.get('cut', 0)} of {d['prompts'] * d['n']} samples cut there); {d['texts']} distinct texts scored by "
        f"each of {len(d['proxies'])} proxies and {len(d['golds'])} golds. The peak n is chosen on "
        f"{d['validation_prompts']} validation prompts, the drop after it is estimated on the other "
        f"{d['prompts'] - d['validation_prompts']}. Pair accuracy: on the {_n_heldout(d)} preference pairs of the "
        "prompts' conversations (no model trained on them). 95% bootstrap CIs over prompts." + _cut_caveat(d)
    )


def _cut_caveat(d: Mapping[str, Any]) -> str:
    """What the token limit does to the IFEval gold: a cut answer fails the checks that read its end, and the longest
    answer is the likeliest to be cut. The results count the cut samples (sampling.cut) but do not say which were
    cut, so the length selector cannot be compared on uncut samples from them."""
    s = d["sampling"]
    if not s.get("cut") or "ifeval" not in d["golds"]:
        return ""
    return (
        f" The {s['max_new_tokens']}-token cut confounds the length selector on ifeval: {s['cut']} of "
        f"{d['prompts'] * d['n']} samples stopped there, a cut answer fails the end-phrase and postscript checks "
        "whatever it says, and the longest answer is the likeliest to be cut, so 'the longest answer follows fewer "
        "instructions' may be the cut's doing. The results count the cut samples but do not say which were cut, so "
        "the comparison on uncut samples is not run."
    )


def _n_heldout(d: Mapping[str, Any]) -> str:
    counts = {a["n"] for a in d.get("pair_accuracy", {}).values()}
    return "/".join(str(c) for c in sorted(counts)) or "?"


def _gold_tables(d: Mapping[str, Any], full: bool) -> list[str]:
    """The setup paragraph, then one table per gold (full: with the rank correlation and the chosen length)."""
    parts = [_setup(d)]
    for gold in d["golds"]:
        title = d.get("gold_titles", {}).get(gold, gold)
        parts.append(f"**Gold: {gold}** ({title})\n\n" + table(_header(d, full), _gold_rows(d, gold, full)))
    return parts


def block_readme() -> str:
    d = load("bon")
    parts = _gold_tables(d, full=False)
    rows = [claim_row(r, 3) for r in bon_claim_results(d)]
    keep = [r for r in rows if r[0].startswith(("Offline", "A Beta"))]
    parts.append("The questions declared before the run (all rows in docs/bon.md):\n\n" + table(CLAIM_HEADER, keep))
    return "\n\n".join(parts) + "\n\n" + _source("bon")


def block_golds() -> str:
    d = load("bon")
    parts = _gold_tables(d, full=True)
    return "\n\n".join(parts) + "\n\n" + _source("bon")


def block_paired() -> str:
    d = load("bon")
    parts = []
    names = _names(d)
    for gold, block in d["golds"].items():
        rows = []
        for pair in block["paired"]:
            diff = pair["gold_diff_at_n"][-1]
            drop = pair.get("drop_diff")
            rows.append(
                [
                    f"{names.get(pair['a'], pair['a'])} - {names.get(pair['b'], pair['b'])}",
                    f"{_ci(diff)} {diff.get('verdict') or ''}".strip(),
                    f"{_ci(drop)} {drop.get('verdict') or ''}".strip() if drop else "n/a",
                ]
            )
        parts.append(
            f"**Gold: {gold}**\n\n"
            + table(["a - b", f"gold@{d['ns'][-1]}", "drop after the validation peak (test prompts)"], rows)
        )
    return "\n\n".join(parts) + "\n\n" + _source("bon")


def block_claims() -> str:
    return claim_results_block(bon_claim_results, "bon")


def block_steps() -> str:
    d = load("bon")
    lines = d.get("steps", [])
    seconds = sum(int(x.split()[1]) for x in lines if x.startswith("# ") and x.split()[1].isdigit())
    return (
        "Each command with its measured wall time, in the order `experiments/bon.py run` ran them: "
        f"{seconds / 60:.0f} min end to end on the 2-core machine. {sampler_line(d['sampling'].get('sampler'))}\n\n"
        + "```\n"
        + "\n".join(lines)
        + "\n```\n\n"
        + _source("bon")
    )


def block_speed() -> str:
    d = json.loads((BENCH / "bon.json").read_text(encoding="utf-8"))

    def rate(key: str, unit: str) -> float:
        values = sorted(r[unit] for r in d["runs"][key])
        return values[len(values) // 2]

    s, c = d["sampling_ratio"], d["scoring_ratio"]
    rows = [
        [
            "sampling, new tokens/s",
            f"{rate('sampling:bon', 'tokens_per_s'):.1f}",
            f"bare generate: {rate('sampling:bare', 'tokens_per_s'):.1f}",
            with_range(s, unit=""),
        ],
        [
            "scoring, texts/s",
            f"{rate('scoring:bon', 'texts_per_s'):.1f}",
            f"rewardsmith score: {rate('scoring:score', 'texts_per_s'):.1f}",
            with_range(c, unit=""),
        ],
    ]
    settings = d["settings"]
    return (
        f"{settings['prompts']} prompts x {settings['n']} samples, at most {settings['max_new_tokens']} new tokens, "
        f"{settings['rounds']} rounds of fresh processes, alternating; medians.\n\n"
        + table(["what", "rewardsmith bon", "reference", "ratio (median, range)"], rows)
        + f"\n\nCommand: `{d['command']}`; results: `benchmarks/results/bon.json`."
    )


BLOCKS: dict[str, Callable[[], str]] = {
    "bon": block_readme,
    "bon-golds": block_golds,
    "bon-paired": block_paired,
    "bon-claims": block_claims,
    "bon-steps": block_steps,
    "bon-speed": block_speed,
}
