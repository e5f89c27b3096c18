"""The W2S pipeline on tiny models: reference cache, SEAM refiner, objectives, the shift job's metrics.json keys,
report and run folder."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from rewardsmith.config import ModelConfig, TrainConfig
from rewardsmith.data.collate import PairEncoder, collate_pairs, encode_pairs
from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.errors import ConfigError
from rewardsmith.jobs.shift import run_shift_job
from rewardsmith.models.factory import build_reward_model
from rewardsmith.train.objectives import BradleyTerryObjective, StepInfo
from rewardsmith.train.trainer import _swap_pair
from rewardsmith.w2s.config import (
    AnchorSettings,
    ConfidenceSettings,
    MethodConfig,
    SeamSettings,
    ShiftConfig,
    TeacherConfig,
)
from rewardsmith.w2s.objectives import w2s_objectives
from rewardsmith.w2s.objectives.anchor import AnchorObjective, layers_for
from rewardsmith.w2s.pipeline import ShiftData, check_methods
from rewardsmith.w2s.reference import CachedReference, FrozenCopyReference, ReferenceStateCache
from rewardsmith.w2s.refiners import LABEL_REFINERS, seam_refine

GOOD = ["good", "kind", "helpful", "safe", "polite", "clear"]
BAD = ["bad", "rude", "harmful", "unsafe", "mean", "vague"]


def _pairs(n: int, tag: str, seed: int = 0) -> list[PreferencePair]:
    rng = random.Random(seed)
    return [
        PreferencePair(
            user_prompt(f"question {i} about {tag} " + "x " * rng.randint(0, 6)),
            " ".join(rng.choice(GOOD) for _ in range(rng.randint(2, 7))),
            " ".join(rng.choice(BAD) for _ in range(rng.randint(2, 7))),
            domain=tag,
            pair_id=f"{tag}{i}",
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny() -> tuple[object, object, list]:
    model, tok = build_reward_model(ModelConfig(backbone="tiny-bert", max_length=32), seed=0)
    encoded = encode_pairs(PairEncoder(tok, 32, 8), _pairs(6, "c"))
    return model, tok, encoded


def test_objectives_registered() -> None:
    assert {"naive", "confidence", "anchor"} <= set(w2s_objectives())
    assert {"seam", "none"} <= set(LABEL_REFINERS.names())


def test_cached_reference_matches_a_frozen_copy_under_swaps(tiny) -> None:
    model, tok, encoded = tiny
    layers = [1, 2]
    cache = ReferenceStateCache.build(model, encoded, layers, int(tok.pad_token_id))
    # Present pairs 1 and 3 swapped, as the trainer does: the cache must follow batch["swapped"].
    items = [_swap_pair(p) if p.index in (1, 3) else p for p in encoded]
    batch = collate_pairs(items, int(tok.pad_token_id))
    cached = CachedReference(cache)(model, batch, layers)
    exact = FrozenCopyReference(model)(model, batch, layers)
    mask = batch["response_mask"]
    for layer in layers:
        assert torch.allclose(cached[layer][mask], exact[layer][mask], atol=2e-2, rtol=1e-2)  # fp16 storage
        assert torch.all(cached[layer][~mask] == 0)
    assert cache.pooled is not None and cache.pooled.shape == (len(encoded), 2, model.config.hidden_size)


def test_disk_cache_is_reused_and_checked(tiny, tmp_path: Path) -> None:
    model, tok, encoded = tiny
    first = ReferenceStateCache.build(model, encoded, [2], int(tok.pad_token_id), path=tmp_path / "ref")
    assert isinstance(first.states, np.memmap) and first.states.dtype == np.float16
    again = ReferenceStateCache.load(tmp_path / "ref", first.fingerprint)
    assert again is not None and np.array_equal(np.asarray(again.states), np.asarray(first.states))
    assert ReferenceStateCache.load(tmp_path / "ref", "another-fingerprint") is None


def test_anchor_objective_logs_drift_and_weight_changes_loss(tiny) -> None:
    model, tok, encoded = tiny
    batch = collate_pairs(encoded, int(tok.pad_token_id))
    batch["labels"] = torch.full_like(batch["labels"], 0.7)

    class Shifted:
        def __call__(self, m, b, layers):
            _, states = m.encode(b, layers)
            return {k: v.detach() + 0.5 for k, v in states.items()}

    info = StepInfo(0, 10)

    def anchored(**settings):
        return AnchorObjective(reference=Shifted(), layers=[2], settings=AnchorSettings(**settings))

    light = anchored(weight=1e-4)(model, batch, info)
    heavy = anchored(weight=1.0)(model, batch, info)
    relative = anchored(weight=1.0, normalise=True)(model, batch, info)
    naive = BradleyTerryObjective()(model, batch, info)
    assert light.terms["anchor_drift.L2"] == pytest.approx(0.25, rel=1e-4)
    assert heavy.total.item() == pytest.approx(naive.total.item() + 0.25, rel=1e-4)
    assert light.total.item() != pytest.approx(heavy.total.item())
    # Normalised: the MSE over the reference states' mean square, a scale-free relative drift.
    _, ref = model.encode(batch, [2])
    mask = batch["response_mask"]
    mean_square = ((ref[2].detach() + 0.5)[mask] ** 2).mean().item()
    assert relative.total.item() - naive.total.item() == pytest.approx(0.25 / mean_square, rel=2e-2)


def test_layers_from_depth_fractions() -> None:
    assert layers_for([1.0], 6) == [6]
    assert layers_for([0.5, 0.75], 6) == [3, 5]
    with pytest.raises(ConfigError):
        layers_for([0.0], 6)


def test_seam_refiner_denoises_toward_strong_features() -> None:
    rng = np.random.default_rng(0)
    n, h = 400, 16
    truth = rng.random(n) < 0.5
    direction = np.zeros(h)
    direction[0] = 1.0
    features = rng.normal(size=(n, 2, h))
    sign = np.where(truth, 1.0, -1.0)
    features[:, 0] += 1.5 * sign[:, None] * direction
    features[:, 1] -= 1.5 * sign[:, None] * direction
    # A weak teacher: right 65% of the time, with little confidence.
    flip = rng.random(n) < 0.35
    q = np.where(truth ^ flip, 0.6, 0.4)
    refined = seam_refine(q, features)
    assert refined.shape == (n,) and np.all((refined > 0) & (refined < 1))
    assert np.mean((refined > 0.5) == truth) > np.mean((q > 0.5) == truth) + 0.1
    assert np.array_equal(seam_refine(q, features), refined)  # deterministic


@pytest.mark.slow
def test_run_shift_end_to_end_tiny(tmp_path: Path) -> None:
    tiny_model = ModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8)
    cfg = ShiftConfig(
        name="tiny",
        teacher=TeacherConfig(
            model=ModelConfig(
                backbone="tiny-bert", max_length=32, min_prompt_tokens=8, num_layers=1, freeze_backbone=True
            ),
            train=TrainConfig(epochs=1, batch_size=8, lr=1e-2, checkpoint_every=0, progress=False),
        ),
        student=tiny_model,
        train=TrainConfig(batch_size=8, lr=1e-3, checkpoint_every=0, progress=False, bf16=True),
        methods=[
            MethodConfig("naive"),
            MethodConfig("confidence", "confidence", confidence=ConfidenceSettings(form="eleuther")),
            MethodConfig("seam", "naive", refiner="seam", seam=SeamSettings(criteria=4, selected=2)),
            MethodConfig("anchor-1", "anchor", anchor=AnchorSettings(weight=1.0, layers=[0.5, 1.0], reference="disk")),
        ],
        seeds=[0, 1],
    )
    cfg.eval.n_boot = 50
    data = ShiftData(_pairs(16, "g", 1), _pairs(24, "w", 2), {"id": _pairs(12, "i", 3), "tgt": _pairs(10, "t", 4)})
    metrics = run_shift_job(cfg, tmp_path, data=data, progress=False).metrics
    saved = json.loads((tmp_path / "metrics.json").read_text())
    for name in ("naive", "confidence", "seam", "anchor-1"):
        rec = saved["methods"][name]
        for key in ("id_acc", "wrg", "ood_acc.tgt", "aog.tgt", "nts.tgt", "pgr.tgt"):
            assert key in rec and f"{key}_ci" in rec
        assert "id_acc_seed_std" in rec and rec["n_seeds"] == 2
        assert "nts.tgt" in saved["length_controlled"][name]
    assert saved["teacher_id_acc"] is not None and saved["ceiling_id_acc"] is not None
    assert set(saved["gap_ceiling_minus_teacher"]) == {"id", "tgt"}
    assert "d.tgt" in saved["vs_naive"]["anchor-1"] and "significant.tgt" in saved["vs_naive"]["anchor-1"]
    for model in saved["length_controlled"].values():  # every length-controlled CI inside [0, 100]
        for key, value in model.items():
            if key.endswith("acc_ci") and None not in value:
                assert 0.0 <= value[0] <= value[1] <= 100.0, key
    assert (tmp_path / "report.md").exists() and (tmp_path / "report.html").exists()
    assert (tmp_path / "plots" / "id_vs_ood_tgt.png").exists()
    assert list((tmp_path / "plots").glob("anchor_sweep*.png")) == []
    assert (tmp_path / "manifest.json").exists()
    log = [json.loads(x) for x in (tmp_path / "seed0" / "anchor-1" / "log.jsonl").read_text().splitlines()]
    assert {"anchor_drift.L1", "anchor_drift.L2"} <= set(log[-1])
    assert (tmp_path / "cache" / "reference-L1-2.npy").exists()
    # Teacher labels are cached and reused: a rerun trains nothing and gives the same numbers.
    before = (tmp_path / "teacher" / "margins.npz").stat().st_mtime
    again = run_shift_job(cfg, tmp_path, data=data, progress=False).metrics
    assert (tmp_path / "teacher" / "margins.npz").stat().st_mtime == before
    assert again["methods"]["naive"]["id_acc"] == metrics["methods"]["naive"]["id_acc"]
    # Evaluate-only: a method never trained is skipped, not trained.
    more = replace(cfg, methods=[*cfg.methods, MethodConfig("untrained", "naive")])
    partial = run_shift_job(more, tmp_path, data=data, progress=False, train=False).metrics
    assert "untrained" not in partial["methods"] and not (tmp_path / "seed0" / "untrained").exists()
    # A method that keeps its name must keep its settings: its trained students would be stale.
    changed = replace(cfg, methods=[MethodConfig("anchor-1", "anchor", anchor=AnchorSettings(weight=2.0))])
    from rewardsmith.errors import RunFolderError

    with pytest.raises(RunFolderError, match=r"methods\[anchor-1\]"):
        run_shift_job(changed, tmp_path, data=data, progress=False)


def test_bad_methods_fail_fast() -> None:
    with pytest.raises(ConfigError, match="unique"):
        check_methods(ShiftConfig(methods=[MethodConfig("teacher")]))
    with pytest.raises(ConfigError, match="anchor"):
        check_methods(ShiftConfig(methods=[MethodConfig("x", "naive", anchor=AnchorSettings(weight=1.0))]))
    with pytest.raises(ConfigError, match="unknown objective 'no-such-objective'; known: anchor, confidence, naive"):
        check_methods(ShiftConfig(methods=[MethodConfig("x", "no-such-objective")]))


@pytest.mark.slow
def test_tfidf_teacher_calibrated_labels_and_anchor_weight_chosen_on_validation(tmp_path: Path) -> None:
    tiny_model = ModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8)
    cfg = ShiftConfig(
        name="tiny-tfidf",
        teacher=TeacherConfig(kind="tfidf", calibration_folds=3),
        student=tiny_model,
        train=TrainConfig(batch_size=8, lr=1e-3, checkpoint_every=0, progress=False),
        methods=[
            MethodConfig("naive"),
            MethodConfig("anchor-0.1", "anchor", anchor=AnchorSettings(weight=0.1, normalise=True)),
            MethodConfig("anchor-10", "anchor", anchor=AnchorSettings(weight=10.0, normalise=True)),
        ],
        near_domain=["tgt"],
    )
    cfg.eval.n_boot = 30
    data = ShiftData(
        _pairs(30, "g", 1),
        _pairs(24, "w", 2),
        {"id": _pairs(12, "i", 3), "tgt": _pairs(10, "t", 4)},
        val=_pairs(12, "v", 5),
    )
    metrics = run_shift_job(cfg, tmp_path, data=data, progress=False).metrics
    labels = metrics["teacher_labels"]
    assert labels["kind"] == "tfidf" and labels["temperature"] > 0 and "ece" in labels
    assert set(metrics["validation"]) >= {"teacher", "naive", "anchor-0.1", "anchor-10"}
    assert "val" not in metrics["targets"] and "ood_acc.val" not in metrics["methods"]["naive"]
    (selection,) = metrics["anchor_selection"]
    best = max(("anchor-0.1", "anchor-10"), key=lambda m: metrics["validation"][m]["accuracy"])
    assert selection["chosen"] == best and selection["normalise"] is True
    report = (tmp_path / "report.md").read_text()
    assert "near-domain" in report and "chosen on validation" in report and "T = " in report
    # A method's students may be debiased on their own (docs/w2s.md: does a debiased student transfer better?).
    more = replace(cfg, methods=[*cfg.methods, MethodConfig("naive-odin", "naive", debias="odin")])
    run_shift_job(more, tmp_path, data=data, progress=False)
    logs = {m: (tmp_path / "seed0" / m / "log.jsonl").read_text() for m in ("naive", "naive-odin")}
    assert '"rho_quality"' in logs["naive-odin"] and '"rho_quality"' not in logs["naive"]


def test_tfidf_teacher_without_the_length_feature() -> None:
    from rewardsmith.w2s.config import TfidfSettings
    from rewardsmith.w2s.teachers import TfidfTeacher

    gold = _pairs(40, "g", 1)
    with_length = TfidfTeacher(TfidfSettings()).fit(gold)
    without = TfidfTeacher(TfidfSettings(length_feature=False)).fit(gold)
    n_words = len(without.vectorizer_.vocabulary_)
    assert without._features(gold).shape[1] == n_words and with_length._features(gold).shape[1] == n_words + 1
    # Sides that differ only by words the teacher never saw: without the length feature the margin is 0, with it
    # the longer side is scored apart.
    pair = PreferencePair(user_prompt("q"), "zzzz qqqq", "zzzz qqqq wwww vvvv")
    assert without.margins([pair])[0] == pytest.approx(0.0)
    assert with_length.margins([pair])[0] != pytest.approx(0.0)


def test_a_folder_written_before_a_setting_existed_still_resumes() -> None:
    """Settings added to ShiftConfig later (a method's debias, the TF-IDF length feature) read as their defaults
    when a run folder written without them is resumed."""
    from rewardsmith.config import to_dict
    from rewardsmith.io.runfolder import flatten
    from rewardsmith.jobs.shift import shift_compare

    cfg = ShiftConfig(methods=[MethodConfig("naive"), MethodConfig("anchor-1", "anchor")])
    old = to_dict(cfg)
    for m in old["methods"]:
        del m["debias"]
    del old["teacher"]["tfidf"]["length_feature"]
    # RunFolder compares flattened configs ({"teacher.tfidf.c": 1.0, ...}).
    assert shift_compare(flatten(old), flatten(to_dict(cfg))) == []
    changed = to_dict(replace(cfg, methods=[MethodConfig("naive", debias="odin"), MethodConfig("anchor-1", "anchor")]))
    assert shift_compare(flatten(old), flatten(changed)) == ["methods[naive]"]
