"""Result blocks of docs/w2s.md (and the README's w2s-claims), rendered from committed metrics files only:

- docs/results/shift-harmless.json, shift-harmless-sweep.json, shift-helpful.json: slimmed metrics.json of the
  `rewardsmith shift` runs (experiments/w2s.py summarise);
- docs/results/teachers.json: experiments/teachers.py (the teacher screening and its choice on validation);
- docs/results/anchor-scale.json: experiments/w2s.py scale (the anchor normaliser);
- docs/results/pairs/shift-harmless-paper.npz: the paper-form run's per-pair margins (how far its students lie from
  their naive students);
- docs/results/w2s-gap.json: experiments/w2s_gap.py (the search for a setting with a gap, on validation only);
- benchmarks/results/anchor.json: benchmarks/bench_anchor.py.

The claims and their verdicts are built by rewardsmith.w2s.claim_results against the bars declared in
rewardsmith.w2s.claims; these functions only lay them out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from blocks_common import BENCH, RESULTS, ci_text, load, table
from blocks_common import source as _source

from rewardsmith.claims import CLAIM_HEADER, ClaimResult, claim_row
from rewardsmith.w2s.claim_results import (
    equal_to_naive,
    gap_search_result,
    naive_agreement,
    own_claims,
    paper_claims,
    paper_form_claims,
)
from rewardsmith.w2s.claims import (
    ANCHOR_GAIN_FIGURE,
    CHOICES,
    EQUAL_TO_NAIVE_SHARE,
    MIN_TEACHER_GAP,
    PAPER_FORM_METHOD,
    PAPER_RAW_WEIGHT,
    RERUN,
)

# (headline run, its anchor-strength sweep, its layer run, its run of ANCHOR in the paper's form) per source, as
# docs/results names.
SOURCES = (
    ("shift-harmless", "shift-harmless-sweep", "shift-harmless-layer", "shift-harmless-paper"),
    ("shift-helpful", None, None, None),
)


def _optional(name: str | None) -> str | None:
    return name if name and (RESULTS / f"{name}.json").exists() else None


def _agreement(name: str | None) -> dict[str, Any]:
    """The paper-form run's naive_agreement from its committed margins ({} without them)."""
    path = RESULTS / "pairs" / f"{name}.npz"
    if not name or not path.exists():
        return {}
    with np.load(path, allow_pickle=False) as arrays:
        return naive_agreement({k: arrays[k] for k in arrays.files}, PAPER_FORM_METHOD)


def _results() -> tuple[list[ClaimResult], list[ClaimResult], list[str]]:
    paper, own, names = [], [], []
    for headline, sweep, layer, paper_form in SOURCES:
        if not (RESULTS / f"{headline}.json").exists():
            continue
        sweep, layer, form = _optional(sweep), _optional(layer), _optional(paper_form)
        h = load(headline)
        paper += paper_claims(h, load(sweep) if sweep else None, load(layer) if layer else None)
        own += own_claims(h)
        if paper_form:
            own += paper_form_claims(load(form) if form else None, h["targets"], _agreement(form))
        names += [headline] + [n for n in (sweep, layer, form) if n]
    return paper, own, names


def _split_name(split: str) -> str:
    return {"id": "ID test", "val": "validation"}.get(split, split)


def _paper_form() -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """(results name, metrics, naive_agreement) of the paper-form run; None without its results or margins."""
    name = _optional(SOURCES[0][3])
    agreement = _agreement(name)
    return (name, load(name), agreement) if name and agreement else None


def _paper_form_verdict(run: dict[str, Any], agreement: dict[str, Any]) -> str:
    weight = float(run["method_settings"][PAPER_FORM_METHOD]["anchor"]["weight"])
    head = f"**ANCHOR in the paper's form** (`{PAPER_FORM_METHOD}`, lambda = {weight:g} on the plain masked MSE): "
    if not equal_to_naive(agreement):
        return head + "not equal to naive at this scale, so its rows are judged."
    return head + (
        f"equal to naive at this scale (its per-pair correctness differs from its naive students' on less than "
        f"{EQUAL_TO_NAIVE_SHARE:.0%} of every split), so its rows are not run: they test nothing"
    )


