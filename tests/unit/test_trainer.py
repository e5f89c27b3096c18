"""Trainer: learning on an easy task, exact resume after a stop or a real kill, options that must change
training, pickle-free checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from helpers import clean_killed_resumed, easy_pairs
from rewardsmith.config import ModelConfig, TrainConfig
from rewardsmith.evaluate.scoring import score_pairs
from rewardsmith.models import build_reward_model
from rewardsmith.train.trainer import CHECKPOINT_DIR, KILL_AFTER_STEP_ENV, StepEnd, Trainer, swap_decision, train_pairs

torch.set_num_threads(1)


MODEL_CFG = ModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8)


class Stop(Exception):
    """Raised by the on_step hook: the run stops as a kill would (no cleanup, the last checkpoint stays)."""


def stop_after(step: int):
    def hook(end: StepEnd) -> None:
        if end.step == step:
            raise Stop

    return hook


def _train(run_dir: Path, stop_at: int | None = None, **overrides) -> Trainer:
    cfg = TrainConfig(
        **{"epochs": 2, "batch_size": 8, "lr": 1e-3, "checkpoint_every": 3, "progress": False, **overrides}
    )
    model, tok = build_reward_model(MODEL_CFG, seed=cfg.seed)
    hooks = [stop_after(stop_at)] if stop_at else []
    return train_pairs(model, tok, easy_pairs(64), cfg, MODEL_CFG, run_dir, on_step=hooks)


def test_learns_an_easy_preference(tmp_path) -> None:
    trainer = _train(tmp_path, epochs=3)
    chosen, rejected = score_pairs(trainer.model, _tokenizer(), easy_pairs(40, seed=9), 32, 8)
    assert (chosen > rejected).mean() > 0.9
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 25))
    assert not (tmp_path / CHECKPOINT_DIR).exists()


def _tokenizer():
    return build_reward_model(MODEL_CFG)[1]


def test_resume_from_checkpoint_matches_uninterrupted(tmp_path) -> None:
    full = _train(tmp_path / "full")
    cut = tmp_path / "cut"
    with pytest.raises(Stop):  # stopped after step 7; the step-6 checkpoint stays
        _train(cut, stop_at=7)
    assert (cut / CHECKPOINT_DIR / "state.json").exists()
    assert not list(cut.glob("**/*.pt")) and not list(cut.glob("**/*.pkl"))  # nothing pickled
    resumed = _train(cut)
    assert resumed.result.resumed_from_step == 6
    for (name, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    steps = [json.loads(x)["step"] for x in (cut / "log.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == full.total_steps


class _Clock:
    """The trainer's clock, moved a minute by every optimiser step's hook (after that step's checkpoint check)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return self.now

    def tick(self, end: StepEnd) -> None:
        self.now += 60.0


def test_a_checkpoint_is_written_once_its_minutes_have_passed(tmp_path, monkeypatch) -> None:
    """With steps of a minute and checkpoint_minutes 2.5, the checkpoints come after steps 4 and 7 (the clock
    restarts at each), none from checkpoint_every: a run stopped after step 6 resumes at 4, with the weights of
    an uninterrupted run."""
    from rewardsmith.train import trainer as trainer_module

    full = _train(tmp_path / "full", checkpoint_every=100)
    clock = _Clock()
    monkeypatch.setattr(trainer_module, "time", clock)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=1e-3, checkpoint_every=100, checkpoint_minutes=2.5, progress=False)

    def train(stop_at: int | None = None) -> Trainer:
        model, tok = build_reward_model(MODEL_CFG, seed=cfg.seed)
        hooks = [clock.tick, *([stop_after(stop_at)] if stop_at else [])]
        return train_pairs(model, tok, easy_pairs(64), cfg, MODEL_CFG, tmp_path / "timed", on_step=hooks)

    with pytest.raises(Stop):
        train(stop_at=6)
    resumed = train()
    assert resumed.result.resumed_from_step == 4
    for (name, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("settings", [{"checkpoint_minutes": 0.0}, {"checkpoint_every": 0, "checkpoint_minutes": 1e-9}])
def test_no_checkpoint_by_time_when_switched_off(tmp_path, settings) -> None:
    """checkpoint_minutes 0 leaves checkpoints to checkpoint_every; checkpoint_every 0 writes none at all."""
    with pytest.raises(Stop):
        _train(tmp_path, stop_at=7, **{"checkpoint_every": 100, **settings})
    assert not (tmp_path / CHECKPOINT_DIR).exists()


def test_options_change_training(tmp_path) -> None:
    base = _train(tmp_path / "a", max_steps=4)
    for key, value in {"swap_pairs": False, "seed": 1, "lr": 5e-4, "grad_accum": 2}.items():
        other = _train(tmp_path / key, max_steps=4, **{key: value})
        differs = any(
            not torch.equal(a, b)
            for a, b in zip(base.model.state_dict().values(), other.model.state_dict().values(), strict=True)
        )
        assert differs, key


def test_swap_decision_is_balanced_and_stable() -> None:
    flips = [swap_decision(0, 0, i) for i in range(2000)]
    assert 0.45 < sum(flips) / len(flips) < 0.55
    assert flips == [swap_decision(0, 0, i) for i in range(2000)]
    assert flips != [swap_decision(0, 1, i) for i in range(2000)]


def test_resume_with_other_settings_is_refused(tmp_path) -> None:
    with pytest.raises(Stop):
        _train(tmp_path, stop_at=4)
    from rewardsmith.errors import CheckpointError

    with pytest.raises(CheckpointError, match="seed"):
        _train(tmp_path, seed=5)


def test_a_crafted_pickle_in_the_run_folder_is_never_loaded(tmp_path) -> None:
    """An old-style checkpoint.pt holding a pickle that would create a marker file: training ignores it, and a
    crafted state folder is refused with a one-line error, running no code."""
    import pickle

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (tmp_path / "checkpoint.pt").write_bytes(pickle.dumps(Evil()))
    _train(tmp_path, max_steps=2)
    assert not marker.exists()
    bad = tmp_path / "bad"
    (bad / CHECKPOINT_DIR).mkdir(parents=True)
    (bad / CHECKPOINT_DIR / "tensors.safetensors").write_bytes(pickle.dumps(Evil()))
    (bad / CHECKPOINT_DIR / "state.json").write_text('{"format": "rewardsmith.state/1", "state": {}}')
    from rewardsmith.errors import CheckpointError

    with pytest.raises(CheckpointError, match="cannot read saved state"):
        _train(bad)
    assert not marker.exists()


@pytest.mark.slow
def test_kill9_mid_epoch_then_resume_gives_same_weights(tmp_path) -> None:
    """A real SIGKILL in the middle of an epoch, then the same command again."""
    data = tmp_path / "pairs.jsonl"
    data.write_text(
        "".join(
            json.dumps({"prompt": p.prompt[0].content, "chosen": p.chosen, "rejected": p.rejected}) + "\n"
            for p in easy_pairs(96)
        )
    )
    args = [
        "train",
        "--train",
        "file",
        "--path",
        str(data),
        "--backbone",
        "tiny-bert",
        "--max-length",
        "32",
        "--epochs",
        "2",
        "--batch-size",
        "8",
        "--lr",
        "1e-3",
        "--checkpoint-every",
        "2",
        "--quiet",
    ]

    def checkpointed(run: Path) -> None:
        assert (run / CHECKPOINT_DIR).exists()

    clean, killed = clean_killed_resumed(args, tmp_path, {KILL_AFTER_STEP_ENV: "7"}, after_kill=checkpointed)
    metrics = json.loads((killed / "metrics.json").read_text())
    assert metrics["train"]["resumed_from_step"] == 6
    a = load_file(str(clean / "model" / "model.safetensors"))
    b = load_file(str(killed / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ha = load_file(str(clean / "model" / "heads.safetensors"))["head.weight"]
    hb = load_file(str(killed / "model" / "heads.safetensors"))["head.weight"]
    assert torch.equal(ha, hb)


def test_precisions_can_change_between_trainings_in_one_process(tmp_path, monkeypatch) -> None:
    from rewardsmith.models import precision

    monkeypatch.setattr(precision, "bf16_native", lambda device: True)  # bf16 runs, also where the CPU emulates it
    _train(tmp_path / "bf16", max_steps=2, bf16=True)
    trainer = _train(tmp_path / "fp32", max_steps=2, bf16=False)
    assert trainer.model.head.weight.dtype == torch.float32


def test_cpu_training_steps_with_fused_adamw(tmp_path) -> None:
    """The fused AdamW kernel (benchmarks/results/kernels.json: several times the multi-tensor loop on CPU)."""
    trainer = _train(tmp_path, epochs=1)
    assert trainer._optimizer().defaults["fused"] is True


@pytest.mark.parametrize(("warmup_ratio", "total"), [(0.0, 30), (0.1, 30), (0.5, 7), (1.0, 4)])
def test_the_learning_rate_schedule_is_transformers_linear_warmup(warmup_ratio: float, total: int) -> None:
    """The Trainer's schedule (its own LambdaLR, which spares every run the import of transformers' optimisation
    module) gives transformers' get_linear_schedule_with_warmup learning rates at every step."""
    from transformers import get_linear_schedule_with_warmup

    def rates(make) -> list[float]:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
        scheduler = make(optimizer)
        seen = []
        for _ in range(total + 2):
            seen.append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
        return seen

    trainer = Trainer.__new__(Trainer)
    trainer.cfg = TrainConfig(warmup_ratio=warmup_ratio)
    trainer.total_steps = total
    ours = rates(trainer._scheduler)
    theirs = rates(lambda o: get_linear_schedule_with_warmup(o, int(warmup_ratio * total), total))
    assert ours == theirs
    assert max(ours) > 0


def test_unwrapped_is_accelerates_unwrap_without_importing_deepspeed() -> None:
    """sharding.unwrapped gives what accelerator.unwrap_model gives (a container's module, the model itself in one
    process), and within it accelerate's DeepSpeed test answers "no" only while DeepSpeed is not imported."""
    import sys

    from accelerate import Accelerator
    from accelerate.utils import other

    from rewardsmith.io.processes import no_deepspeed_probe
    from rewardsmith.train.sharding import unwrapped

    accelerator = Accelerator(cpu=True)
    inner = torch.nn.Linear(2, 1)
    assert unwrapped(accelerator, inner) is accelerator.unwrap_model(inner) is inner
    wrapped = torch.nn.DataParallel(inner)
    assert unwrapped(accelerator, wrapped) is accelerator.unwrap_model(wrapped) is inner
    probe = other.is_deepspeed_available
    with no_deepspeed_probe():
        assert other.is_deepspeed_available() is ("deepspeed" in sys.modules and probe())
    assert other.is_deepspeed_available is probe


FROZEN_CFG = ModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8, freeze_backbone=True)


def _train_frozen(run_dir: Path, cache: bool, monkeypatch) -> tuple[Trainer, int]:
    """A linear probe (frozen tiny backbone) trained 3 epochs on 32 pairs; returns it and the rows the backbone ran."""
    import rewardsmith.train.trainer as trainer_module

    if not cache:
        monkeypatch.setattr(trainer_module, "deterministic_frozen", lambda model: False)
    cfg = TrainConfig(epochs=3, batch_size=8, lr=1e-3, head_lr=1e-2, checkpoint_every=0, progress=False)
    model, tok = build_reward_model(FROZEN_CFG, seed=0)
    rows = []
    embeddings = model.backbone.get_input_embeddings()
    handle = embeddings.register_forward_hook(lambda _m, args, _out: rows.append(args[0].shape[0]))
    try:
        trainer = train_pairs(model, tok, easy_pairs(32), cfg, FROZEN_CFG, run_dir)
    finally:
        handle.remove()
    return trainer, sum(rows)


def test_a_frozen_backbone_runs_once_per_text_and_trains_the_same_head(tmp_path, monkeypatch) -> None:
    cached, cached_rows = _train_frozen(tmp_path / "cached", True, monkeypatch)
    monkeypatch.undo()
    plain, plain_rows = _train_frozen(tmp_path / "plain", False, monkeypatch)
    texts = {(p.prompt, p.chosen) for p in easy_pairs(32)} | {(p.prompt, p.rejected) for p in easy_pairs(32)}
    assert plain_rows == 3 * 2 * 32  # every epoch runs the backbone on both texts of every pair
    assert cached_rows == len(texts)  # with the cache, each distinct text once
    torch.testing.assert_close(cached.model.head.weight, plain.model.head.weight, rtol=1e-4, atol=1e-6)
    assert cached.model.feature_cache is None  # dropped when training ends: scoring runs the backbone


def test_the_feature_cache_is_only_for_a_frozen_backbone_without_dropout() -> None:
    from rewardsmith.models.reward_model import deterministic_frozen

    frozen, _ = build_reward_model(FROZEN_CFG)
    assert deterministic_frozen(frozen)
    trainable, _ = build_reward_model(MODEL_CFG)
    assert not deterministic_frozen(trainable)
    dropout = ModelConfig(backbone="tiny-bert", max_length=32, freeze_backbone=True, dropout=0.1)
    assert not deterministic_frozen(build_reward_model(dropout)[0])


def test_a_frozen_probe_resumed_after_a_stop_trains_the_same_head_bit_for_bit(tmp_path) -> None:
    """The cache is refilled after a resume from other batches than the first run's: each text's representation
    must not depend on the batch it first came in."""
    cfg = TrainConfig(epochs=3, batch_size=8, lr=1e-3, head_lr=1e-2, checkpoint_every=3, progress=False)

    def train(run_dir: Path, stop_at: int | None = None) -> Trainer:
        model, tok = build_reward_model(FROZEN_CFG, seed=0)
        hooks = [stop_after(stop_at)] if stop_at else []
        return train_pairs(model, tok, easy_pairs(32), cfg, FROZEN_CFG, run_dir, on_step=hooks)

    whole = train(tmp_path / "whole")
    with pytest.raises(Stop):
        train(tmp_path / "stopped", stop_at=8)
    resumed = train(tmp_path / "stopped")
    assert resumed.result.resumed_from_step == 6
    assert torch.equal(whole.model.head.weight, resumed.model.head.weight)
