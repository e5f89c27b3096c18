"""Searching for a weak-to-strong setting with a gap to recover, on the validation split only.

    .venv/bin/python experiments/w2s_gap.py run [--only SETTING ...] [--seeds 0 1 2]
    .venv/bin/python experiments/w2s_gap.py summarise

A setting is a source (the protocol's split of configs/shift-harmless.yaml or configs/shift-helpful.yaml), a strong
student and a weak teacher. For each source and student the ceiling (the student trained on the gold labels of the
W2S pool, exactly as `rewardsmith shift` trains it) is scored on the validation split, and so is every teacher of
experiments/teachers.py fitted on the gold pool. The ID test and the targets are never scored here: the search reads
validation only, so the claim tables later run in the chosen setting report data the search never saw.

The rule is rewardsmith.w2s.claims.GAP_SEARCH, committed in d29dc06 together with the results of the first two settings
it screened (MiniLM at 128 tokens on harmless and helpful, seed 0; the other three settings' results came after it, in
163b95d), its 8-point bar older (27574e0, written after earlier ceiling-minus-teacher gaps had been seen): a setting
reaches the bar when its gap (ceiling - teacher, validation) is at least MIN_TEACHER_GAP points with its 95%
hierarchical CI (ceiling seeds, then pairs) above 0 and the teacher's own validation CI lies above 50%; a setting
screened on seed 0 that reaches it is confirmed on seeds 0-2 (`run` does that itself). Each setting's cost (seconds per
ceiling, per teacher) is recorded, so the search can be read as what it cost. Runs go to runs/w2s-gap/; the summary to
docs/results/w2s-gap.json (tools/blocks_w2s.py renders it in docs/w2s.md).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from teachers import candidate_setup, candidates  # experiments/teachers.py: the protocol's teacher screening

from rewardsmith.config import ModelConfig, load_yaml
from rewardsmith.evaluate.metrics import pairwise_accuracy
from rewardsmith.w2s.claim_results import gap_search_result
from rewardsmith.w2s.claims import GAP_SEARCH, MIN_TEACHER_GAP
from rewardsmith.w2s.config import ShiftConfig
from rewardsmith.w2s.metrics import VAL_SPLIT
from rewardsmith.w2s.pipeline import ShiftData, ShiftRun, shift_data

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "w2s-gap"
OUT = ROOT / "docs" / "results" / "w2s-gap.json"
SOURCES = {"harmless": "configs/shift-harmless.yaml", "helpful": "configs/shift-helpful.yaml"}
CONFIRM_SEEDS = (0, 1, 2)
N_BOOT = 2000


@dataclass(frozen=True)
class Student:
    what: str
    model: ModelConfig
    train: dict[str, Any]  # overrides of the source config's train section


STUDENTS = {
    "minilm-128": Student(
        "MiniLM-L6 (22M), 128 tokens, 1 epoch: the protocol's student",
        ModelConfig(backbone="minilm", template="hh", max_length=128),
        {},
    ),
    "minilm-256-2ep": Student(
        "MiniLM-L6 (22M), 256 tokens, 2 epochs",
        ModelConfig(backbone="minilm", template="hh", max_length=256),
        {"epochs": 2.0},
    ),
    "smollm2-128": Student(
        "SmolLM2-135M-Instruct, full fine-tuning, its chat template, last-token pooling, 128 tokens, 1 epoch",
        ModelConfig(backbone="smollm2", template="chat", max_length=128),
        {"batch_size": 16, "lr": 1e-5, "head_lr": 1e-4},
    ),
}
# (source, student), cheapest first: the order the rule breaks ties in.
SETTINGS = (
    ("harmless", "minilm-128"),
    ("helpful", "minilm-128"),
    ("harmless", "minilm-256-2ep"),
    ("harmless", "smollm2-128"),
    ("helpful", "smollm2-128"),
)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def setting_name(source: str, student: str) -> str:
    return f"{source}/{student}"


def source_data(source: str) -> tuple[ShiftConfig, ShiftData]:
    """The source's config and its protocol split with nothing scored but validation."""
    cfg = load_yaml(ShiftConfig, ROOT / SOURCES[source])
    data = shift_data(cfg)
    return cfg, replace(data, eval={})


def teacher_rows(source: str, cfg: ShiftConfig, data: ShiftData) -> dict[str, Any]:
    """Every candidate teacher fitted on the gold pool (cached per source): validation margins and cost."""
    rows: dict[str, Any] = {}
    for name, (teacher, gold_pairs) in candidates().items():
        cand, cand_data = candidate_setup(cfg, data, teacher, gold_pairs)
        run = ShiftRun(cand, RUNS / source / "teachers" / slug(name), cand_data, progress=False)
        _, margins, facts = run.teacher()
        rows[name] = {"gold_pairs": len(cand_data.gold), "margins": margins[VAL_SPLIT], "seconds": facts["seconds"]}
    return rows