def paper_form_note() -> str:
    """What the paper-form run is: how far its students lie from their naive students (committed margins), and the
    size of its anchor term at the scale of the reference states (anchor-scale.json); "" without the run."""
    found = _paper_form()
    if found is None:
        return ""
    name, run, agreement = found
    scale = load("anchor-scale")
    weight = float(run["method_settings"][PAPER_FORM_METHOD]["anchor"]["weight"])
    mean_square = float(scale["layers"]["last"]["mean_square"])
    term, soft_bt = weight * mean_square, math.log(2.0)
    label_logit = run.get("teacher_labels", {}).get("median_abs_margin")
    order = [s for s in ("id", "val", *run["targets"]) if s in agreement["by_split"]]
    splits = ", ".join(
        f"{_split_name(s)} {agreement['by_split'][s]['differing']} of {agreement['by_split'][s]['pairs']}"
        for s in order
    )
    identical = ", ".join(_split_name(s) for s in order if s in agreement["identical"]) or "none"
    return (
        _paper_form_verdict(run, agreement)
        + f". Over seeds {', '.join(map(str, run['seeds']))} and every split its students' margins differ from their "
        f"same-seed naive students' by at most {agreement['max_abs_difference']:.3f}, and their per-pair correctness "
        f"differs on {agreement['differing']} of {agreement['pairs']} pair predictions ({agreement['share']:.2%}; "
        f"{splits}): identical on every pair of every seed on {identical}. The anchor term is {weight:g} x the MSE "
        "between the student's and the reference's last-layer states: a drift as large as the reference states "
        f"themselves (their mean square, {mean_square:.4g}, `docs/results/anchor-scale.json`) would add {term:.2g} "
        f"to a soft Bradley-Terry loss near ln 2 = {soft_bt:.2f}"
        + (f" (the teacher's labels have median |logit| {label_logit:.3f})" if label_logit is not None else "")
        + f", {term / soft_bt:.1e} of it. The term's value at the end of training is logged in the run folder's "
        "log.jsonl, which is not committed: its size relative to the loss is not measured. Source: "
        f"`docs/results/pairs/{name}.npz`."
    )


def _paper_form_summary() -> str:
    """The README's line on the paper-form run: its verdict and the two figures it rests on."""
    found = _paper_form()
    if found is None:
        return ""
    _, run, agreement = found
    return (
        _paper_form_verdict(run, agreement)
        + f" (margins within {agreement['max_abs_difference']:.3f} of naive's, correctness different on "
        f"{agreement['differing']} of {agreement['pairs']} pair predictions; docs/w2s.md)."
    )


def _note(names: list[str]) -> str:
    kind = {"sweep": "sweep", "layer": "layer run", "paper": "paper-form run"}
    seeds = "; ".join(
        f"{load(n)['name']} {next((v for k, v in kind.items() if k in n), 'headline')}: seeds "
        f"{', '.join(map(str, load(n)['seeds']))}"
        for n in names
    )
    return (
        "Points; 95% hierarchical bootstrap CIs (seeds, then pairs within seed, paired across models). held: the "
        "CI lies on the claimed side of the bar declared (src/rewardsmith/w2s/claims.py); not held: on the "
        "other side; inconclusive: it covers the bar; not run: these runs do not measure it. Every target is "
        "reported on its own (rm-bench/safety-refuse rewards refusing, safety-response rewards answering: they "
        "are never averaged). The paper column holds the paper's own figures, from its Llama / Anthropic Helpful "
        "setting (it gives no CIs); where one is in our measure's unit the verdict says whether it lies inside our "
        f"CI. Seeds: {seeds}."
    )


def block_claim_table() -> str:
    """docs/w2s.md's opening table: the paper's claims (a)-(d) per target, then the project's own questions."""
    paper, own, names = _results()
    if not names:
        return "Not run yet: no `docs/results/shift-harmless.json`."
    return (
        _note(names)
        + "\n\n**The paper's claims**\n\n"
        + table(CLAIM_HEADER, [claim_row(r) for r in paper])
        + "\n\n**The project's own questions**\n\n"
        + table(CLAIM_HEADER, [claim_row(r) for r in own])
        + "\n\n"
        + "".join(note + "\n\n" for note in (paper_form_note(),) if note)
        + _source(*names)
    )


