"""Result blocks of docs/testbed.md (and the README's testbed section), rendered from docs/results/testbed.json only
(experiments/testbed.py summarise): the controls first, then the scaling with proxy size, the ensembles and RL, and
the claims of rewardsmith.testbed.claims with the verdicts rewardsmith.testbed.claim_results builds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blocks_common import ci_text, load, sampler_line, table
from blocks_common import source as _source

from rewardsmith.claims import CLAIM_HEADER, claim_row
from rewardsmith.testbed.claim_results import testbed_claim_results

NAME = "testbed"


def _ci(entry: Mapping[str, Any] | None, decimals: int = 3) -> str:
    if not entry:
        return "n/a"
    return ci_text(entry.get("estimate"), [entry.get("low"), entry.get("high")], decimals)


def _verdict(over: Mapping[str, Any] | None) -> str:
    if not over:
        return "n/a"
    peak = over.get("peak_n", over.get("peak_step"))
    return f"{over['verdict']} (peak {peak}; drop {_ci(over.get('drop'))}; first step {_ci(over.get('first_step'))})"


def _selectors_table(d: Mapping[str, Any], names: list[str]) -> str:
    bon = d["bon"]
    ns = bon["ns"]
    rows = []
    for name in names:
        s = bon["selectors"].get(name)
        if s is None:
            continue
        gold = s["gold_at_n"]
        rows.append([name, _ci(gold[0]), _ci(gold[len(ns) // 2]), _ci(gold[-1]), _verdict(s["overoptimisation"])])
    header = ["selector", "gold@1", f"gold@{ns[len(ns) // 2]}", f"gold@{ns[-1]}", "over-optimisation (test half)"]
    return table(header, rows)


def _candidate(c: Mapping[str, Any]) -> str:
    """A hacked candidate in a few words: its rate over all pairs, its length tail, or its phrase."""
    if c.get("pattern"):
        return "phrase: `" + c["pattern"].replace("|", "\\|") + "`"  # a table cell: its pipes escaped
    return f"tail: {c['tail']} characters" if c.get("tail") else f"rate {c['rate']:g}"


def _share(hack: Mapping[str, Any]) -> str:
    """Which pairs the chosen hack's feature decided, in words."""
    if hack.get("pattern"):
        return f"in every pair where one text holds a match of `{hack['pattern']}` and the other none"
    if hack.get("tail"):
        return f"in every pair with a text in the pool's length tail ({hack['tail']} characters)"
    return f"at rate {hack['rate']:g}"


def _feature(hack: Mapping[str, Any]) -> str:
    return "a phrase" if hack.get("pattern") else f"the {hack['direction']} response"


def _phrase(words: Mapping[str, Mapping[str, Any]]) -> str:
    """The phrase candidate's words, each with its share of the pool's responses and the gold's preference for it."""
    return (
        " The phrase candidate's words (training pairs only): "
        + "; ".join(
            f"'{w}' in {f['share'] * 100:.1f}% of responses, preferred by the gold in "
            f"{f['gold_prefers'] * 100:.0f}% of {f['pairs']} pairs holding it on one side"
            for w, f in words.items()
        )
        + "."
    )