def ceiling_margins(
    source: str, student: str, cfg: ShiftConfig, data: ShiftData, seed: int
) -> tuple[np.ndarray, float]:
    """Validation margins of the ceiling of (source, student) at `seed` and its training seconds (cached)."""
    s = STUDENTS[student]
    run_cfg = replace(cfg, student=s.model, train=replace(cfg.train, **s.train), seeds=[seed])
    run = ShiftRun(run_cfg, RUNS / source / slug(student), data, progress=True)
    margins = run.student(cfg.methods[0], seed, np.ones(len(data.w2s)), gold=True)
    facts = json.loads((run.out / f"seed{seed}" / cfg.methods[0].name / "train.json").read_text(encoding="utf-8"))
    return margins[VAL_SPLIT], float(facts["seconds_total"])


def run_setting(source: str, student: str, seeds: list[int]) -> dict[str, Any]:
    cfg, data = source_data(source)
    teachers = teacher_rows(source, cfg, data)
    ceilings, seconds = {}, {}
    for seed in seeds:
        ceilings[seed], seconds[seed] = ceiling_margins(source, student, cfg, data, seed)
    rows = {
        name: {
            **gap_search_result(list(ceilings.values()), t["margins"], N_BOOT),
            "gold_pairs": t["gold_pairs"],
            "seconds": t["seconds"],
        }
        for name, t in teachers.items()
    }
    if len(seeds) == 1 and any(r["reaches_bar"] for r in rows.values()):  # screened on one seed: confirm on 0-2
        return run_setting(source, student, list(CONFIRM_SEEDS))
    per_seed = [round(pairwise_accuracy(ceilings[s], n_boot=0).estimate, 2) for s in seeds]
    return {
        "source": cfg.source.label,
        "student": STUDENTS[student].what,
        "sizes": data.sizes(),
        "seeds": seeds,
        "ceiling_val_acc": round(float(np.mean(per_seed)), 2),
        "ceiling_val_acc_per_seed": per_seed,
        "ceiling_seconds_per_seed": [round(seconds[s], 1) for s in seeds],
        "teachers": rows,
    }


def choose(settings: dict[str, Any]) -> dict[str, Any]:
    """GAP_SEARCH applied: among (setting, teacher) pairs reaching the bar over seeds 0-2, the most accurate teacher
    on validation, the first listed on a tie; none: the protocol's setting stays."""
    # Ties on accuracy go to the setting listed first, then to its teacher listed first (-i, -j), never to a name.
    passing = [
        (row["teacher_val_acc"], -i, -j, name, teacher)
        for i, (name, s) in enumerate(settings.items())
        for j, (teacher, row) in enumerate(s["teachers"].items())
        if row["reaches_bar"] and len(s["seeds"]) >= len(CONFIRM_SEEDS)
    ]
    evidence = {name: {t: [r["gap"], r["gap_ci"]] for t, r in s["teachers"].items()} for name, s in settings.items()}
    if not passing:
        return GAP_SEARCH.made("none reaches the bar: the protocol's setting stays", {"gap_and_ci": evidence})
    *_, name, teacher = max(passing)
    return GAP_SEARCH.made(f"{name} with teacher {teacher}", {"gap_and_ci": evidence})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("run", "summarise"))
    parser.add_argument("--only", nargs="*", help="settings (source/student) to run; default all")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="ceiling seeds to screen on")
    args = parser.parse_args()
    results: dict[str, Any] = json.loads(OUT.read_text(encoding="utf-8"))["settings"] if OUT.exists() else {}
    if args.action == "run":
        for source, student in SETTINGS:
            name = setting_name(source, student)
            if args.only and name not in args.only:
                continue
            results[name] = run_setting(source, student, sorted(args.seeds))
            best = max(results[name]["teachers"].items(), key=lambda kv: kv[1]["gap"])
            print(
                f"{name}: ceiling {results[name]['ceiling_val_acc']} (seeds {results[name]['seeds']}); "
                f"largest gap {best[1]['gap']} {best[1]['gap_ci']} against {best[0]}",
                flush=True,
            )
            write(results)
    write(results)


def write(results: dict[str, Any]) -> None:
    ordered = {setting_name(*k): results[setting_name(*k)] for k in SETTINGS if setting_name(*k) in results}
    not_run = [setting_name(*k) for k in SETTINGS if setting_name(*k) not in results]
    out = {
        "command": "python experiments/w2s_gap.py run --seeds 0",
        "bar": {"min_gap": MIN_TEACHER_GAP, "confirm_seeds": list(CONFIRM_SEEDS), "split": VAL_SPLIT},
        "settings": ordered,
        "not_run": not_run,
        "choice": choose(ordered),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