def block_claims_summary() -> str:
    """The README's compact form: each paper claim per source, its verdicts counted over the targets."""
    paper, _, names = _results()
    if not names:
        return "Not run yet: no `docs/results/shift-harmless.json`."
    groups: dict[tuple[str, str], list[ClaimResult]] = {}
    for r in paper:
        groups.setdefault((r.scope.split(":")[0], r.claim.statement), []).append(r)
    rows = []
    for (source, statement), results in groups.items():
        counts = {v: sum(r.verdict == v for r in results) for v in ("held", "not held", "inconclusive", "not run")}
        text = ", ".join(f"{v} {n}" for v, n in counts.items() if n)
        rows.append([source, statement, results[0].claim.bar_text(), text])
    form = _paper_form_summary()
    return (
        "Verdicts of the ANCHOR paper's claims, counted over the targets of each source (one row per target in "
        "docs/w2s.md, with estimates and CIs):\n\n"
        + table(["source", "claim", "bar", "verdicts"], rows)
        + "\n\n"
        + (form + "\n\n" if form else "")
        + _source(*names)
    )


def _teacher_text(teacher: dict[str, Any]) -> str:
    """A shift config's teacher block as a short name (tfidf C 1, model with 1 layer frozen, ...)."""
    if teacher.get("kind") == "tfidf":
        return f"tfidf (C {teacher.get('tfidf', {}).get('c', 1.0):g})"
    model = teacher.get("model", {})
    frozen = "frozen " if model.get("freeze_backbone") else "fine-tuned "
    return f"{frozen}{model.get('num_layers', '')}-layer {model.get('backbone', teacher.get('kind'))}"


def _margin(selection: dict[str, Any], sweep: dict[str, Any]) -> str:
    """How many validation predictions the choice rests on: the winner's lead over the runner-up."""
    scores = sorted(selection.get("candidates", {}).values(), reverse=True)
    predictions = sweep.get("sizes", {}).get("val", 0) * len(sweep.get("seeds", []))
    if len(scores) < 2 or not predictions:
        return ""
    lead = scores[0] - scores[1]
    return (
        f"; its lead over the runner-up is {lead:.2f} points of mean validation accuracy, "
        f"{lead / 100 * predictions:.0f} of {predictions} validation predictions"
    )


def block_choices() -> str:
    """Every choice the runs rest on, the split it was made on, what it chose and what the committed runs used."""
    rows = []
    teachers = load("teachers") if (RESULTS / "teachers.json").exists() else {"configs": {}}
    made = {Path(c).stem: r.get("choice", {}).get("chosen", "n/a") for c, r in teachers["configs"].items()}
    runs = {n: load(n) for n in ("shift-harmless", "shift-helpful") if (RESULTS / f"{n}.json").exists()}
    sweep = load("shift-harmless-sweep") if (RESULTS / "shift-harmless-sweep.json").exists() else {}
    layer = load("shift-harmless-layer") if (RESULTS / "shift-harmless-layer.json").exists() else {}
    last = next((s for s in sweep.get("anchor_selection", []) if s.get("layers") == [1.0]), None)
    for choice in CHOICES:
        if choice.key == "w2s.teacher":
            chosen = "; ".join(f"{k}: {v}" for k, v in made.items()) or "not made yet"
            used = "; ".join(f"{n}: {_teacher_text(m['config']['teacher'])}" for n, m in runs.items())
        elif choice.key == "w2s.anchor-strength":
            chosen = (
                f"{last['chosen']} (lambda* = {last['weight']:g}){_margin(last, sweep)}" if last else "not made yet"
            )
            used = "; ".join(
                f"{n}: {', '.join(k for k in m['methods'] if k.startswith('anchor'))}" for n, m in runs.items()
            )
        elif choice.key == "w2s.layer-strength":
            chosen = f"lambda* = {last['weight']:g}" if last else "not made yet"
            source, run = ("the layer run", layer) if layer else ("the committed sweep", sweep)
            middle = ", ".join(k for k in run.get("methods", {}) if k.endswith("-mid"))
            used = f"{source} trained the middle layer at {middle}" if middle else "-"
        else:
            debias = load("debias") if (RESULTS / "debias.json").exists() else {}
            chosen = debias.get("choice", {}).get("kept", "not made yet")
            used = "; ".join(
                f"{n}: {', '.join(k for k in m['methods'] if k.startswith('naive-'))}"
                for n, m in runs.items()
                if any(k.startswith("naive-") for k in m["methods"])
            )
        rows.append([choice.what, choice.options, choice.rule, choice.split, chosen, used, f"`{choice.where}`"])
    return (
        "No reported number makes a choice: each setting below is chosen by the rule written in the file named, on "
        "the split named. The last column is what the committed runs used; where it differs from the choice, the "
        f"runs predate it and `{RERUN}` reruns them with the choice.\n\n"
        + table(
            ["setting", "candidates", "rule", "made on", "chosen", "used by the committed runs", "rule written in"],
            rows,
        )
    )


