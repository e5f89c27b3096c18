"""One way in for every reward model: `load_reward_model(source)` returns a LoadedModel for

- a rewardsmith model folder (`rewardsmith.json`: a scalar reward model or an in-context ICRM);
- a Hugging Face `*ForSequenceClassification` folder with one label (TRL's RewardTrainer output, LLaMA-Factory's,
  the public Llama / Qwen / Gemma reward models), a local path or a hub id where the network allows;
- an OpenRLHF reward checkpoint (`train_rm`'s save format: the base model's weights under its
  `base_model_prefix`, a bias-free `value_head` read at the last attended token, and `normalize_reward`, `mean`
  and `std` in config.json);
- a PEFT LoRA adapter folder (`adapter_config.json`) over either of the last two.

Weights are read from safetensors only (models/weights.py), and a model's own code runs only when the caller
passes trust_remote_code (the refusal says so in one line). A LoadedModel's `model` maps a padded batch
(data.collate.pad_texts) to an object whose `rewards` is (B,) float32, so one scoring loop (evaluate.scoring)
serves every kind; its `encoder()` turns conversations into tokens in the model's template (data.templates).
Scores equal a plain transformers forward of the same token ids, one sequence at a time: position ids count
real tokens only, so neither batch size nor padding side changes a score.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rewardsmith.config import ModelConfig
from rewardsmith.data.templates import TextEncoder, make_encoder, resolve_template
from rewardsmith.errors import CheckpointError, ConfigError, first_line
from rewardsmith.io.environment import hub_notice, hub_offline
from rewardsmith.models.backbone import quiet_transformers
from rewardsmith.models.factory import META_FILE, load_model
from rewardsmith.models.weights import from_pretrained_exact, load_adapter_exact, require_safetensors
from rewardsmith.registry import Registry

DEFAULT_MAX_LENGTH = 1024  # TRL's RewardConfig default, capped at the model's positions
DEFAULT_MIN_PROMPT_TOKENS = 64
EXPORT_KEY = "rewardsmith"  # config.json section an exported folder carries: template, max_length


@dataclass
class ExternalOutput:
    """rewards: (B,) float32 of a model rewardsmith did not build."""

    rewards: torch.Tensor


@dataclass
class LoadedModel:
    """A reward model ready to score, whatever wrote it.

    kind: rewardsmith | sequence-classification | openrlhf (+ "+lora" over an adapter); model_type: reward or
    icrm; template: the concrete text format (chat | plain | hh); bf16: the precision it was trained in (the
    default for scoring); pad_id: the id batches are padded with (the one the model's pooling skips); meta: the
    rewardsmith.json of a rewardsmith folder (model_config parsed), else what was read off the folder."""

    source: str
    kind: str
    model_type: str
    model: nn.Module
    tokenizer: Any
    template: str
    max_length: int
    min_prompt_tokens: int
    bf16: bool
    pad_id: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def model_config(self) -> ModelConfig | None:
        """The rewardsmith model config (None for a model from elsewhere)."""
        cfg = self.meta.get("model_config")
        return cfg if isinstance(cfg, ModelConfig) else None

    @property
    def in_context(self) -> bool:
        return self.model_type == "icrm"

    def encoder(self) -> TextEncoder:
        """A fresh encoder of this model's template and budget (its counts start at zero)."""
        return make_encoder(self.tokenizer, self.template, self.max_length, self.min_prompt_tokens, self.source)

    def to(self, device: torch.device | str) -> LoadedModel:
        self.model.to(device)
        return self

    def describe(self) -> str:
        """One line for run summaries: what was loaded and how its texts are written."""
        return (
            f"model {self.source}: {self.kind} {self.model_type} model, template {self.template}, "
            f"{self.max_length} tokens"
        )


class SequenceClassifierReward(nn.Module):
    """A transformers *ForSequenceClassification model with one label: the reward is its logit, pooled by its own
    rule (the rightmost token that is not the pad token)."""

    def __init__(self, hf_model: nn.Module):
        super().__init__()
        self.hf_model = hf_model
        accepted = inspect.signature(hf_model.forward).parameters
        self._positions = "position_ids" in accepted

    @property
    def config(self) -> Any:
        return self.hf_model.config

    def forward(self, batch: dict[str, torch.Tensor]) -> ExternalOutput:
        kwargs: dict[str, Any] = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if self._positions:
            kwargs["position_ids"] = batch["position_ids"]
        logits = self.hf_model(**kwargs, return_dict=True).logits
        return ExternalOutput(logits[:, 0].float())


class OpenRLHFReward(nn.Module):
    """OpenRLHF's reward model: base model -> value head on every token -> the value at the last attended token,
    then (reward - mean) / std when the checkpoint says normalize_reward. Attribute names follow the checkpoint
    (`<base_model_prefix>`, `<value_head_prefix>`), so an OpenRLHF LoRA adapter finds its modules."""

    def __init__(
        self, base: nn.Module, prefix: str, head: nn.Linear, head_name: str, normalize: bool, mean: float, std: float
    ):
        super().__init__()
        self.prefix, self.head_name = prefix, head_name
        setattr(self, prefix, base)
        setattr(self, head_name, head)
        self.normalize = normalize
        self.register_buffer("mean", torch.tensor(float(mean)), persistent=False)
        self.register_buffer("std", torch.tensor(float(std)), persistent=False)

    @property
    def config(self) -> Any:
        return getattr(self, self.prefix).config

    def forward(self, batch: dict[str, torch.Tensor]) -> ExternalOutput:
        base = getattr(self, self.prefix)
        mask = batch["attention_mask"]
        hidden = base(
            input_ids=batch["input_ids"], attention_mask=mask, position_ids=batch["position_ids"], return_dict=True
        ).last_hidden_state
        values = getattr(self, self.head_name)(hidden).squeeze(-1).float()
        last = mask.shape[1] - 1 - mask.long().fliplr().argmax(dim=1)
        reward = values[torch.arange(values.shape[0], device=values.device), last]
        if self.normalize:
            reward = (reward - self.mean) / self.std
        return ExternalOutput(reward)


# ----------------------------------------------------------------------------------------------------------
# Reading a folder


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{path}: unreadable ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def _safetensor_keys(folder: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it (one file, or the shards of an index)."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = _read_json(index).get("weight_map", {})
        return {str(k): folder / str(v) for k, v in weight_map.items()}
    out: dict[str, Path] = {}
    for file in sorted(folder.glob("*.safetensors")):
        if file.name.startswith("adapter_model"):
            continue
        with safe_open(str(file), framework="pt") as handle:
            out.update({k: file for k in handle.keys()})  # noqa: SIM118 (safe_open is not a mapping)
    return out


def _tokenizer(folder: Path, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{folder}: cannot load its tokenizer ({first_line(exc)})") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # as TRL does when a tokenizer has no pad token
    return tokenizer


def _check_remote_code(folder: Path, config: dict[str, Any], trust_remote_code: bool) -> None:
    """One-line refusal of a model whose architecture exists only as its own code, unless trusted."""
    from transformers import CONFIG_MAPPING

    if trust_remote_code or config.get("model_type") in CONFIG_MAPPING:
        return
    if config.get("auto_map"):
        raise ConfigError(
            f"{folder}: its config names the model's own code (auto_map); rewardsmith runs a "
            "model's code only when asked: pass --trust-remote-code if you trust it"
        )
    raise CheckpointError(f"{folder}: model_type {config.get('model_type')!r} is not one transformers knows")


def _budget(folder: Path, config: Any, tokenizer: Any, max_length: int | None) -> int:
    exported = getattr(config, EXPORT_KEY, None)
    if max_length is None and isinstance(exported, dict) and isinstance(exported.get("max_length"), int):
        max_length = exported["max_length"]
    positions = getattr(config, "max_position_embeddings", None)
    if max_length is None:
        limits = [DEFAULT_MAX_LENGTH, positions, getattr(tokenizer, "model_max_length", None)]
        max_length = min(int(x) for x in limits if isinstance(x, int) and 8 < x < 10**7)
    if isinstance(positions, int) and max_length > positions:
        raise ConfigError(f"--max-length {max_length} is more than {folder} has positions for ({positions})")
    return int(max_length)


def _template(config: Any, tokenizer: Any, template: str) -> str:
    exported = getattr(config, EXPORT_KEY, None)
    if template == "auto" and isinstance(exported, dict) and exported.get("template") in ("chat", "plain", "hh"):
        return str(exported["template"])
    return resolve_template(template, tokenizer)


def _model_kwargs(trust_remote_code: bool) -> dict[str, Any]:
    return {"trust_remote_code": trust_remote_code, "dtype": torch.float32}


@dataclass(frozen=True)
class LoadOptions:
    template: str = "auto"
    max_length: int | None = None
    min_prompt_tokens: int | None = None
    trust_remote_code: bool = False


Detector = Callable[[Path], bool]
Loader = Callable[[Path, LoadOptions], LoadedModel]


@dataclass(frozen=True)
class ModelKind:
    """How to recognise one kind of folder and load it."""

    detect: Detector
    load: Loader


MODEL_KINDS: Registry[ModelKind] = Registry("model kind")


def _is_rewardsmith(folder: Path) -> bool:
    return (folder / META_FILE).is_file()


def _load_rewardsmith(folder: Path, opts: LoadOptions) -> LoadedModel:
    model, tokenizer, meta = load_model(folder)
    cfg: ModelConfig = meta["model_config"]
    template = meta["template"] if opts.template == "auto" else resolve_template(opts.template, tokenizer)
    max_length = opts.max_length or cfg.max_length
    if opts.max_length is not None:
        from rewardsmith.models.factory import check_max_length

        check_max_length(model.config, opts.max_length, str(folder))
    return LoadedModel(
        str(folder),
        "rewardsmith",
        meta["model_type"],
        model,
        tokenizer,
        template,
        max_length,
        opts.min_prompt_tokens if opts.min_prompt_tokens is not None else cfg.min_prompt_tokens,
        bool(meta.get("bf16", False)),
        int(tokenizer.pad_token_id),
        meta,
    )


def _is_openrlhf(folder: Path) -> bool:
    config = folder / "config.json"
    return config.is_file() and not _is_rewardsmith(folder) and "normalize_reward" in _read_json(config)


def _load_openrlhf(folder: Path, opts: LoadOptions) -> LoadedModel:
    from transformers import AutoConfig, AutoModel

    raw = _read_json(folder / "config.json")
    _check_remote_code(folder, raw, opts.trust_remote_code)
    require_safetensors(folder)
    tokenizer = _tokenizer(folder, opts.trust_remote_code)
    keys = _safetensor_keys(folder)
    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=opts.trust_remote_code)
    base_cls = AutoModel._model_mapping[type(config)]
    prefix = str(getattr(base_cls, "base_model_prefix", "model"))
    head_name = str(raw.get("value_head_prefix", "value_head"))
    if f"{head_name}.weight" not in keys:
        raise CheckpointError(f"{folder}: an OpenRLHF config (normalize_reward) but no {head_name}.weight tensor")
    try:
        kwargs = _model_kwargs(opts.trust_remote_code)
        base = from_pretrained_exact(AutoModel, folder, config=config, **kwargs)
    except (OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{folder}: cannot load the base model ({first_line(exc)})") from None
    from safetensors import safe_open

    with safe_open(str(keys[f"{head_name}.weight"]), framework="pt") as handle:
        weight = handle.get_tensor(f"{head_name}.weight").float()
    if weight.shape != (1, config.hidden_size):
        raise CheckpointError(
            f"{folder}: {head_name}.weight has shape {tuple(weight.shape)}, expected (1, {config.hidden_size})"
        )
    head = nn.Linear(config.hidden_size, 1, bias=False)
    with torch.no_grad():
        head.weight.copy_(weight)
    normalize = bool(raw.get("normalize_reward", False)) and "mean" in raw
    model = OpenRLHFReward(
        base, prefix, head, head_name, normalize, float(raw.get("mean", 0.0)), float(raw.get("std", 1.0))
    )
    meta = {"normalize_reward": normalize, "mean": raw.get("mean"), "std": raw.get("std")}
    return _from_elsewhere(folder, "openrlhf", model, tokenizer, config, opts, int(tokenizer.pad_token_id), meta)


def _from_elsewhere(
    folder: Path,
    kind: str,
    model: nn.Module,
    tokenizer: Any,
    config: Any,
    opts: LoadOptions,
    pad_id: int,
    meta: dict[str, Any],
) -> LoadedModel:
    """The LoadedModel of a scalar reward model another tool wrote: its template and token budget read off its
    config and tokenizer (or as `opts` set them), fp32 by default."""
    return LoadedModel(
        str(folder),
        kind,
        "reward",
        model.eval(),
        tokenizer,
        _template(config, tokenizer, opts.template),
        _budget(folder, config, tokenizer, opts.max_length),
        opts.min_prompt_tokens or DEFAULT_MIN_PROMPT_TOKENS,
        False,
        pad_id,
        meta,
    )


def _is_sequence_classification(folder: Path) -> bool:
    config = folder / "config.json"
    if not config.is_file() or _is_rewardsmith(folder):
        return False
    architectures = _read_json(config).get("architectures") or []
    return any(str(a).endswith("ForSequenceClassification") for a in architectures)


def _load_sequence_classification(folder: Path, opts: LoadOptions) -> LoadedModel:
    from transformers import AutoConfig, AutoModelForSequenceClassification

    raw = _read_json(folder / "config.json")
    _check_remote_code(folder, raw, opts.trust_remote_code)
    require_safetensors(folder)
    tokenizer = _tokenizer(folder, opts.trust_remote_code)
    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=opts.trust_remote_code)
    if getattr(config, "num_labels", 1) != 1:
        raise CheckpointError(f"{folder}: a classifier with {config.num_labels} labels; a reward model has one")
    text_config = config.get_text_config()
    if text_config.pad_token_id is None:
        text_config.pad_token_id = tokenizer.pad_token_id  # as TRL sets it, so batches can be pooled
    try:
        kw = _model_kwargs(opts.trust_remote_code)
        hf = from_pretrained_exact(AutoModelForSequenceClassification, folder, config=config, **kw)
    except (OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{folder}: cannot load the model ({first_line(exc)})") from None
    model = SequenceClassifierReward(hf.eval())
    meta = {"architectures": raw.get("architectures")}
    pad_id = int(text_config.pad_token_id)
    return _from_elsewhere(folder, "sequence-classification", model, tokenizer, config, opts, pad_id, meta)


def _is_adapter(folder: Path) -> bool:
    return (folder / "adapter_config.json").is_file() and not _is_rewardsmith(folder)


def _load_adapter(folder: Path, opts: LoadOptions) -> LoadedModel:
    raw = _read_json(folder / "adapter_config.json")
    base_name = raw.get("base_model_name_or_path")
    if not isinstance(base_name, str) or not base_name:
        raise CheckpointError(f"{folder / 'adapter_config.json'}: names no base model (base_model_name_or_path)")
    base_path = Path(base_name) if Path(base_name).is_absolute() else folder / base_name
    base_source = str(base_path) if base_path.is_dir() else base_name
    require_safetensors(folder, "adapter")
    base = load_reward_model(
        base_source, opts.template, opts.max_length, opts.min_prompt_tokens, opts.trust_remote_code
    )
    if base.kind not in ("sequence-classification", "openrlhf"):
        raise CheckpointError(
            f"{folder}: a LoRA adapter over a {base.kind} model; rewardsmith keeps its own "
            "adapters inside its model folders (train --lora-r)"
        )
    target: nn.Module = base.model.hf_model if isinstance(base.model, SequenceClassifierReward) else base.model
    try:
        adapted = load_adapter_exact(target, folder)
        merged = adapted.merge_and_unload()
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise CheckpointError(f"{folder}: cannot apply the adapter ({first_line(exc)})") from None
    model = SequenceClassifierReward(merged) if isinstance(base.model, SequenceClassifierReward) else merged
    base.model, base.kind, base.source = model.eval(), f"{base.kind}+lora", str(folder)
    base.meta = {**base.meta, "adapter_of": base_source}
    return base


MODEL_KINDS.add("rewardsmith", ModelKind(_is_rewardsmith, _load_rewardsmith))
MODEL_KINDS.add("lora-adapter", ModelKind(_is_adapter, _load_adapter))
MODEL_KINDS.add("openrlhf", ModelKind(_is_openrlhf, _load_openrlhf))
MODEL_KINDS.add("sequence-classification", ModelKind(_is_sequence_classification, _load_sequence_classification))


def _local_folder(source: str) -> Path:
    """A local folder for `source`: the path itself, or a hub id's snapshot where the network (or the cache)
    has it."""
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_dir():
            raise CheckpointError(f"{path}: not a model folder")
        return path
    if "/" not in source or source.startswith((".", "/")):
        raise CheckpointError(f"{source}: model folder not found")
    from huggingface_hub import snapshot_download

    offline = hub_offline()  # read now: huggingface_hub reads it once, on import
    if not offline:
        hub_notice(source)
    try:
        return Path(
            snapshot_download(
                source,
                allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "tokenizer*"],
                local_files_only=offline,  # offline: the local cache only, the hub is not asked
            )
        )
    except Exception as exc:  # offline, unknown id, no access: all mean "not here"
        if offline:
            raise CheckpointError(
                f"{source}: not a local folder, nor in the local hub cache; HF_HUB_OFFLINE is set, so the hub is "
                "not asked"
            ) from None
        raise CheckpointError(
            f"{source}: not a local folder, and the hub cannot give it here ({type(exc).__name__}: {first_line(exc)})"
        ) from None


def load_reward_model(
    source: str | Path,
    template: str = "auto",
    max_length: int | None = None,
    min_prompt_tokens: int | None = None,
    trust_remote_code: bool = False,
) -> LoadedModel:
    """The LoadedModel of a folder or hub id (see the module docstring), in eval mode on the CPU.

    template: auto (what the model was trained with, when its folder says so; else chat when the tokenizer has a
    chat template; else plain), chat, plain or hh. max_length: the token budget (default: the model's own, or
    1024 capped at its positions)."""
    from rewardsmith.models.ensemble import is_ensemble

    if is_ensemble(source):
        raise ConfigError(
            f"{source}: an ensemble of reward models (ensemble.json), not one model; score, eval, bench, calibrate "
            "--model and bon take it, but this command needs one model: give it a member"
        )
    quiet_transformers()
    folder = _local_folder(str(source))
    opts = LoadOptions(template, max_length, min_prompt_tokens, trust_remote_code)
    for name in MODEL_KINDS.names():
        kind = MODEL_KINDS.get(name)
        if kind.detect(folder):
            return kind.load(folder, opts)
    found = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
    raise CheckpointError(
        f"{folder}: not a reward model rewardsmith can read (found {found}); it reads rewardsmith "
        "folders, *ForSequenceClassification folders with one label, OpenRLHF reward checkpoints "
        "and LoRA adapters over them"
    )
