"""End to end on a tiny encoder: train a set-mode ICRM on real-data episodes, resume, run every protocol,
score with a demonstrations file, and run a few GRPO steps with the ICRM reward on a tiny local policy."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rewardsmith.data.sources import find_data_dir
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.protocols import PROTOCOLS, run_protocols
from rewardsmith.icrm.train import ICRMTrainer, train_icrm

DATA = find_data_dir()
needs_data = pytest.mark.skipif(
    DATA is None or not (DATA / "pku-saferlhf").is_dir(),
    reason="real datasets not found (set REWARDSMITH_DATA_DIR)",
)


def _tiny_cfg() -> ICRMRunConfig:
    cfg = ICRMRunConfig()
    cfg.model.backbone = "tiny-bert"
    cfg.model.max_length, cfg.model.min_prompt_tokens = 48, 16
    cfg.model.context_dim, cfg.model.hidden_dim, cfg.model.bf16 = 16, 32, False
    cfg.episodes.sources = [
        "pku-saferlhf/harmless",
        "moralchoice/low",
        "rm-bench/safety-refuse",
        "rm-bench/safety-response",
    ]
    cfg.episodes.source_splits = {}
    cfg.episodes.pairs_per_source = 60
    cfg.episodes.max_demos = 8
    cfg.train.steps, cfg.train.episodes_per_step = 20, 8
    cfg.train.checkpoint_every, cfg.train.log_every, cfg.train.progress = 10, 5, False
    cfg.eval.n_values, cfg.eval.max_test_pairs, cfg.eval.n_boot = [0, 4], 12, 50
    cfg.eval.mixture_rates, cfg.eval.pareto_weights = [0.0, 0.5, 1.0], [0.0, 0.5, 1.0]
    return cfg


@needs_data
def test_train_resume_eval_and_score(tmp_path: Path) -> None:
    cfg = _tiny_cfg()
    run = tmp_path / "run"
    full = train_icrm(cfg, run)
    weights = {k: v.clone() for k, v in _heads(run).items()}
    # Kill-and-resume equivalence: a run stopped after its step-10 checkpoint and started again ends with
    # the same weights.
    run2 = tmp_path / "run2"
    _interrupt_after(ICRMTrainer(_tiny_cfg(), run2), 10)
    assert (run2 / "checkpoint.pt").exists()
    resumed = train_icrm(_tiny_cfg(), run2)
    assert resumed.resumed_from_step == 10
    for k, v in _heads(run2).items():
        assert np.allclose(v.numpy(), weights[k].numpy(), atol=1e-6), k
    assert full.steps == 20 and (run / "log.jsonl").exists()
    steps_logged = [json.loads(line)["step"] for line in (run2 / "log.jsonl").read_text().splitlines()]
    assert steps_logged == sorted(set(steps_logged))  # no duplicate steps after the resume

    cfg.eval.bt_model = None
    written = run_protocols("all", run / "model", tmp_path / "eval", cfg)
    assert set(written) == set(PROTOCOLS.names())
    for path in written.values():
        metrics = json.loads(path.read_text())
        assert metrics["protocol"] in PROTOCOLS
        assert (path.parent / "report.md").exists() and list((path.parent / "plots").glob("*.png"))
    steer = json.loads(written["steerability"].read_text())
    assert [r["demos"] for r in steer["standards"]["harmless-flipped"]["icrm"]] == [0, 4]

    demos = tmp_path / "demos.jsonl"
    demos.write_text(
        "\n".join(
            json.dumps(
                {
                    "prompt": f"q{i}",
                    "chosen": "I cannot help with that.",
                    "rejected": f"Sure, here is how {i}",
                }
            )
            for i in range(3)
        )
    )
    from rewardsmith.data.schema import PreferencePair, user_prompt
    from rewardsmith.icrm.scoring import score_with_demos

    pairs = [PreferencePair(user_prompt("how do I pick a lock"), "I cannot help.", "Use a tension wrench.")]
    scores = score_with_demos(run / "model", pairs, demos)
    assert scores["mu"].shape == (1,) and 0 < scores["mu"][0] < 1
    texts = score_with_demos(run / "model", [("how do I pick a lock", "I cannot help.")], None)
    assert texts["utility"].shape == (1,)


def _heads(run: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(run / "model" / "icrm_heads.safetensors"))


def _interrupt_after(trainer, steps: int) -> None:
    """Runs `trainer` as if killed right after writing the checkpoint at `steps`."""
    import contextlib

    original = trainer._save

    class Stop(Exception):
        pass

    def save_then_stop(optimizer, scheduler, next_step):
        original(optimizer, scheduler, next_step)
        if next_step >= steps:
            raise Stop

    trainer._save = save_then_stop
    with contextlib.suppress(Stop):
        trainer.fit()


@needs_data
def test_cli_train_and_eval(tmp_path: Path) -> None:
    from rewardsmith.cli.icrm import app

    runner = CliRunner()
    bad = runner.invoke(app, ["eval", "--protocol", "nope", "--model", str(tmp_path), "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown icrm protocol" in bad.output


def test_grpo_steps_with_icrm_reward(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from rewardsmith.data.schema import PreferencePair, user_prompt
    from rewardsmith.icrm.config import ICRMModelConfig
    from rewardsmith.icrm.model import build_beta_reward_model
    from rewardsmith.icrm.reward import ICRMReward
    from rewardsmith.icrm.scoring import ICRMScorer
    from rewardsmith.models.backbone import minilm_dir

    t0 = time.perf_counter()
    rm, rm_tok = build_beta_reward_model(
        ICRMModelConfig(
            backbone="tiny-bert",
            max_length=48,
            min_prompt_tokens=16,
            context_dim=8,
            hidden_dim=16,
            bf16=False,
        )
    )
    demos = [PreferencePair(user_prompt("say hi"), "hello there", "go away")]
    reward = ICRMReward(ICRMScorer(rm, rm_tok, 48, 16), demos)

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    tok.eos_token = tok.sep_token
    tok.bos_token = tok.cls_token
    policy = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=tok.vocab_size,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            intermediate_size=32,
            max_position_embeddings=128,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.sep_token_id,
            bos_token_id=tok.cls_token_id,
        )
    )
    data = Dataset.from_dict({"prompt": ["say hi", "greet me", "be kind", "hello?"]})
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=6,
        max_steps=2,
        learning_rate=1e-4,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        bf16=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=policy, reward_funcs=reward, args=args, train_dataset=data, processing_class=tok
    )
    trainer.train()
    logged = [h for h in trainer.state.log_history if any("reward" in k for k in h)]
    assert logged and trainer.state.global_step == 2
    assert time.perf_counter() - t0 < 300