def block_teachers() -> str:
    t = load("teachers")
    rows = []
    for config, res in t["configs"].items():
        chosen = res.get("choice", {}).get("chosen")
        for name, c in res["candidates"].items():
            lab = c["labels"]
            rows.append(
                [
                    Path(config).stem,
                    name + (" (chosen)" if name == chosen else ""),
                    str(c["gold_pairs"]),
                    f"{c['val_acc']:.1f}" if c.get("val_acc") is not None else "n/a",
                    ci_text(c["id_acc"], c["id_acc_ci"]),
                    f"{lab['mean_confidence']:.3f}",
                    f"{lab['ece']:.3f}" if lab.get("ece") is not None else "n/a",
                ]
            )
    return (
        "Each candidate teacher fitted on the gold pool: its accuracy (%) on the validation split, which the "
        "choice reads (the highest among candidates on the full gold pool), and on the ID test, reported but "
        "never used for the choice; its calibrated labels on the W2S pool (mean confidence, ECE against gold). "
        "The gap to the ceiling is in each run's tables below.\n\n"
        + table(
            [
                "config",
                "teacher",
                "gold pairs",
                "validation accuracy",
                "ID accuracy [95% CI]",
                "label confidence",
                "label ECE",
            ],
            rows,
        )
        + "\n\n"
        + _source("teachers")
    )


def block_gap_search() -> str:
    g = load("w2s-gap")
    bar = g["bar"]
    rows = []
    for name, st in g["settings"].items():
        seconds = st["ceiling_seconds_per_seed"]
        for teacher, r in st["teachers"].items():
            reached = "reaches the bar" if r["reaches_bar"] else "no"
            if not r["informative"]:
                reached += " (teacher not informative: its CI covers 50%)"
            rows.append(
                [
                    name,
                    ci_text(st["ceiling_val_acc"], None) + f" (seeds {', '.join(map(str, st['seeds']))})",
                    f"{sum(seconds) / len(seconds):.0f}",
                    teacher,
                    ci_text(r["teacher_val_acc"], r["teacher_val_acc_ci"]),
                    f"{r['seconds']:.0f}",
                    ci_text(r["gap"], r["gap_ci"]),
                    reached,
                ]
            )
    teacher_s = {st["source"]: sum(r["seconds"] for r in st["teachers"].values()) for st in g["settings"].values()}
    total = sum(sum(st["ceiling_seconds_per_seed"]) for st in g["settings"].values()) + sum(teacher_s.values())
    not_run = g.get("not_run") or []
    return (
        f"Each setting's ceiling and every candidate teacher scored on the source's validation split only (the ID "
        f"test and the targets were not scored). Bar: gap >= {bar['min_gap']:g} points with the 95% CI above 0 "
        f"(hierarchical: ceiling seeds, then pairs) and an informative teacher; a setting reaching it on seed 0 is "
        f"confirmed on seeds {', '.join(map(str, bar['confirm_seeds']))}. Cost: the seconds of one ceiling training "
        "(2 CPU cores, including its validation scoring) and of one teacher fit (with its cross-fitted "
        "calibration); the teachers are fitted once per source.\n\n"
        + table(
            [
                "setting (source/student)",
                "ceiling validation accuracy",
                "ceiling s / seed",
                "teacher",
                "teacher validation accuracy [95% CI]",
                "teacher s",
                "gap ceiling - teacher [95% CI]",
                "bar",
            ],
            rows,
        )
        + f"\n\nChoice ({g['choice']['where']}): **{g['choice']['chosen']}**. Compute spent: {total / 60:.0f} min "
        "(every ceiling and teacher fit above, each once)."
        + (f" Not run: {', '.join(not_run)}." if not_run else "")
        + " "
        + _source("w2s-gap")
    )