def controls() -> str:
    d = load(NAME)
    hack = d["hack"]
    text = (
        f"Best-of-{d['bon']['ns'][-1]} on {d['bon']['prompts']} evaluation prompts ({d['bon']['validation_prompts']} "
        "in the validation half that chooses each peak; gold: the testbed's gold; 95% CIs over prompts). The hacked "
        f"proxy ({hack['chosen']}) learned from {d['design']['HACK_N']} pairs whose label {_feature(hack)} decided "
        f"{_share(hack)} ({hack.get('decided_in_training', hack['decided_by_spurious'])} of them). The length "
        "candidates' feature runs opposite to the "
        "gold's own preference on the validation prompts' pairs: the gold preferred the longer response in "
        f"{hack['gold_prefers_longer']} and the shorter in {hack['gold_prefers_shorter']} of "
        f"{hack['validation_pairs']}."
        + (_phrase(hack["phrase"]) if hack.get("phrase") else "")
        + (
            f" The RL arms' control is {hack['rl_control']}, chosen among the length candidates by the same rule (the "
            "server's monitors watch length)."
            if hack.get("rl_control")
            else ""
        )
        + "\n\n"
    )
    candidates = hack.get("candidates")
    if candidates:
        rows = [
            [
                f"{name}: {_candidate(c)}" + (" (chosen)" if name == hack["chosen"] else ""),
                str(c.get("decided_in_training", c["decided_by_spurious"])),
                f"{c['agreement']:.1f}",
                str(c["validation"]["peak_n"]),
                f"{c['validation']['drop']:.3f}",
                _verdict(c["test"]),
            ]
            for name, c in candidates.items()
        ]
        header = ["hack", "training pairs its feature decided", "agreement %", "validation peak n", "validation drop"]
        text += (
            "The hack was chosen among the candidates on the validation half alone (claims.py): the one whose gold "
            "peaks above n = 1 and below N there and drops most after its peak; the test half's verdict of each is "
            "shown, not used.\n\n" + table([*header, "over-optimisation (test half)"], rows) + "\n\n"
        )
        learned = [
            f"{name}: {c['phrase_picked_at_n'][-1] * 100:.1f}% at n = {d['bon']['ns'][-1]} (n = 1: "
            f"{c['phrase_picked_at_n'][0] * 100:.1f}%; a text with the phrase among the n: "
            f"{c['phrase_available_at_n'][-1] * 100:.1f}%)"
            for name, c in candidates.items()
            if c.get("phrase_picked_at_n")
        ]
        if learned:
            text += (
                "Did a phrase candidate's proxy learn its phrase? The share of prompts whose best-of-n pick holds it, "
                "every prompt: " + "; ".join(learned) + ".\n\n"
            )
    names = [
        "oracle",
        "hacked",
        "length",
        f"p{d['design']['PROXY_SIZES'][0]}-s0",
        f"p{d['design']['PROXY_SIZES'][-1]}-s0",
    ]
    text += _selectors_table(d, names) + "\n\n"
    rise = d["ensembles"]["doubt_at_pick"]
    text += (
        "The doubt (sd of the standardised members) of the ensemble's best-of-n pick, n = N minus n = 1: with the "
        f"hacked member {_ci(rise['with-hacked']['rise'])}; the five smallest-N members alone "
        f"{_ci(rise['mean']['rise'])}.\n\n"
    )
    rl = d.get("rl", {})
    if rl:
        rows = []
        for arm, r in rl.items():
            over = next(iter(r["overoptimisation"].values()), None) if r["overoptimisation"] else None
            rows.append([arm, _ci(r["kl_end"]), _verdict(over), ", ".join(r["monitors_fired"]) or "none"])
        text += table(["RL arm", "KL at the end", "gold over the run (test half)", "monitors fired"], rows) + "\n\n"
    else:
        text += "RL arms: not run.\n\n"
    return text + _source(NAME)


def scaling() -> str:
    d = load(NAME)
    agreement, fits = d["agreement"], d["scaling"]
    rows = []
    for n in d["design"]["PROXY_SIZES"]:
        f = fits["sizes"][str(n)]
        rows.append([str(n), _ci(agreement[str(n)], 1), _ci(f["alpha"]), _ci(f["beta"]), _ci(f["peak_d"], 2)])
    text = table(["N gold labels", "agreement with the gold %", "alpha", "beta", "peak d* = alpha / (2 beta)"], rows)
    text += (
        f"\n\nLargest N minus smallest N: agreement {_ci(agreement['largest_minus_smallest'], 1)} points; beta "
        f"(smallest - largest) {_ci(fits['beta_smallest_minus_largest'])}; peak d* (largest - smallest) "
        f"{_ci(fits['peak_largest_minus_smallest'], 2)}; 1/d* (smallest - largest) "
        f"{_ci(fits.get('inverse_peak_smallest_minus_largest'))}. Agreement on the held-out pool prompts' pairs over "
        f"seeds {', '.join(str(s) for s in d['design']['SEEDS'])} (CIs over seeds, then pairs); the forms fitted to "
        "the gold's gain over n = 1 against d = sqrt(KL bound), each seed's fit averaged (CIs over prompts); the "
        f"hacked proxy's agreement: {d['agreement_hacked']:.1f}%.\n\n"
    )
    return text + _source(NAME)


def ensembles() -> str:
    d = load(NAME)
    e = d["ensembles"]
    rows = [[rule, _ci(entry)] for rule, entry in (e["drop_vs_mean"] or {}).items()]
    rows += [[f"{rule} vs one member", _ci(entry)] for rule, entry in (e["drop_vs_member"] or {}).items()]
    text = (
        f"uwo's lambda chosen on the validation prompts: {e['uwo_chosen']}. Drop after the validation peak, paired "
        "over the test prompts (above 0: the first loses less than the second):\n\n"
        + table(["comparison", "drop difference"], rows)
        + "\n\nThe doubt against the gold's disagreement with the ensemble's choice, held-out pool pairs (AUROC): "
        + "; ".join(f"{k}: {ci_text(v['error_auroc'], v['ci'], 3)}" for k, v in e["auroc"].items())
        + ".\n\n"
    )
    return text + _source(NAME)


