"""Building, saving and loading every rewardsmith model kind: the scalar RewardModel ("reward") and the in-context
BetaRewardModel ("icrm"). One folder format for both:

    rewardsmith.json         format, model type, pooling, kind, how the backbone is stored, the model config
    heads.safetensors        every parameter outside the backbone (the reward head, or the ICRM heads)
    tokenizer files
    backbone, one of: config.json + model.safetensors (full fine-tune; decoders with last-token pooling as
                      *ForSequenceClassification, loadable by AutoModelForSequenceClassification),
                      adapter_model.safetensors (LoRA: the base backbone is named in rewardsmith.json),
                      nothing (a frozen backbone is named in rewardsmith.json and resolved again on load)

A folder is written atomically (a temporary folder renamed into place); loading reads safetensors and JSON
only and turns every unreadable part into a one-line CheckpointError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from rewardsmith.config import ICRMModelConfig, LoraSettings, ModelConfig, from_dict, to_dict
from rewardsmith.data.templates import resolve_template
from rewardsmith.errors import CheckpointError, ConfigError, RewardsmithError, first_line, one_line
from rewardsmith.io.atomic import atomic_folder
from rewardsmith.io.processes import no_deepspeed_probe
from rewardsmith.models.attention import use_rewardsmith_attention
from rewardsmith.models.backbone import BACKBONES, load_backbone, quiet_transformers, strip_pooler
from rewardsmith.models.beta import BetaRewardModel
from rewardsmith.models.gguf import without_gguf_marker
from rewardsmith.models.reward_model import PooledBackbone, RewardModel
from rewardsmith.models.weights import from_pretrained_exact, load_adapter_exact, require_safetensors

META_FILE = "rewardsmith.json"
HEADS_FILE = "heads.safetensors"
FORMAT = "rewardsmith.model/1"
MODEL_TYPES = ("reward", "icrm")


def resolve_pooling(pooling: str, kind: str) -> str:
    if pooling == "auto":
        return "last" if kind == "decoder" else "mean"
    return pooling


def model_type_of(model: PooledBackbone) -> str:
    return "icrm" if isinstance(model, BetaRewardModel) else "reward"


def apply_lora(model: PooledBackbone, lora: LoraSettings) -> None:
    """Wraps the backbone in a peft LoRA adapter; the heads stay fully trainable."""
    from peft import LoraConfig, get_peft_model

    targets: Any = list(lora.target_modules) or None
    if targets is None and model.kind == "encoder" and model.config.model_type == "bert":
        targets = ["query", "value"]
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets, bias="none")
    model.backbone = get_peft_model(model.backbone, config)


def is_lora(model: PooledBackbone) -> bool:
    return hasattr(model.backbone, "peft_config")


def _assemble(cfg: ModelConfig, backbone: Any, kind: str) -> PooledBackbone:
    use_rewardsmith_attention(backbone)
    pooling = resolve_pooling(cfg.pooling, kind)
    if isinstance(cfg, ICRMModelConfig):
        return BetaRewardModel(backbone, pooling, kind, cfg.backbone, cfg.mode, cfg.context_dim, cfg.hidden_dim)
    return RewardModel(backbone, pooling, kind, cfg.backbone)


def check_max_length(config: Any, max_length: int, name: str) -> None:
    """ConfigError when sequences of `max_length` tokens would pass the backbone's position table (an encoder
    with learned positions fails with an IndexError on the first long input otherwise)."""
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and max_length > positions:
        raise ConfigError(
            f"model.max_length {max_length} is more than backbone {name!r} has positions for "
            f"({positions}); use --max-length {positions} or less"
        )


def build_model(cfg: ModelConfig, seed: int = 0) -> tuple[Any, Any]:
    """A model with freshly initialised heads (seeded) and its tokenizer: a BetaRewardModel for an
    ICRMModelConfig, else a RewardModel. LoRA and freezing as configured."""
    if isinstance(cfg, ICRMModelConfig) and cfg.mode == "set" and not cfg.freeze_backbone:
        raise ConfigError(
            "set-mode training reads cached embeddings: set model.freeze_backbone: true "
            "(concat mode fine-tunes the backbone)"
        )
    if isinstance(cfg, ICRMModelConfig) and cfg.mode == "concat" and cfg.template != "hh":
        raise ConfigError("concat mode writes the demonstrations into the prompt in HH framing: set model.template: hh")
    loaded = load_backbone(cfg.backbone, cfg.num_layers, cfg.dropout)
    check_max_length(loaded.model.config, cfg.max_length, cfg.backbone)
    torch.manual_seed(seed)
    model = _assemble(cfg, loaded.model, loaded.kind)
    if cfg.lora.r > 0:
        apply_lora(model, cfg.lora)
    if cfg.freeze_backbone:
        model.backbone.requires_grad_(False)
    if loaded.tokenizer.pad_token_id is None:
        loaded.tokenizer.pad_token = loaded.tokenizer.eos_token
    resolve_template(cfg.template, loaded.tokenizer)  # a template the tokenizer cannot write fails before training
    if model.pooling == "last":
        model.pad_token_id = int(loaded.tokenizer.pad_token_id)
    return model, loaded.tokenizer


def build_reward_model(cfg: ModelConfig, seed: int = 0) -> tuple[RewardModel, Any]:
    """build_model for a scalar reward model (typed for callers that need a RewardModel)."""
    if isinstance(cfg, ICRMModelConfig):
        raise ConfigError("build_reward_model takes a ModelConfig, not an ICRM model config")
    model, tokenizer = build_model(cfg, seed)
    return model, tokenizer


# ----------------------------------------------------------------------------------------------------
# Saving


def save_model(
    model: PooledBackbone, tokenizer: Any, out_dir: str | Path, cfg: ModelConfig, extra: dict[str, Any] | None = None
) -> Path:
    """Writes the model folder described in the module docstring, atomically. Returns out_dir.

    A folder is self-contained: a frozen backbone is named only when the name is a registered one (minilm,
    smollm2, ...); one read from a local folder is stored inside the model folder, so the model still loads
    when copied elsewhere or used from another working directory. A failed write (a full disk) is a one-line
    CheckpointError and leaves any earlier folder as it was."""
    out_dir = Path(out_dir)
    try:
        with atomic_folder(out_dir) as tmp, no_deepspeed_probe():
            storage = _save_backbone(model, cfg, tmp)
            tokenizer.save_pretrained(str(tmp))
            heads = {
                k: v.detach().float().cpu().contiguous().clone()
                for k, v in model.state_dict().items()
                if not k.startswith(("backbone.", "debias."))
            }
            save_file(heads, str(tmp / HEADS_FILE))
            meta = {
                "format": FORMAT,
                "model_type": model_type_of(model),
                "pooling": model.pooling,
                "kind": model.kind,
                "backbone_storage": storage,
                "model_config": to_dict(cfg),
                "template": resolve_template(cfg.template, tokenizer),
                "pad_token_id": model.pad_token_id,
                **(extra or {}),
            }
            if storage == "lora-adapter" and cfg.backbone not in BACKBONES and Path(cfg.backbone).is_dir():
                meta["backbone_path"] = str(Path(cfg.backbone).resolve())  # the adapter's base, from anywhere
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    except (OSError, SafetensorError) as exc:
        raise CheckpointError(f"{out_dir}: cannot write the model ({first_line(exc)})") from None
    return out_dir


def _save_backbone(model: PooledBackbone, cfg: ModelConfig, folder: Path) -> str:
    """Writes the backbone as the folder stores it (no GGUF marker in a config.json: without_gguf_marker).
    Returns the storage: lora-adapter, named, sequence-classification or full."""
    backbone = model.backbone
    without_gguf_marker(backbone.get_base_model() if is_lora(model) else backbone)
    if is_lora(model):
        backbone.save_pretrained(str(folder))  # the adapter only
        return "lora-adapter"
    if cfg.freeze_backbone and cfg.backbone in BACKBONES:
        return "named"
    if isinstance(model, RewardModel) and model.kind == "decoder" and model.pooling == "last":
        as_sequence_classifier(model).save_pretrained(str(folder))
        return "sequence-classification"
    backbone.save_pretrained(str(folder))
    return "full"


def as_sequence_classifier(model: RewardModel) -> Any:
    """A decoder RewardModel with last-token pooling as the transformers *ForSequenceClassification model that
    scores the same (its `score` layer is the reward head; a LoRA adapter is merged into the copy). Raises
    ConfigError for a model the format cannot express."""
    from transformers import AutoModelForSequenceClassification

    if model.kind != "decoder" or model.pooling != "last":
        article = "an" if model.kind[0] in "aeiou" else "a"
        raise ConfigError(
            f"{article} {model.kind} with {model.pooling} pooling cannot be written as "
            "*ForSequenceClassification: transformers' reward models read one token (the last for "
            "decoders, the pooler's [CLS] for BERT); train a decoder with last-token pooling (e.g. "
            "--backbone smollm2) to export one"
        )
    backbone = model.backbone
    if is_lora(model):
        import copy

        backbone = copy.deepcopy(backbone).merge_and_unload()
    config = backbone.config.__class__.from_dict(backbone.config.to_dict())
    config.num_labels = 1
    if model.pad_token_id is not None:
        config.pad_token_id = model.pad_token_id  # the token transformers' pooling skips: the one we skip
    seq = without_gguf_marker(AutoModelForSequenceClassification.from_config(config))
    base = getattr(seq, seq.base_model_prefix)
    base.load_state_dict(backbone.state_dict())
    with torch.no_grad():
        seq.score.weight.copy_(model.head.weight)
    return seq


# ----------------------------------------------------------------------------------------------------
# Loading


def _base_name(cfg: ModelConfig, meta: dict[str, Any]) -> str:
    """The backbone a folder names: its registered name, else the absolute path recorded when it was saved
    (`backbone_path`), else the name as configured (a relative path saved by an older rewardsmith)."""
    if cfg.backbone in BACKBONES:
        return cfg.backbone
    recorded = meta.get("backbone_path")
    return recorded if isinstance(recorded, str) and Path(recorded).is_dir() else cfg.backbone


def read_model_meta(folder: str | Path) -> dict[str, Any]:
    """The parsed rewardsmith.json of a model folder, checked; CheckpointError naming the file otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: model folder not found")
    path = folder / META_FILE
    if not path.exists():
        raise CheckpointError(f"{folder}: not a rewardsmith model folder (no {META_FILE})")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{path}: unreadable ({type(exc).__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("model_type") not in MODEL_TYPES:
        raise CheckpointError(f"{path}: not a {FORMAT} model description")
    config_cls = ICRMModelConfig if meta["model_type"] == "icrm" else ModelConfig
    raw = meta.get("model_config")
    if isinstance(raw, dict) and "template" not in raw:
        raw = {**raw, "template": "hh"}  # written before templates existed: every such model was trained in HH
    try:
        meta["model_config"] = from_dict(config_cls, raw)
    except ConfigError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    return meta


def load_model(folder: str | Path) -> tuple[Any, Any, dict[str, Any]]:
    """Loads a folder written by save_model. Returns (model in eval mode, tokenizer, metadata) with
    metadata["model_config"] the parsed ModelConfig / ICRMModelConfig."""
    from transformers import AutoModel, AutoTokenizer

    quiet_transformers()
    folder = Path(folder)
    meta = read_model_meta(folder)
    require_safetensors(folder, ignore=(HEADS_FILE,))
    cfg: ModelConfig = meta["model_config"]
    heads_path = folder / HEADS_FILE
    if not heads_path.exists():
        raise CheckpointError(f"{folder}: missing {HEADS_FILE}")
    try:
        heads = load_file(str(heads_path))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{heads_path}: unreadable ({first_line(exc)})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        storage = meta.get("backbone_storage")
        if storage == "named":
            backbone = load_backbone(_base_name(cfg, meta), cfg.num_layers, cfg.dropout, allow_hub=False).model
        elif storage == "lora-adapter":
            base = load_backbone(_base_name(cfg, meta), cfg.num_layers, cfg.dropout, allow_hub=False).model
            backbone = load_adapter_exact(base, folder)
        elif storage in ("full", "sequence-classification"):
            backbone = strip_pooler(from_pretrained_exact(AutoModel, folder, allow_missing=("pooler.",)))
        else:
            raise CheckpointError(f"{folder / META_FILE}: unknown backbone_storage {storage!r}")
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        raise CheckpointError(f"{folder}: cannot load the backbone ({first_line(exc)})") from None
    except CheckpointError:
        raise  # already names its folder
    except RewardsmithError as exc:
        raise CheckpointError(f"{folder}: {exc}") from None
    model = _assemble(cfg, backbone, meta["kind"])
    model.pooling = meta["pooling"]
    pad = meta.get("pad_token_id")
    model.pad_token_id = pad if isinstance(pad, int) and not isinstance(pad, bool) else None
    try:
        meta["template"] = meta.get("template") or resolve_template(cfg.template, tokenizer)
    except ConfigError as exc:
        raise CheckpointError(f"{folder}: {exc}") from None
    try:
        missing, unexpected = model.load_state_dict(heads, strict=False)
    except RuntimeError as exc:  # a tensor of another shape than the config gives
        raise CheckpointError(
            f"{heads_path}: heads do not match the model config ({one_line(first_line(exc))})"
        ) from None
    bad_missing = [k for k in missing if not k.startswith("backbone.")]
    if unexpected or bad_missing:
        raise CheckpointError(f"{heads_path}: heads do not match the model config ({(unexpected or bad_missing)[0]})")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer, meta