def block_gap_summary() -> str:
    """The README's line on the gap search: what was screened and what the rule chose."""
    g = load("w2s-gap")
    pairs = [r for st in g["settings"].values() for r in st["teachers"].values()]
    reached = sum(r["reaches_bar"] for r in pairs)
    return (
        f"Do these runs have a gap for a weak-to-strong method to recover? The search of docs/w2s.md (validation "
        f"only; ceiling - teacher >= {g['bar']['min_gap']:g} points with its CI above 0 and an informative teacher) "
        f"screened {len(g['settings'])} settings (source and strong student), each against every candidate teacher: "
        f"{reached} of the {len(pairs)} (setting, teacher) pairs reached the bar; choice: **{g['choice']['chosen']}**. "
        + (
            "Without a gap the verdicts above cannot test the paper, in either direction. "
            if g["choice"]["chosen"].startswith("none")
            else ""
        )
        + _source("w2s-gap")
    )


def block_anchor_scale() -> str:
    a = load("anchor-scale")
    rows = [
        [name, str(v["hidden_state_index"]), f"{v['mean_square']:.4g}", f"{v['paper_weight_normalised']:.3g}"]
        for name, v in a["layers"].items()
    ]
    return (
        f"The normaliser of the anchor term is the mean square of the reference (pretrained) states over the "
        f"response tokens; measured on the harmless W2S pool ({a['pairs']} pairs, {a['sequences']} sequences), "
        f"it turns the paper's lambda of about {PAPER_RAW_WEIGHT:g} on the raw MSE into lambda_raw x mean square "
        "on the normalised scale of the sweep:\n\n"
        + table(
            [
                "layer",
                "hidden-state index",
                "mean square of the reference states",
                f"the paper's {PAPER_RAW_WEIGHT:g}, normalised",
            ],
            rows,
        )
        + "\n\n"
        + _source("anchor-scale")
    )


def block_shift(name: str) -> str:
    """Every table of a shift run's report, from its committed metrics (the same code writes report.md)."""
    from rewardsmith.config import from_dict
    from rewardsmith.report.w2s import shift_sections
    from rewardsmith.w2s.config import ShiftConfig

    m = load(name)
    report = shift_sections(from_dict(ShiftConfig, m["config"]), m)
    parts = [report.intro] + [f"#### {sec.heading}\n\n{sec.body}" for sec in report.sections]
    return "\n\n".join(parts) + f"\n\nWall time {m['seconds'] / 60:.0f} min. " + _source(name)


def block_anchor_speed() -> str:
    a = json.loads((BENCH / "anchor.json").read_text(encoding="utf-8"))
    rows = [[m, f"{a['median_step_s'][m]:.2f}", f"{a['ratio_to_naive'][m]:.2f}"] for m in a["median_step_s"]]
    return (
        f"{a['backbone']}, {a['batch_pairs']} pairs a step, {a['max_length']} tokens, {a['dtype']}, "
        f"{a['threads']} thread, median of {a['steps']} steps:\n\n"
        + table(["method", "median step (s)", "x naive"], rows)
        + f"\n\nCache: {a['cache_mb']:.2f} MB for {a['cache_pairs']} pairs (last layer, fp16), built in "
        f"{a['cache_build_s']:.1f} s. Source: `benchmarks/results/anchor.json`; command: "
        "`OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_anchor.py`."
    )


TESTBED = "shift-testbed"


def _testbed_gap(name: str) -> dict[str, Any]:
    """GAP_SEARCH's test on the testbed run's validation margins (docs/results/pairs/<name>.npz): ceiling - teacher
    with its hierarchical CI (ceiling seeds, then pairs), the teacher's accuracy, and whether the bar is reached."""
    with np.load(RESULTS / "pairs" / f"{name}.npz", allow_pickle=False) as arrays:
        ceiling = [
            arrays[k].astype(np.float64)
            for k in sorted(arrays.files)
            if k.startswith("ceiling/") and k.endswith("/val")
        ]
        teacher = arrays["teacher/seed-1/val"].astype(np.float64)
    return gap_search_result(ceiling, teacher)