def icrm() -> str:
    d = load(NAME)
    facts = d.get("icrm")
    if not facts:
        return "ICRM: not run.\n\n" + _source(NAME)
    pools = facts["pools"]["gold"]
    text = (
        f"The in-context model ({facts['steps']} steps of episodes; pool pairs train/demo/test {pools['train']}/"
        f"{pools['demo']}/{pools['test']}) steered by {facts['demos']} gold-labelled validation pairs, and its "
        f"Bradley-Terry baseline ({facts['bt_pairs']} pairs, the encoder the ICRM reads), both choosing the best of "
        "n:\n\n"
        + _selectors_table(d, ["icrm", "icrm-bt"])
        + f"\n\nDrop after the validation peak, ICRM minus BT, paired over the test prompts (above 0: the ICRM loses "
        f"less): {_ci(facts['drop_diff'])}.\n\n"
    )
    return text + _source(NAME)


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f}"


def _machine(m: dict[str, object]) -> str:
    bf16 = "native bf16" if m.get("bf16_native") else "no native bf16: bf16 runs in fp32"
    return f"{m.get('cpu') or 'a CPU of unknown model'}, {m.get('cpus')} cores, {bf16}"


def cost() -> str:
    d = load(NAME)
    records = d["seconds"]
    measured = any("cpu_seconds" in r for r in records)  # results from before 2026-12-08 hold wall times only
    header = ["command", "minutes", *(["CPU minutes", "runs killed"] if measured else [])]
    rows = [
        [f"`{r['command'][:110]}`", _minutes(r["seconds"])]
        + ([_minutes(r.get("cpu_seconds")), str(r.get("killed", 0))] if measured else [])
        for r in records
    ]
    total = sum(r["seconds"] or 0.0 for r in records) / 60
    cpu = [r.get("cpu_seconds") for r in records if r["seconds"] is not None]
    cpu_total = f", {sum(cpu) / 60:.0f} CPU minutes" if measured and all(c is not None for c in cpu) else ""
    killed = sum(r.get("killed", 0) for r in records)
    failed = sum(r.get("failed", 0) for r in records)
    machines = d.get("machines", [])
    where = "on " + "; then on ".join(_machine(m) for m in machines) if machines else "on the 2-core CPU"
    return (
        table(header, rows)
        + f"\n\n{total:.0f} minutes in all{cpu_total}, {where}. "
        + (
            "Minutes are wall-clock, counting any time the machine was shared or the run stopped; CPU minutes are"
            " not (-: not recorded). "
            if measured
            else ""
        )
        + (
            f"{killed} {'run was' if killed == 1 else 'runs were'} killed on the way (a session ended); each step"
            " resumed from its run folder, and its row's times are its finishing run's, which did only the rest. "
            if killed
            else ""
        )
        + (f"{failed} {'run' if failed == 1 else 'runs'} exited with an error and ran again. " if failed else "")
        + f"{sampler_line(d.get('sampler', {}).get('eval'))}\n\n"
        + _source(NAME)
    )


def claims() -> str:
    rows = [claim_row(r, 3) for r in testbed_claim_results(load(NAME))]
    return (
        "held: the run shows what the claim says, on its CI (or, for an outcome, the outcome itself); not held: the "
        "other side; inconclusive: the CI covers the bar; not run: what was not run, and why.\n\n"
        + table(CLAIM_HEADER, rows)
        + "\n\n"
        + _source(NAME)
    )


def readme() -> str:
    d = load(NAME)
    results = testbed_claim_results(d)
    held = sum(r.verdict == "held" for r in results)
    lines = [f"- {r.claim.statement} **{r.verdict}**" + (f" ({r.scope})" if r.scope else "") for r in results]
    return (
        f"{held} of {len(results)} testbed results held (docs/testbed.md has each figure and its CI):\n\n"
        + "\n".join(lines)
        + "\n\n"
        + _source(NAME)
    )


BLOCKS = {
    "testbed-controls": controls,
    "testbed-scaling": scaling,
    "testbed-ensembles": ensembles,
    "testbed-icrm": icrm,
    "testbed-cost": cost,
    "testbed-claims": claims,
    "readme-testbed": readme,
}
