"""Trains a tiny Bradley-Terry model (optionally a LoRA adapter) or a tiny set-mode ICRM through the shared
Trainer and saves the final weights and the outputs on held-out inputs; run by test_distributed.py and
test_sharded_training.py as a plain script (one process) and under `accelerate launch` (DDP over gloo on CPU
processes; FSDP2 on CPU processes over gloo; DeepSpeed on its CPU accelerator; FSDP and DeepSpeed on GPUs), with
the same global batch. The main process also saves the trained model folder (model/: heads.safetensors and the
backbone or adapter; for a decoder without LoRA, a *ForSequenceClassification folder)."""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for helpers.py when run as a script
from helpers import easy_pairs
from rewardsmith.config import ICRMModelConfig, LoraSettings, ModelConfig, TrainConfig


def record_threads_at_exit(out: Path) -> None:
    """Writes out/threads-<rank>.txt at exit: the names of this process's native threads still running. Registered
    before anything else, it runs after every other exit handler (rewardsmith's release of the process group
    included), so a Gloo thread in it (gloo_tcp_loop, pt_gloo_runloop) outlived the group's destruction."""

    def record() -> None:
        tasks = Path("/proc/self/task")
        names = sorted((tasks / t / "comm").read_text().strip() for t in os.listdir(tasks))
        out.mkdir(parents=True, exist_ok=True)
        (out / f"threads-{os.environ.get('RANK', '0')}.txt").write_text("\n".join(names))

    if Path("/proc/self/task").is_dir():
        atexit.register(record)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=("bt", "icrm"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lora-r", type=int, default=0, help="bt: train a LoRA adapter of this rank")
    parser.add_argument("--backbone", default="tiny-bert", help="bt: tiny-bert or tiny-llama")
    args = parser.parse_args()
    record_threads_at_exit(args.out)
    torch.set_num_threads(1)
    if args.kind == "bt":
        from rewardsmith.models.factory import build_reward_model
        from rewardsmith.train.trainer import train_pairs

        model_cfg = ModelConfig(
            backbone=args.backbone,
            max_length=32,
            min_prompt_tokens=8,
            lora=LoraSettings(r=args.lora_r, alpha=max(1, 2 * args.lora_r)),
        )
        cfg = TrainConfig(
            epochs=1, batch_size=8, lr=1e-3, max_steps=6, checkpoint_every=3, progress=False, swap_pairs=True
        )
        model, tok = build_reward_model(model_cfg, seed=0)
        initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
        trainer = train_pairs(model, tok, easy_pairs(64), cfg, model_cfg, args.out / "run")
        state = trainer.model.state_dict()
        from rewardsmith.evaluate.scoring import score_pairs

        held_out = easy_pairs(96)[64:]
        chosen, rejected = score_pairs(trainer.model, tok, held_out, 32, 8)
        before = score_pairs(build_reward_model(model_cfg, seed=0)[0], tok, held_out, 32, 8)
        outputs = {"now": torch.tensor(chosen - rejected), "before": torch.tensor(before[0] - before[1])}
        saved = (trainer.model, tok, model_cfg)

        def measure(model: torch.nn.Module) -> torch.Tensor:
            c, r = score_pairs(model, tok, held_out, 32, 8)
            return torch.tensor(c - r)
    else:
        from rewardsmith.icrm.config import EpisodeConfig, ICRMRunConfig, icrm_train_defaults
        from rewardsmith.icrm.train import train_icrm

        train = icrm_train_defaults()
        train.max_steps, train.batch_size, train.bf16, train.checkpoint_every, train.progress = 6, 8, False, 3, False
        train.head_lr = 2e-2
        cfg = ICRMRunConfig(
            model=ICRMModelConfig(
                backbone="tiny-bert", max_length=32, min_prompt_tokens=8, context_dim=8, hidden_dim=16
            ),
            episodes=EpisodeConfig(
                sources=["synthetic/source", "synthetic/target-reversed"],
                source_splits={},
                pairs_per_source=80,
                max_demos=6,
            ),
            train=train,
        )
        from rewardsmith.icrm.episodes import EpisodeSampler, load_pools
        from rewardsmith.icrm.train import EpisodeBatchPlan, embed_pools
        from rewardsmith.models.factory import build_model

        fresh = build_model(cfg.model, seed=0)[0]
        initial = {k: v.detach().clone() for k, v in fresh.state_dict().items()}
        result = train_icrm(cfg, args.out / "run")
        state = result.model.state_dict()
        pools = {name: parts["test"] for name, parts in load_pools(cfg.episodes).items()}
        sampler = EpisodeSampler(pools, cfg.episodes, seed=123)

        def margins(model: torch.nn.Module) -> torch.Tensor:
            tables = embed_pools(model, result.tokenizer, pools, cfg, None)
            batch = EpisodeBatchPlan(sampler, 64, "set", tables=tables).batch(0).tensors
            with torch.no_grad():
                scores = model.cpu()(batch)
            return scores.u_first - scores.u_second

        outputs = {"now": margins(result.model), "before": margins(fresh)}
        saved = (result.model, result.tokenizer, cfg.model)
        measure = margins
    from accelerate.state import PartialState

    from rewardsmith.models.factory import load_model, save_model

    # The saved folder (heads.safetensors whole, the backbone or adapter) scores as the trained model did; every
    # process scores (data-parallel), so every process loads it once the main one has written it.
    if PartialState().is_main_process:
        save_model(saved[0], saved[1], args.out / "model", saved[2])
    PartialState().wait_for_everyone()
    outputs["reloaded"] = measure(load_model(args.out / "model")[0])
    if PartialState().is_main_process:
        for name, weights in (("weights", state), ("initial", initial), ("outputs", outputs)):
            save_file(
                {k: v.detach().float().cpu().contiguous().clone() for k, v in weights.items()},
                str(args.out / f"{name}.safetensors"),
            )
        (args.out / "processes.txt").write_text(str(PartialState().num_processes))
        (args.out / "engine.txt").write_text(str(PartialState().distributed_type.value))  # e.g. FSDP, MULTI_CPU


if __name__ == "__main__":
    main()