def _testbed_methods(m: dict[str, Any]) -> str:
    """Per method: validation accuracy (the choice's split), ID accuracy, PGR, WRG and AOG per target, and the
    seed-paired difference from naive on the ID test and on each target."""
    targets = m["targets"]
    names = [x for x in m["methods"] if x not in ("teacher", "ceiling")]
    rows = []
    for name in ["teacher", *names, "ceiling"]:
        r = m["methods"].get(name, {})
        val = m.get("validation", {}).get(name, {}).get("accuracy")
        vs = m.get("vs_naive", {}).get(name, {})
        rows.append(
            [
                name,
                "-" if val is None else f"{val:.1f}",
                ci_text(r.get("id_acc"), r.get("id_acc_ci")),
                *[
                    ci_text(r.get(f"pgr.{split}"), r.get(f"pgr.{split}_ci"), 2)
                    if r.get(f"pgr.{split}") is not None
                    else "-"
                    for split in ("id", *targets)
                ],
                ci_text(r.get("wrg"), r.get("wrg_ci")) if r.get("wrg") is not None else "-",
                *[
                    ci_text(r.get(f"aog.{t}"), r.get(f"aog.{t}_ci")) if r.get(f"aog.{t}") is not None else "-"
                    for t in targets
                ],
                *[
                    ci_text(vs.get(f"d.{split}"), vs.get(f"d.{split}_ci")) if vs.get(f"d.{split}") is not None else "-"
                    for split in ("id", *targets)
                ],
            ]
        )
    header = ["model", "validation acc", "ID acc [95% CI]", "PGR ID", *[f"PGR {t}" for t in targets], "WRG"]
    header += [f"AOG {t}" for t in targets]
    header += ["- naive, ID", *[f"- naive, {t}" for t in targets]]
    return table(header, rows)


def _testbed_paper_form() -> str:
    """Whether the paper's form (anchor-paper) is its naive student here (naive_agreement on the committed margins)."""
    path = RESULTS / "pairs" / f"{TESTBED}.npz"
    with np.load(path, allow_pickle=False) as arrays:
        agreement = naive_agreement({k: arrays[k] for k in arrays.files}, "anchor-paper")
    if not agreement:
        return ""
    same = "equal to naive at this scale" if equal_to_naive(agreement) else "not equal to naive"
    return (
        f"\n\nanchor-paper is {same}: its per-pair correctness differs from its same-seed naive students' on "
        f"{agreement['differing']} of {agreement['pairs']} pair predictions ({agreement['seeds']} seeds, every split), "
        f"its margins by at most {agreement['max_abs_difference']:.3f}; its row tests nothing here either."
        if equal_to_naive(agreement)
        else f"\n\nanchor-paper is {same}: its correctness differs from naive's on {agreement['differing']} of "
        f"{agreement['pairs']} pair predictions."
    )


