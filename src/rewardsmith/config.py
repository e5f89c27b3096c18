"""Typed configuration: one dataclass per component. YAML files and CLI flags only fill these fields;
help text lives once, in each field's metadata."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from rewardsmith.errors import ConfigError

T = TypeVar("T")


def option(default: Any, help: str, **kwargs: Any) -> Any:
    """A dataclass field with its help text (shown by --help and in docs)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kwargs})
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass
class DatasetConfig:
    name: str = option("synthetic/source", "registered dataset name (see `rewardsmith datasets`)")
    split: str | None = option(None, "file/split to read; None = the dataset's default")
    limit: int | None = option(None, "keep at most this many pairs")
    path: str | None = option(None, "file path for the `file` adapter, or hub id for `hub`")
    columns: dict[str, str] = option({}, "column mapping for `file`/`hub`: field -> column")
    on_bad_row: str = option("error", "error: stop at the first malformed row; skip: drop and count it")


@dataclass
class DataConfig:
    train: DatasetConfig = field(default_factory=DatasetConfig)
    eval: list[DatasetConfig] = field(default_factory=list)
    data_dir: str | None = option(None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)")
    train_fraction: float = option(0.8, "fraction of the training source used for training; the rest (split by "
                                   "a hash of the first human turn) is the held-out set")
    train_pairs: int | None = option(None, "use at most this many training pairs after splitting")
    eval_pairs: int | None = option(None, "use at most this many held-out pairs per eval set")


@dataclass
class LoraSettings:
    r: int = option(0, "LoRA rank; 0 = full fine-tune")
    alpha: int = option(16, "LoRA alpha")
    dropout: float = option(0.0, "LoRA dropout")
    target_modules: list[str] = option([], "module names to adapt; empty = peft's default for the architecture")


@dataclass
class ModelConfig:
    backbone: str = option("minilm", "minilm | smollm2 | tiny-bert | tiny-llama | a local folder | a hub id")
    pooling: str = option("auto", "mean (over response tokens) | last | cls | auto (mean for encoders, "
                                  "last for decoders)")
    max_length: int = option(256, "tokens per (prompt, response) sequence")
    min_prompt_tokens: int = option(64, "prompt tokens always kept when the response is long")
    num_layers: int | None = option(None, "keep only the first k transformer layers (e.g. a weak teacher)")
    dropout: float | None = option(0.0, "dropout probability everywhere (0 is 1.7-2.7x faster on CPU); "
                                   "None keeps the pretrained value")
    freeze_backbone: bool = option(False, "train the head only (a linear probe)")
    lora: LoraSettings = field(default_factory=LoraSettings)


@dataclass
class TrainConfig:
    epochs: float = option(1.0, "passes over the training pairs (fractions allowed)")
    batch_size: int = option(16, "pairs per optimiser step (before accumulation)")
    grad_accum: int = option(1, "gradient accumulation steps")
    lr: float = option(2e-5, "peak learning rate (AdamW)")
    head_lr: float | None = option(None, "learning rate of the scalar head; None = lr")
    weight_decay: float = option(0.0, "AdamW weight decay")
    warmup_ratio: float = option(0.1, "linear warm-up as a fraction of steps, then linear decay")
    max_grad_norm: float = option(1.0, "gradient clipping norm; 0 disables")
    loss: str = option("bt", "training objective (registry name)")
    swap_pairs: bool = option(True, "randomly swap chosen/rejected (label -> 1 - label); a seeded choice per "
                              "pair and epoch")
    bf16: bool = option(False, "bf16 autocast for the backbone (pooling and head stay fp32)")
    seed: int = option(0, "seed for initialisation, data order and swaps")
    checkpoint_every: int = option(50, "steps between atomic checkpoints (0 = only at the end)")
    log_every: int = option(10, "steps between progress-log lines")
    eval_batch_size: int = option(64, "pairs per inference batch")
    max_steps: int | None = option(None, "stop after this many optimiser steps")
    progress: bool = option(True, "show progress bars")


@dataclass
class RunConfig:
    """Everything `rewardsmith train` needs; config.yaml in a run directory is this, resolved."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    save_model: bool = option(True, "write model/ (safetensors, HF folder) into the run directory")


def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def from_dict(cls: type[T], data: dict[str, Any] | None, where: str = "") -> T:
    """Builds a (nested) dataclass from a dict, rejecting unknown keys with a one-line ConfigError."""
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"unknown config key {where}{unknown[0]!r}; known: {', '.join(sorted(names))}")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{where}{name}.")
    return cls(**kwargs)


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"config key {where[:-1]!r} must be a mapping")
        return from_dict(tp, value, where)  # type: ignore[arg-type]
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _convert(args[0], value, where)
    if origin is list:
        (inner,) = typing.get_args(tp)
        if not isinstance(value, list):
            value = [value]
        return [_convert(inner, v, where) for v in value]
    if tp in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return tp(value)
    if tp is bool and not isinstance(value, bool):
        raise ConfigError(f"config key {where[:-1]!r} must be true or false, got {value!r}")
    if tp is str and not isinstance(value, str):
        raise ConfigError(f"config key {where[:-1]!r} must be a string, got {value!r}")
    return value


def load_yaml(cls: type[T], path: str | Path) -> T:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    try:
        return from_dict(cls, data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def save_yaml(obj: Any, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(to_dict(obj), sort_keys=False))


def apply_overrides(obj: Any, overrides: dict[str, Any]) -> None:
    """Sets dotted keys (`train.lr`, `model.backbone`) on a nested config; None values are ignored."""
    for dotted, value in overrides.items():
        if value is None:
            continue
        target = obj
        *parents, leaf = dotted.split(".")
        for name in parents:
            target = getattr(target, name)
        if not hasattr(target, leaf):
            raise ConfigError(f"unknown config key {dotted!r}")
        setattr(target, leaf, value)


def help_of(cls: type, name: str) -> str:
    """The help text declared next to a dataclass field (used by the CLI so it is written once)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return str(f.metadata.get("help", ""))
    raise KeyError(name)
