"""Screening and choosing the weak teacher of the weak-to-strong runs, on the validation split only.

    .venv/bin/python experiments/teachers.py configs/shift-harmless.yaml configs/shift-helpful.yaml [--ceiling]

For every config and candidate: the teacher is fitted on the gold pool exactly as `rewardsmith shift` fits it (soft
labels calibrated by a cross-fitted temperature), then its accuracy on the validation split (the choice reads this), on
the ID test (95% bootstrap CI over pairs; reported, never used for the choice), and its labels' accuracy, mean
confidence and ECE on the W2S pool against gold. The choice follows the rule of rewardsmith.w2s.claims.TEACHER_CHOICE
(committed in 54c35d4 with the screening results it was applied to, after an earlier screening, b0bd3cf, had reported
the candidates' ID accuracies; not a rule declared before any result): the highest validation accuracy among the
candidates fitted on the protocol's full gold pool (ties: the one listed first); it is recorded per config under
`choice`, and the shift configs use that teacher. With --ceiling, the strong ceiling of seed 0 is trained too and the
gap ceiling - teacher on the ID test gets a paired bootstrap CI (a description; the shift runs report the gap
themselves). Writes docs/results/teachers.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.config import ModelConfig, TrainConfig, load_yaml
from rewardsmith.evaluate.metrics import pairwise_accuracy
from rewardsmith.evaluate.transfer import paired_differences
from rewardsmith.w2s.claims import TEACHER_CHOICE
from rewardsmith.w2s.config import ShiftConfig, TeacherConfig, TfidfSettings
from rewardsmith.w2s.metrics import ID_SPLIT, VAL_SPLIT, teacher_label_stats
from rewardsmith.w2s.pipeline import ShiftData, ShiftRun, shift_data

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "docs" / "results" / "teachers.json"
CACHE = ROOT / "runs" / "teachers"
PROBE_TRAIN = TrainConfig(epochs=4, batch_size=16, lr=1e-2, head_lr=1e-2, checkpoint_every=0, progress=False)


def candidates() -> dict[str, tuple[TeacherConfig, int | None]]:
    """(teacher, gold pairs or None for the config's) of the families screened: TF-IDF logistic models on
    more or fewer gold pairs, frozen MiniLM probes, a fine-tuned 1-layer MiniLM."""
    tfidf = TeacherConfig(kind="tfidf", tfidf=TfidfSettings(c=1.0))
    return {
        "tfidf (C 1, 1-2 grams)": (tfidf, None),
        "tfidf (C 0.1, 1-2 grams)": (TeacherConfig(kind="tfidf", tfidf=TfidfSettings(c=0.1)), None),
        "tfidf (C 1), 100 gold pairs": (tfidf, 100),
        "tfidf (C 1), 50 gold pairs": (tfidf, 50),
        "probe: frozen MiniLM, 1 layer, mean": (
            TeacherConfig(
                model=ModelConfig(backbone="minilm", template="hh", num_layers=1, freeze_backbone=True, max_length=128),
                train=PROBE_TRAIN,
            ),
            None,
        ),
        "probe: frozen MiniLM, 1 layer, [CLS]": (
            TeacherConfig(
                model=ModelConfig(
                    backbone="minilm", template="hh", num_layers=1, freeze_backbone=True, pooling="cls", max_length=128
                ),
                train=PROBE_TRAIN,
            ),
            None,
        ),
        "fine-tuned MiniLM, 1 layer": (
            TeacherConfig(
                model=ModelConfig(backbone="minilm", template="hh", num_layers=1, max_length=128),
                train=TrainConfig(epochs=2, batch_size=16, lr=1e-4, head_lr=1e-3, checkpoint_every=0, progress=False),
            ),
            None,
        ),
    }


def _correct(margins: np.ndarray) -> np.ndarray:
    return np.where(margins > 0, 1.0, np.where(margins == 0, 0.5, 0.0))


def candidate_setup(
    cfg: ShiftConfig, data: ShiftData, teacher: TeacherConfig, gold_pairs: int | None
) -> tuple[ShiftConfig, ShiftData]:
    """The config and data a candidate teacher is fitted with: the config's gold pool, or a smaller one of
    `gold_pairs` (the same stable-hash sample, capped lower)."""
    if gold_pairs is None:
        return replace(cfg, teacher=teacher), data
    cand = replace(cfg, teacher=teacher, split=replace(cfg.split, gold_pairs=gold_pairs))
    return cand, replace(data, gold=shift_data(cand).gold)


def screen(config_path: Path, with_ceiling: bool, names: list[str] | None) -> dict[str, Any]:
    cfg = load_yaml(ShiftConfig, config_path)
    data = shift_data(cfg)
    rows: dict[str, Any] = {}
    ceiling_margins = None
    if with_ceiling:  # cached under runs/teachers/<config>: the ceiling depends on the W2S pool only
        run = ShiftRun(replace(cfg, seeds=[0]), CACHE / config_path.stem / "ceiling", data, progress=False)
        ceiling_margins = run.student(cfg.methods[0], 0, np.ones(len(data.w2s)), gold=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (teacher, gold_pairs) in candidates().items():
            if names and name not in names:
                continue
            cand, cand_data = candidate_setup(cfg, data, teacher, gold_pairs)
            run = ShiftRun(cand, Path(tmp) / f"t{len(rows)}", cand_data, progress=False)
            labels, margins, facts = run.teacher()
            acc = pairwise_accuracy(margins[ID_SPLIT])
            row: dict[str, Any] = {
                "gold_pairs": len(cand_data.gold),
                "id_acc": round(acc.estimate, 2),
                "id_acc_ci": [round(x, 2) for x in acc.ci],
                "labels_raw": facts["raw_label_stats"],
                "labels": teacher_label_stats(labels),
                "temperature": facts.get("temperature"),
                "seconds": facts.get("seconds"),
            }
            if VAL_SPLIT in margins:
                row["val_acc"] = round(pairwise_accuracy(margins[VAL_SPLIT], n_boot=0).estimate, 2)
            if ceiling_margins is not None:
                gap = paired_differences(
                    {
                        "ceiling": {ID_SPLIT: _correct(ceiling_margins[ID_SPLIT])},
                        "teacher": {ID_SPLIT: _correct(margins[ID_SPLIT])},
                    },
                    "teacher",
                )
                row["gap_id"] = round(gap["ceiling"][f"d.{ID_SPLIT}"], 2)
                row["gap_id_ci"] = [round(x, 2) for x in gap["ceiling"][f"d.{ID_SPLIT}_ci"]]
            rows[name] = row
            print(
                f"{config_path.name} | {name}: validation {row.get('val_acc')}, ID {row['id_acc']} {row['id_acc_ci']}"
                + (f", gap {row['gap_id']} {row['gap_id_ci']}" if "gap_id" in row else ""),
                flush=True,
            )
    out: dict[str, Any] = {"sizes": data.sizes(), "candidates": rows, "choice": choose(rows)}
    if ceiling_margins is not None:
        acc = pairwise_accuracy(ceiling_margins[ID_SPLIT])
        out["ceiling_seed0_id_acc"] = round(acc.estimate, 2)
        out["ceiling_seed0_id_acc_ci"] = [round(x, 2) for x in acc.ci]
    return out


def choose(rows: dict[str, Any]) -> dict[str, Any]:
    """TEACHER_CHOICE applied: the eligible candidate (full gold pool) with the highest validation accuracy, the
    first listed on a tie; the validation accuracies it was made on are recorded with it."""
    full = max(r["gold_pairs"] for r in rows.values())
    eligible = {name: r["val_acc"] for name, r in rows.items() if r["gold_pairs"] == full and "val_acc" in r}
    if not eligible:
        raise SystemExit("no candidate has a validation accuracy: the config needs split.val_fraction > 0")
    best = max(eligible.values())
    chosen = next(name for name, acc in eligible.items() if acc == best)
    return TEACHER_CHOICE.made(chosen, {"validation_accuracy": eligible, "gold_pairs": full})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--ceiling", action="store_true", help="also train seed 0's ceiling for the gap")
    parser.add_argument("--only", nargs="*", help="candidate names to screen (default: all)")
    args = parser.parse_args()
    result = {
        "command": "python experiments/teachers.py "
        + " ".join(str(c) for c in args.configs)
        + (" --ceiling" if args.ceiling else ""),
        "configs": {str(c): screen(c, args.ceiling, args.only) for c in args.configs},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