def block_testbed_w2s() -> str:
    """docs/w2s.md's opening section: the testbed's gap on validation, then (only where it reaches the bar) the
    methods, every difference from naive paired over seeds and pairs."""
    if not (RESULTS / f"{TESTBED}.json").exists():
        return f"Not run yet: no `docs/results/{TESTBED}.json` (`python experiments/testbed.py w2s`)."
    m = load(TESTBED)
    gap = _testbed_gap(TESTBED)
    sizes = m["sizes"]
    val = m.get("validation", {})
    ceiling_val = val.get("ceiling", {}).get("accuracy")
    verdict = "**reaches the bar**" if gap["reaches_bar"] else "**does not reach the bar**"
    head = (
        f"Every label here is the testbed gold's (docs/testbed.md): the weak teacher is MiniLM on {sizes['gold']} of "
        f"the gold's labels of the source (HH-RLHF prompts, the policy's own completions), the students and the "
        f"ceiling MiniLM on the {sizes['w2s']}-pair W2S pool (the teacher's labels; the gold's for the ceiling), the "
        f"target the same gold's labels of UltraFeedback and HelpSteer2 prompts (a preference shift inside one gold). "
        f"The gap was checked on the source's {sizes['val']} validation pairs before any method was compared "
        f"(GAP_SEARCH's bar: ceiling - teacher >= {MIN_TEACHER_GAP:g} points with its 95% CI above 0 over seeds "
        f"{', '.join(map(str, m['seeds']))} and pairs, and a teacher whose CI lies above 50%).\n\n"
        + table(
            ["split", "teacher [95% CI]", "ceiling (mean over seeds)", "ceiling - teacher [95% CI]", "bar"],
            [
                [
                    "validation",
                    ci_text(gap["teacher_val_acc"], gap["teacher_val_acc_ci"]),
                    "-" if ceiling_val is None else f"{ceiling_val:.1f}",
                    ci_text(gap["gap"], gap["gap_ci"]),
                    verdict,
                ]
            ],
        )
    )
    if not gap["reaches_bar"]:
        return head + "\n\nWithout the gap the methods are not compared here. " + _source(TESTBED)
    anchor = m.get("claim_statistics", {}).get("anchor", {}).get("method")
    grid = next((sel["candidates"] for sel in m.get("anchor_selection", []) if sel.get("normalise")), {})
    edge = (
        f" ({', '.join(f'{k} {v:.1f}' for k, v in grid.items())} on validation: the largest strength of the grid "
        "declared in the config, so a stronger one was not tried)"
        if grid and anchor == list(grid)[-1]
        else ""
    )
    results = paper_claims(m) + own_claims(m)
    return (
        head
        + f"\n\nThe methods (accuracies in %, points; 95% CIs over seeds {', '.join(map(str, m['seeds']))} and pairs; "
        "every difference from naive paired over seeds and pairs; PGR = (student - teacher) / (ceiling - teacher) "
        f"on each split; ANCHOR's normalised strength chosen on validation: {anchor}{edge}; anchor-paper is the "
        f"paper's form, lambda {PAPER_RAW_WEIGHT:g} on the raw MSE, no choice):\n\n"
        + _testbed_methods(m)
        + _testbed_paper_form()
        + "\n\nThe paper's claims and the project's own questions on this run (the paper's ANCHOR - naive: "
        + f"{ANCHOR_GAIN_FIGURE}):\n\n"
        + table(CLAIM_HEADER, [claim_row(r) for r in results])
        + "\n\n"
        + _source(TESTBED)
    )


def block_testbed_w2s_summary() -> str:
    """The README's line on weak-to-strong inside the testbed: the gap on validation and, where it reaches the bar,
    ANCHOR (both forms) against naive out of distribution."""
    if not (RESULTS / f"{TESTBED}.json").exists():
        return f"Inside the synthetic-gold testbed: not run yet (no `docs/results/{TESTBED}.json`)."
    m = load(TESTBED)
    gap = _testbed_gap(TESTBED)
    text = (
        f"Inside the synthetic-gold testbed (docs/w2s.md's first section) the gap exists by construction: ceiling - "
        f"teacher on validation {ci_text(gap['gap'], gap['gap_ci'])} points, which "
        + ("reaches" if gap["reaches_bar"] else "does not reach")
        + f" the {MIN_TEACHER_GAP:g}-point bar. "
    )
    if gap["reaches_bar"]:
        anchor = m.get("claim_statistics", {}).get("anchor", {}).get("method")
        vs = m.get("vs_naive", {})
        parts = []
        for method in [x for x in (anchor, "anchor-paper") if x and x in vs]:
            diffs = "; ".join(
                f"{t} {ci_text(vs[method].get(f'd.{t}'), vs[method].get(f'd.{t}_ci'))}" for t in m["targets"]
            )
            parts.append(f"{method} - naive: {diffs}")
        text += "ANCHOR against naive out of distribution (points, seed-paired 95% CIs): " + "; ".join(parts) + ". "
    return text + _source(TESTBED)


def render_shift(name: str) -> str | None:
    """A `shift-<name>` block, or None when `name` is not one."""
    if not name.startswith("shift-"):
        return None
    if not (RESULTS / f"{name}.json").exists():
        return f"Not run yet: no `docs/results/{name}.json`."
    return block_shift(name)


BLOCKS: dict[str, Callable[[], str]] = {
    "w2s-claims": block_claims_summary,
    "w2s-claim-table": block_claim_table,
    "w2s-choices": block_choices,
    "teachers": block_teachers,
    "anchor-scale": block_anchor_scale,
    "w2s-gap": block_gap_search,
    "w2s-gap-summary": block_gap_summary,
    "anchor-speed": block_anchor_speed,
    "w2s-testbed": block_testbed_w2s,
    "w2s-testbed-summary": block_testbed_w2s_summary,
}
FAMILIES: tuple[Callable[[str], str | None], ...] = (render_shift,)
