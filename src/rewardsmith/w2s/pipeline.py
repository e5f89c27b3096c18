"""The weak-to-strong shift pipeline (METHODS.md section 1).

run_shift(config, out_dir):
1. split the source by a hash of the first human turn into gold pool A, W2S pool B and ID test;
2. train the weak teacher on A (gold labels);
3. label B with the teacher's probabilities q_i = sigmoid(r(chosen) - r(rejected)); q and the teacher's
   margins on every evaluation split are written to teacher/ and reused by every method and seed;
4. per seed and method, train a student from the pretrained checkpoint on B with q (after the method's
   label refiner, if any) under the method's objective; the ceiling trains on B with gold labels;
5. score teacher, students and ceiling on the ID test and every target, then compute accuracy, WRG, AOG,
   NTS and PGR with hierarchical bootstrap CIs (rewardsmith.w2s.metrics). The job (rewardsmith.jobs.shift)
   writes metrics.json and the report.

Targets lose every pair whose conversation (first human turn) appears in the gold or W2S pool.

Every finished model leaves margins.npz in its folder; a rerun with the same --out skips it, and an
interrupted training resumes from the trainer's checkpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.config import ModelConfig, TrainConfig, to_dict
from rewardsmith.data.collate import encode_pairs
from rewardsmith.data.prepare import DataPlan, Part, prepare_data
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.templates import encoder_for
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.evaluate.scoring import RewardScorer
from rewardsmith.io.atomic import atomic_write_bytes, atomic_write_json
from rewardsmith.models.backbone import num_hidden_layers
from rewardsmith.models.factory import build_reward_model, save_model
from rewardsmith.models.reward_model import RewardModel
from rewardsmith.train.objectives import BradleyTerryObjective, Objective
from rewardsmith.train.trainer import train_pairs
from rewardsmith.w2s.config import AnchorSettings, ConfidenceSettings, MethodConfig, SeamSettings, ShiftConfig
from rewardsmith.w2s.metrics import CEILING, ID_SPLIT, TEACHER, VAL_SPLIT, compute_metrics, teacher_label_stats
from rewardsmith.w2s.objectives import StudentContext, w2s_objective, w2s_objectives
from rewardsmith.w2s.reference import (
    ReferenceStateCache,
)
from rewardsmith.w2s.refiners import LABEL_REFINERS
from rewardsmith.w2s.teachers import FitAndScore, calibrate_labels, cross_fitted_temperature, tfidf_fit_and_score


@dataclass
class ShiftData:
    gold: list[PreferencePair]
    w2s: list[PreferencePair]
    eval: dict[str, list[PreferencePair]]  # "id" and each target name
    overlap_removed: dict[str, int] = field(default_factory=dict)  # target -> pairs dropped (seen in training)
    val: list[PreferencePair] = field(default_factory=list)  # ID validation: for choosing settings, never reported

    def sizes(self) -> dict[str, int]:
        return {
            "gold": len(self.gold),
            "w2s": len(self.w2s),
            **({"val": len(self.val)} if self.val else {}),
            **{k: len(v) for k, v in self.eval.items()},
        }


def apply_quick(config: ShiftConfig) -> ShiftConfig:
    """A copy of `config` with the --quick sizes (config.quick) filled in."""
    q = config.quick
    split = replace(
        config.split,
        gold_pairs=q.gold_pairs,
        w2s_pairs=q.w2s_pairs,
        id_pairs=q.id_pairs,
        target_pairs=q.target_pairs,
    )
    if config.split.val_fraction > 0:
        split = replace(split, val_pairs=q.id_pairs)
    teacher = replace(config.teacher, model=replace(config.teacher.model, max_length=q.max_length))
    return replace(
        config,
        split=split,
        teacher=teacher,
        seeds=list(q.seeds),
        student=replace(config.student, max_length=q.max_length),
        eval=replace(config.eval, n_boot=q.n_boot),
    )


def shift_data(config: ShiftConfig, data_dir: str | Path | None = None) -> ShiftData:
    """The source split into gold pool, W2S pool, ID test and validation (each a stable-hash sample of its cap) and
    every target cleaned of the pools' conversations, then sampled to split.target_pairs (data.prepare)."""
    s = config.split
    parts = {
        "gold": Part(s.gold_fraction, s.gold_pairs),
        "w2s": Part(s.w2s_fraction, s.w2s_pairs),
        "id": Part(s.id_fraction, s.id_pairs),
        "val": Part(s.val_fraction, s.val_pairs),
    }
    plan = DataPlan(
        config.source,
        parts,
        salt=s.salt,
        sampling="hash",
        training=("gold", "w2s"),
        seen_from="sampled",
        evals=config.targets,
        eval_cap=s.target_pairs,
    )
    if any(t.label == ID_SPLIT for t in config.targets):
        raise ConfigError(f"target {ID_SPLIT!r} listed twice")
    data = prepare_data(plan, data_dir or config.data_dir)
    gold, w2s, id_test, val = (data.parts[k] for k in ("gold", "w2s", "id", "val"))
    if not gold or not w2s or not id_test:
        raise DataError(
            f"{config.source.name}: too few pairs to split (gold {len(gold)}, W2S {len(w2s)}, ID {len(id_test)})"
        )
    for target in config.targets:
        if not data.evals[target.label]:
            read = data.summaries[target.label]["pairs"]
            raise DataError(
                f"target {target.label}: no pairs left ({read} read, every one shares a conversation with training)"
            )
    return ShiftData(gold, w2s, {ID_SPLIT: id_test, **data.evals}, data.overlap_removed, val)


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    atomic_write_bytes(path, lambda fh: np.savez(fh, **arrays))  # type: ignore[arg-type]


