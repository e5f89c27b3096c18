"""Result blocks of docs/ensembles.md (and the README's ensembles section), rendered from committed metrics files only:

- docs/results/ensembles.json: experiments/ensembles.py summarise (members, rules and heads on every evaluation set,
  the best-of-n run against the gold, the commands and their time);
- benchmarks/results/ensemble.json: benchmarks/bench_ensemble.py.

The claims and their verdicts are built by rewardsmith.ensembles.claim_results against the bars declared in
rewardsmith.ensembles.claims; these functions only lay them out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from blocks_common import BENCH, ci_text, claim_results_block, load, table
from blocks_common import source as _source

from rewardsmith.claims import CLAIM_HEADER, claim_row
from rewardsmith.ensembles.claim_results import KINDS, ensemble_claim_results, gold_name, proxy_label

MODELS = ["seeds best member", "seeds mean", "seeds min", "seeds uwo", "boot best member", "boot mean", "heads mean"]


def _ci(entry: Mapping[str, Any] | None, decimals: int = 1) -> str:
    return ci_text(entry.get("estimate"), entry.get("ci"), decimals) if entry else "n/a"


def _name(model: str) -> str:
    kind, _, rest = model.partition(" ")
    return f"{KINDS.get(kind, kind)}: {rest}" if kind in KINDS else f"shared backbone: {rest}"


def block_sets() -> str:
    d = load("ensembles")
    parts = []
    for scope, entry in d["sets"].items():
        rows = []
        for model in MODELS:
            m = entry["models"][model]
            sel = m["doubt"]["selective"]
            auroc = {"estimate": m["doubt"]["error_auroc"], "ci": m["doubt"]["error_auroc_ci"]}
            rows.append(
                [
                    _name(model) + (f" (member {m['member']})" if "member" in m else ""),
                    _ci(m["accuracy"]),
                    _ci(m["length_controlled"]),
                    ci_text(sel["0.5"]["accuracy"], sel["0.5"]["ci"], 1),
                    ci_text(sel["0.8"]["accuracy"], sel["0.8"]["ci"], 1),
                    _ci(auroc, 3),
                ]
            )
        header = ["model", "accuracy", "length-controlled", "50% most sure", "80% most sure", "error AUROC of doubt"]
        parts.append(f"**{scope}** ({entry['pairs']} pairs)\n\n" + table(header, rows))
    return "\n\n".join(parts) + "\n\n" + _source("ensembles")


def block_claims() -> str:
    return claim_results_block(ensemble_claim_results, "ensembles")


def _bon_rows(d: Mapping[str, Any], gold: str) -> list[list[str]]:
    block = d["bon"]["golds"][gold]
    rows = []
    names = {f"rules/{k}-{r}": f"{KINDS[k]}: {r}" for k in KINDS for r in ("mean", "min", "uwo")}
    names.update({f"{d['best_member'][k]}/model": f"{KINDS[k]}: best member" for k in KINDS})
    for source, name in names.items():
        label = proxy_label(d, source)
        if label is None or label not in block["selectors"]:
            continue
        entry = block["selectors"][label]
        over = entry["overoptimisation"]
        drop = over.get("drop")
        rows.append(
            [
                name,
                ci_text(entry["gold_at_n"][0].get("estimate"), _pair(entry["gold_at_n"][0]), 3),
                ci_text(entry["gold_at_n"][-1].get("estimate"), _pair(entry["gold_at_n"][-1]), 3),
                ci_text(entry["gain_over_random"].get("estimate"), _pair(entry["gain_over_random"]), 3),
                f"{over['peak_n']}: {ci_text(drop.get('estimate'), _pair(drop), 3)} {over['verdict']}"
                if drop
                else over["verdict"],
            ]
        )
    return rows


def _pair(entry: Mapping[str, Any] | None) -> list[Any] | None:
    return [entry.get("low"), entry.get("high")] if entry else None


def block_bon() -> str:
    d = load("ensembles")
    n = d["bon"]["ns"][-1]
    parts = []
    for gold in d["bon"]["golds"]:
        header = ["proxy", "gold@1", f"gold@{n}", f"gold@{n} - gold@1", "validation peak n: drop after it (test)"]
        parts.append(f"**Gold: {gold_name(gold)}**\n\n" + table(header, _bon_rows(d, gold)))
    return "\n\n".join(parts) + "\n\n" + _source("ensembles")


def block_speed() -> str:
    d = json.loads((BENCH / "ensemble.json").read_text(encoding="utf-8"))

    def median(kind: str, key: str) -> float:
        values = sorted(r[key] for r in d["runs"][kind])
        return values[len(values) // 2]

    k = d["settings"]["members"]
    e, h = d["ensemble_over_k_members"], d["heads_over_member"]
    rows = [
        [kind, f"{median(kind, 'texts_per_s'):.1f}", f"{median(kind, 'load_seconds'):.1f}"]
        for kind in ("member", "ensemble", "heads")
    ]
    return (
        f"{d['settings']['texts']} texts, {k} members, {d['settings']['rounds']} rounds of fresh processes, "
        "alternating; medians.\n\n"
        + table(["variant", "texts/s", "load s"], rows)
        + f"\n\nensemble / ({k} x member): **{e['median']:.3f}** (range {e['min']:.3f}-{e['max']:.3f}); "
        f"{k} heads on one backbone / member: **{h['median']:.3f}** (range {h['min']:.3f}-{h['max']:.3f}).\n\n"
        f"Command: `{d['command']}`; results: `benchmarks/results/ensemble.json`."
    )


def block_steps() -> str:
    d = load("ensembles")
    lines = d.get("commands", [])
    return (
        "Each command with its measured wall time, in the order `experiments/ensembles.py run` ran them "
        f"(the shared-backbone heads trained in {d['heads_train_seconds'] / 60:.1f} min in process):\n\n"
        + "```\n"
        + "\n".join(lines)
        + "\n```\n\n"
        + _source("ensembles")
    )


def block_readme() -> str:
    d = load("ensembles")
    results = ensemble_claim_results(d)
    heldout = next(iter(d["sets"]))
    keep = [r for r in results if r.scope.startswith(heldout) or r.claim.key in ("ens.e", "ens.f")]
    return (
        "The questions declared in src/rewardsmith/ensembles/claims.py (docs/ensembles.md says when), on the held-out "
        "set and in best-of-n (every set in docs/ensembles.md):\n\n"
        + table(CLAIM_HEADER, [claim_row(r, 3) for r in keep])
        + "\n\n"
        + _source("ensembles")
    )


BLOCKS: dict[str, Callable[[], str]] = {
    "ensembles": block_readme,
    "ensembles-sets": block_sets,
    "ensembles-claims": block_claims,
    "ensembles-bon": block_bon,
    "ensembles-speed": block_speed,
    "ensembles-steps": block_steps,
}
