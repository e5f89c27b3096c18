"""Builds a RewardModel from a ModelConfig, saves it as a Hugging Face folder and loads it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from rewardsmith.config import LoraSettings, ModelConfig, from_dict, to_dict
from rewardsmith.errors import CheckpointError
from rewardsmith.models.backbone import load_backbone, quiet_transformers
from rewardsmith.models.reward_model import RewardModel
from rewardsmith.train.checkpoint import atomic_folder

META_FILE = "rewardsmith.json"
HEAD_FILE = "reward_head.safetensors"


def resolve_pooling(pooling: str, kind: str) -> str:
    if pooling == "auto":
        return "last" if kind == "decoder" else "mean"
    return pooling


def apply_lora(model: RewardModel, lora: LoraSettings) -> None:
    """Wraps the backbone in a peft LoRA adapter; the scalar head stays fully trainable."""
    from peft import LoraConfig, get_peft_model

    targets: Any = list(lora.target_modules) or None
    if targets is None and model.kind == "encoder" and model.config.model_type == "bert":
        targets = ["query", "value"]
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets,
                        bias="none")
    model.backbone = get_peft_model(model.backbone, config)


def build_reward_model(cfg: ModelConfig, seed: int = 0) -> tuple[RewardModel, Any]:
    """A RewardModel with a freshly initialised head (seeded) and its tokenizer."""
    loaded = load_backbone(cfg.backbone, cfg.num_layers, cfg.dropout)
    torch.manual_seed(seed)
    model = RewardModel(loaded.model, resolve_pooling(cfg.pooling, loaded.kind), loaded.kind, cfg.backbone)
    if cfg.lora.r > 0:
        apply_lora(model, cfg.lora)
    if cfg.freeze_backbone:
        for p in model.backbone.parameters():
            p.requires_grad_(False)
    if loaded.tokenizer.pad_token_id is None:
        loaded.tokenizer.pad_token = loaded.tokenizer.eos_token
    return model, loaded.tokenizer


def is_lora(model: RewardModel) -> bool:
    return hasattr(model.backbone, "peft_config")


def save_reward_model(model: RewardModel, tokenizer: Any, out_dir: str | Path, cfg: ModelConfig,
                      extra: dict[str, Any] | None = None) -> Path:
    """Writes a Hugging Face folder atomically (temp folder, then rename).

    Full fine-tune: the backbone's config.json + model.safetensors (loadable with AutoModel), the head in
    reward_head.safetensors. Decoders with last-token pooling are also written as
    *ForSequenceClassification (num_labels=1, `score` = the head), so AutoModelForSequenceClassification
    and RewardBench-style tools score them directly. LoRA: the adapter (adapter_model.safetensors) plus the
    head; the base backbone is named in rewardsmith.json and resolved again on load.
    """
    out_dir = Path(out_dir)
    with atomic_folder(out_dir) as tmp:
        exported_as = _save_backbone(model, tmp)
        tokenizer.save_pretrained(str(tmp))
        save_file({"weight": model.head.weight.detach().float().cpu().contiguous()}, str(tmp / HEAD_FILE))
        meta = {"format": "rewardsmith-reward-model", "version": 1, "pooling": model.pooling, "kind": model.kind,
                "lora": is_lora(model), "exported_as": exported_as, "model_config": to_dict(cfg),
                **(extra or {})}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    return out_dir


def _save_backbone(model: RewardModel, folder: Path) -> str:
    backbone = model.backbone
    if is_lora(model):
        backbone.save_pretrained(str(folder))  # adapter only
        return "peft-adapter"
    if model.kind == "decoder" and model.pooling == "last":
        from transformers import AutoModelForSequenceClassification

        config = backbone.config.__class__.from_dict(backbone.config.to_dict())
        config.num_labels = 1
        seq = AutoModelForSequenceClassification.from_config(config)
        base = getattr(seq, seq.base_model_prefix)
        base.load_state_dict(backbone.state_dict())
        with torch.no_grad():
            seq.score.weight.copy_(model.head.weight)
        seq.save_pretrained(str(folder))
        return "sequence-classification"
    backbone.save_pretrained(str(folder))
    return "base-model"


def load_reward_model(folder: str | Path) -> tuple[RewardModel, Any, dict[str, Any]]:
    """Loads a folder written by save_reward_model. Returns (model in eval mode, tokenizer, metadata)."""
    from transformers import AutoModel, AutoTokenizer

    quiet_transformers()
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.exists():
        raise CheckpointError(f"{folder}: not a rewardsmith model folder (no {META_FILE})")
    meta = json.loads(meta_path.read_text())
    cfg = from_dict(ModelConfig, meta["model_config"])
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if meta["lora"]:
        from peft import PeftModel

        base = load_backbone(cfg.backbone, cfg.num_layers, cfg.dropout).model
        backbone: Any = PeftModel.from_pretrained(base, str(folder))
    else:
        backbone = AutoModel.from_pretrained(str(folder))
    model = RewardModel(backbone, meta["pooling"], meta["kind"], cfg.backbone)
    head = load_file(str(folder / HEAD_FILE))
    model.head.weight.data.copy_(head["weight"])
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer, meta