class ShiftRun:
    """One run folder: the data, the teacher's cached labels and margins, and each student."""

    def __init__(self, config: ShiftConfig, out_dir: str | Path, data: ShiftData, progress: bool = True):
        self.config = config
        self.out = Path(out_dir)
        self.data = data
        self.progress = progress
        self._caches: dict[tuple[int, ...], ReferenceStateCache] = {}
        self._features: np.ndarray | None = None
        self.timings: dict[str, float] = {}

    # -- shared pieces ----------------------------------------------------------------------------------
    def _splits(self) -> dict[str, list[PreferencePair]]:
        """Every scored split: the ID test, each target and, when configured, the validation split."""
        return {**self.data.eval, **({VAL_SPLIT: self.data.val} if self.data.val else {})}

    def _score(self, model: RewardModel, tokenizer: Any, model_cfg: ModelConfig) -> dict[str, np.ndarray]:
        ev = self.config.eval
        out = {}
        for split, pairs in self._splits().items():
            chosen, rejected = RewardScorer.for_model(model, tokenizer, model_cfg, ev.batch_size, ev.bf16).score_pairs(
                pairs
            )
            out[split] = chosen - rejected
        return out

    def _train(
        self,
        model_cfg: ModelConfig,
        train_cfg: TrainConfig,
        pairs: list[PreferencePair],
        seed: int,
        run_dir: Path,
        make_objective: Any,
    ) -> tuple[RewardModel, Any, dict[str, Any]]:
        model, tokenizer = build_reward_model(model_cfg, seed)
        encoder = encoder_for(tokenizer, model_cfg)
        encoded = encode_pairs(encoder, pairs)
        objective: Objective = make_objective(model, tokenizer, encoded)
        cfg = replace(train_cfg, seed=seed, progress=self.progress)
        trainer = train_pairs(model, tokenizer, pairs, cfg, model_cfg, run_dir, objective=objective, encoded=encoded)
        return trainer.model, tokenizer, {**asdict(trainer.result), "truncated": dict(encoder.counts)}

    # -- teacher -------------------------------------------------------------------------------------------
    def teacher(self) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
        """(soft labels q on the W2S pool (N,), teacher margins per scored split, facts about the labels), fitted
        once and cached on disk. With teacher.calibrate, q = sigmoid(m / T) with T cross-fitted on the gold pool."""
        folder = self.out / TEACHER
        path = folder / "margins.npz"
        if path.exists():
            saved = np.load(path)
            facts = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
            margins = {k[len("eval:") :]: saved[k] for k in saved.files if k.startswith("eval:")}
            return saved["w2s_labels"], margins, facts
        t = self.config.teacher
        t0 = time.perf_counter()
        fit_and_score = self._teacher_fit_and_score(folder)
        scored = self._splits()
        names = ["w2s", *scored]
        flat = [*self.data.w2s, *[p for pairs in scored.values() for p in pairs]]
        all_margins = fit_and_score(self.data.gold, flat)
        sizes = [len(self.data.w2s), *[len(v) for v in scored.values()]]
        pieces = np.split(all_margins, np.cumsum(sizes)[:-1])
        by_name = dict(zip(names, pieces, strict=True))
        w2s_margins = by_name.pop("w2s")
        if t.calibrate:
            temperature, oof = cross_fitted_temperature(self.data.gold, fit_and_score, t.calibration_folds, t.seed)
        else:
            temperature, oof = 1.0, fit_and_score(self.data.gold, self.data.gold)
        labels = calibrate_labels(w2s_margins, temperature, oof)
        facts = {
            **labels.facts,
            "kind": t.kind,
            "raw_label_stats": teacher_label_stats(labels.raw_labels),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        _save_npz(path, {"w2s_labels": labels.labels, **{f"eval:{k}": v for k, v in by_name.items()}})
        atomic_write_json(folder / "labels.json", facts)
        return labels.labels, by_name, facts

    def _teacher_fit_and_score(self, folder: Path) -> FitAndScore:
        """fit(gold) then margins(pairs) for the configured teacher kind (each call fits afresh; a model teacher
        trains into its own sub-folder, so cross-fitting folds and the final teacher never share a run)."""
        t = self.config.teacher
        if t.kind == "tfidf":
            return tfidf_fit_and_score(t.tfidf)
        calls = {"n": 0}

        def fit_and_score(gold: Sequence[PreferencePair], pairs: Sequence[PreferencePair]) -> np.ndarray:
            run = folder / ("model" if calls["n"] == 0 else f"fold{calls['n']}")
            calls["n"] += 1
            model, tokenizer, _ = self._train(
                t.model, t.train, list(gold), t.seed, run, lambda *_: BradleyTerryObjective()
            )
            chosen, rejected = RewardScorer.for_model(
                model, tokenizer, t.model, self.config.eval.batch_size, self.config.eval.bf16
            ).score_pairs(list(pairs))
            return chosen - rejected

        return fit_and_score

    # -- reference states and strong features ---------------------------------------------------------------
    def _pretrained_student(self) -> tuple[RewardModel, Any]:
        return build_reward_model(self.config.student, 0)

    def reference_cache(self, layers: list[int], on_disk: bool, encoded: list[Any], pad_id: int) -> ReferenceStateCache:
        key = tuple(layers)
        if key not in self._caches:
            model, _ = self._pretrained_student()
            t0 = time.perf_counter()
            path = self.out / "cache" / ("reference-L" + "-".join(map(str, layers))) if on_disk else None
            self._caches[key] = ReferenceStateCache.build(model, encoded, layers, pad_id, path=path)
            self.timings[f"reference_cache_L{'-'.join(map(str, layers))}_s"] = time.perf_counter() - t0
        return self._caches[key]

    def strong_features(self) -> np.ndarray:
        """(N, 2, H) mean-pooled response representations of the pretrained student on the W2S pool."""
        if self._features is None:
            path = self.out / "cache" / "strong-features.npy"
            if path.exists():
                self._features = np.load(path)
            else:
                model, tokenizer = self._pretrained_student()
                encoder = encoder_for(tokenizer, self.config.student)
                encoded = encode_pairs(encoder, self.data.w2s)
                n = num_hidden_layers(model.backbone)
                cache = ReferenceStateCache.build(model, encoded, [n], int(tokenizer.pad_token_id))
                assert cache.pooled is not None
                features = cache.pooled
                atomic_write_bytes(path, lambda fh: np.save(fh, features))
                self._features = features
        return self._features

    def method_labels(self, method: MethodConfig, teacher_labels: np.ndarray) -> np.ndarray:
        if method.refiner == "none":
            return teacher_labels
        refine = LABEL_REFINERS.get(method.refiner)
        return np.asarray(refine(teacher_labels, self.strong_features(), method.seam), dtype=np.float64)

    def _objective(self, method: MethodConfig, model: RewardModel, tokenizer: Any, encoded: list[Any]) -> Objective:
        return w2s_objective(method.objective).build(method, StudentContext(self, model, tokenizer, encoded))

    # -- students -------------------------------------------------------------------------------------------
    def student(
        self, method: MethodConfig, seed: int, teacher_labels: np.ndarray, gold: bool = False
    ) -> dict[str, np.ndarray]:
        """Margins per eval split of the student of `method` at `seed` (gold: the ceiling, on gold labels)."""
        folder = self.out / f"seed{seed}" / method.name
        path = folder / "margins.npz"
        if path.exists():
            saved = np.load(path)
            return {k: saved[k] for k in saved.files}
        labels = np.ones(len(self.data.w2s)) if gold else self.method_labels(method, teacher_labels)
        pairs = [p.with_label(float(q)) for p, q in zip(self.data.w2s, labels, strict=True)]
        t0 = time.perf_counter()
        train_cfg = self.config.train
        if method.debias != "inherit":
            train_cfg = replace(train_cfg, debias=replace(train_cfg.debias, kind=method.debias))
        model, tokenizer, result = self._train(
            self.config.student,
            train_cfg,
            pairs,
            seed,
            folder,
            lambda m, tok, enc: self._objective(method, m, tok, enc),
        )
        margins = self._score(model, tokenizer, self.config.student)
        if self.config.save_students:
            save_model(model, tokenizer, folder / "model", self.config.student)
        _save_npz(path, margins)
        atomic_write_json(
            folder / "train.json",
            {**result, "labels_mean": float(np.mean(labels)), "seconds_total": time.perf_counter() - t0},
        )
        return margins


def check_methods(config: ShiftConfig) -> None:
    """Method names unique and not teacher / ceiling; settings given only for the method's own objective."""
    names = [m.name for m in config.methods]
    if len(set(names)) != len(names) or TEACHER in names or CEILING in names:
        raise ConfigError(f"method names must be unique and not {TEACHER!r} or {CEILING!r}: {names}")
    known = w2s_objectives()
    for m in config.methods:
        if m.objective not in known:
            raise ConfigError(f"method {m.name}: unknown objective {m.objective!r}; known: {', '.join(sorted(known))}")
        for objective, key, default in (
            ("anchor", "anchor", AnchorSettings()),
            ("confidence", "confidence", ConfidenceSettings()),
        ):
            if m.objective != objective and getattr(m, key) != default:
                raise ConfigError(f"method {m.name}: `{key}` settings are given but its objective is {m.objective}")
        if m.refiner != "seam" and m.seam != SeamSettings():
            raise ConfigError(f"method {m.name}: `seam` settings are given but its refiner is {m.refiner}")


def resolve_config(
    config: ShiftConfig, *, quick: bool = False, data_dir: str | Path | None = None, seeds: list[int] | None = None
) -> ShiftConfig:
    """The config a run actually uses: --quick sizes, --seeds and --data-dir applied, methods checked."""
    if quick:
        config = apply_quick(config)
    if seeds:
        config = replace(config, seeds=list(seeds))
    if data_dir is not None:
        config = replace(config, data_dir=str(data_dir))
    check_methods(config)
    return config


def run_shift(
    config: ShiftConfig,
    out_dir: str | Path,
    *,
    progress: bool = True,
    data: ShiftData | None = None,
    train: bool = True,
) -> tuple[dict[str, Any], ShiftData]:
    """Runs the W2S shift protocol of a resolved config into out_dir (teacher/, seed<k>/<method>/, cache/) and
    returns (the metrics dict, the data). data: ready pairs instead of loading config.source / config.targets.
    train=False evaluates only the models already trained there. Reruns reuse every finished model (teacher
    labels, students) and resume interrupted training."""
    out = Path(out_dir)
    t_start = time.perf_counter()
    data = data if data is not None else shift_data(config, config.data_dir)
    run = ShiftRun(config, out, data, progress)
    if not train and not (out / TEACHER / "margins.npz").exists():
        raise ConfigError(f"{out}: no trained teacher to evaluate (run without --no-train first)")
    teacher_labels, teacher_margins, label_facts = run.teacher()
    margins: dict[str, dict[int, dict[str, np.ndarray]]] = {TEACHER: {-1: teacher_margins}}
    ceiling = MethodConfig(CEILING, "naive")
    for seed in config.seeds:
        # The ceiling first: the teacher-to-ceiling gap is known before any method comparison.
        for method in [*([ceiling] if config.ceiling else []), *config.methods]:
            if not train and not (out / f"seed{seed}" / method.name / "margins.npz").exists():
                continue
            margins.setdefault(method.name, {})[seed] = run.student(
                method, seed, teacher_labels, gold=method is ceiling
            )
    val_margins = {
        m: {seed: {VAL_SPLIT: by_split.pop(VAL_SPLIT)} for seed, by_split in by_seed.items() if VAL_SPLIT in by_split}
        for m, by_seed in margins.items()
    }
    metrics = compute_metrics(config, data.eval, teacher_labels, margins, label_facts, val_margins)
    metrics["sizes"] = data.sizes()
    metrics["target_overlap_removed"] = dict(data.overlap_removed)
    metrics["seconds"] = round(time.perf_counter() - t_start, 1)
    metrics["timings"] = {k: round(v, 2) for k, v in run.timings.items()}
    metrics["config"] = to_dict(config)
    return metrics, data


def torch_threads(n: int | None) -> None:
    """Caps intra-op threads (long runs share the machine)."""
    if n:
        torch.set_num_threads(n)
