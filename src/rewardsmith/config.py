"""Typed configuration: one dataclass per component. YAML files and CLI flags only fill these fields; help
text, allowed ranges and choices live once, in each field's metadata, and every value is checked on load
(types exactly: an integer field refuses 16.5, a number field refuses "one")."""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from rewardsmith.errors import ConfigError, first_line

T = TypeVar("T")

_MISSING = object()
MAX_SEED = 2**32 - 1  # numpy's seeds are 32-bit; one bound for every seed option
MAX_THREADS = 1024  # one bound for every thread-count option: beyond any machine's cores, far more only exhausts memory


def option(
    default: Any,
    help: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: Sequence[str] | None = None,
    min_exclusive: bool = False,
    volatile: bool = False,
) -> Any:
    """A dataclass field with its help text and checks.

    min / max: inclusive bounds for numbers (min_exclusive: strictly above min); choices: allowed strings;
    volatile: may change between a run and its resume (progress bars, data paths).
    """
    metadata = {
        "help": help,
        "min": min,
        "max": max,
        "choices": tuple(choices) if choices else None,
        "min_exclusive": min_exclusive,
        "volatile": volatile,
    }
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class DatasetConfig:
    name: str = option(
        "synthetic/source",
        "registered dataset name (`rewardsmith datasets` lists them), or "
        "`file` (a JSONL / Parquet / CSV file given by path) or `hub` (a Hugging Face dataset id "
        "given by path)",
    )
    split: str | None = option(None, "file/split to read; None = the dataset's default")
    limit: int | None = option(None, "keep at most this many pairs", min=1)
    path: str | None = option(None, "file path for the `file` adapter, or hub id for `hub`")
    columns: dict[str, str] = option({}, "column mapping for `file`/`hub`: field -> column")
    on_bad_row: str = option(
        "error", "error: stop at the first malformed row; skip: drop and count it", choices=("error", "skip")
    )

    @property
    def label(self) -> str:
        """How the set is named in tables: the file name for `file`, the id for `hub`, else the name."""
        if self.name in ("file", "hub") and self.path:
            base = Path(self.path).name if self.name == "file" else self.path
            return base if self.split is None else f"{base}:{self.split}"
        return self.name if self.split is None else f"{self.name}:{self.split}"


@dataclass
class DataConfig:
    train: DatasetConfig = field(default_factory=DatasetConfig)
    eval: list[DatasetConfig] = option(
        [],
        "more evaluation datasets (a list of mappings with the keys of data.train); "
        "their conversations seen in training are removed",
    )
    data_dir: str | None = option(
        None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)", volatile=True
    )
    train_fraction: float = option(
        0.8,
        "fraction of the training source used for training; the rest is the held-out set (parts as data.split cuts "
        "them)",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )
    val_fraction: float = option(
        0.0,
        "fraction of the training source kept as a validation split (the hash range "
        "after the training part), for choosing settings without the reported sets",
        min=0.0,
        max=1.0,
    )
    split: str = option(
        "hash",
        "how the training source is cut into its training, validation and held-out parts: hash (by a hash of each "
        "pair's first human turn, so a conversation stays on one side; pairs that share an opening turn go together) "
        "| row (by a hash of each row: the parts hold their fractions even when many pairs share an opening turn, "
        "as templated data does, and a conversation may sit on both sides)",
        choices=("hash", "row"),
    )
    train_pairs: int | None = option(None, "use at most this many training pairs after splitting", min=1)
    eval_pairs: int | None = option(None, "use at most this many held-out pairs per eval set", min=1)
    bootstrap: int | None = option(
        None,
        "resample the training pairs with replacement (as many as there are), with this seed: a bootstrap member "
        "of an ensemble; none = the pairs as split",
        min=0,
    )


@dataclass
class LoraSettings:
    r: int = option(0, "LoRA rank; 0 = full fine-tune", min=0)
    alpha: int = option(16, "LoRA alpha", min=1)
    dropout: float = option(0.0, "LoRA dropout", min=0.0, max=1.0)
    target_modules: list[str] = option([], "module names to adapt; empty = peft's default for the architecture")


TEMPLATES = ("auto", "chat", "plain", "hh")


@dataclass
class ModelConfig:
    backbone: str = option("minilm", "minilm | smollm2 | tiny-bert | tiny-llama | a local folder | a hub id")
    template: str = option(
        "auto",
        "how a conversation becomes tokens: chat (the tokenizer's chat template, as TRL "
        "tokenises conversational pairs) | plain (prompt + response + EOS as one text, as TRL "
        "tokenises standard pairs) | hh (HH framing in the tokenizer's pair template, as "
        "rewardsmith's MiniLM models were trained) | auto (chat when the tokenizer has a chat "
        "template, else plain); a saved model records the one it used",
        choices=TEMPLATES,
    )
    pooling: str = option(
        "auto",
        "mean (over response tokens) | last | cls | auto (mean for encoders, last for decoders)",
        choices=("auto", "mean", "last", "cls"),
    )
    max_length: int = option(256, "tokens per (prompt, response) sequence", min=16)
    min_prompt_tokens: int = option(64, "prompt tokens always kept when the response is long", min=0)
    num_layers: int | None = option(None, "keep only the first k transformer layers (e.g. a weak teacher)", min=1)
    dropout: float | None = option(
        0.0,
        "dropout probability everywhere (0 is 1.7-2.7x faster on CPU); None keeps the pretrained value",
        min=0.0,
        max=1.0,
    )
    freeze_backbone: bool = option(
        False, "train the heads only (a linear probe); a frozen backbone is named in the saved model, not copied"
    )
    lora: LoraSettings = field(default_factory=LoraSettings)


@dataclass
class ICRMModelConfig(ModelConfig):
    """An in-context (ICRM) model: the backbone settings of ModelConfig plus the conditioning heads."""

    template: str = option(
        "hh",
        "as for a reward model (chat | plain | hh | auto); concat mode writes the "
        "demonstrations into the prompt in HH framing and needs hh",
        choices=TEMPLATES,
    )
    max_length: int = option(
        192,
        "tokens per (prompt, response) sequence (set mode); concat mode: the whole "
        "context, demonstrations included, so N is bounded by it",
        min=16,
    )
    min_prompt_tokens: int = option(48, "prompt tokens always kept when the response is long", min=0)
    freeze_backbone: bool = option(
        True,
        "set mode: train the heads on cached backbone embeddings (frozen "
        "backbone); concat mode: False fine-tunes the backbone",
    )
    mode: str = option(
        "set",
        "set: demonstrations encoded once each and pooled into a context vector; "
        "concat: demonstrations serialised into the context before the target",
        choices=("set", "concat"),
    )
    context_dim: int = option(128, "width of demonstration vectors and the pooled context vector (set mode)", min=1)
    hidden_dim: int = option(256, "width of the confidence head's hidden layer", min=1)


DEBIAS_KINDS = ("none", "length-covariate", "odin", "length-balanced")
REPORT_TO = ("none", "tensorboard", "wandb", "mlflow", "trackio")
BATCHES = ("length-grouped", "random")  # TrainConfig.batches


@dataclass
class DebiasSettings:
    """Length debiasing of pair training (rewardsmith.models.debias, rewardsmith.losses.debias)."""

    kind: str = option(
        "none",
        "none | length-covariate (a learned h(length) in the training logit, dropped when "
        "scoring) | odin (a length head and a quality head; scores use the quality head) | "
        "length-balanced (chosen-longer and chosen-shorter pairs carry equal weight)",
        choices=DEBIAS_KINDS,
    )
    lr: float = option(1e-3, "learning rate of the training-only length head", min=0.0, min_exclusive=True)
    correlation_coef: float = option(
        1.0, "odin: weight of |corr(quality, length)| - corr(length head, length)", min=0.0
    )
    orthogonal_coef: float = option(1.0, "odin: weight of |cos| between the quality and length heads", min=0.0)


@dataclass
class TrainConfig:
    """The training loop every model shares (preference pairs and ICRM episodes)."""

    epochs: float = option(
        1.0, "passes over the training pairs (fractions allowed; pair training)", min=0.0, min_exclusive=True
    )
    max_steps: int | None = option(
        None, "stop after this many optimiser steps (episode training: the length of the run)", min=1
    )
    batch_size: int = option(16, "pairs (or episodes) per micro-batch", min=1)
    grad_accum: int = option(1, "micro-batches per optimiser step (gradient accumulation)", min=1)
    lr: float = option(2e-5, "peak learning rate of the backbone (AdamW)", min=0.0, min_exclusive=True)
    head_lr: float | None = option(None, "peak learning rate of the heads; None = lr", min=0.0, min_exclusive=True)
    weight_decay: float = option(0.0, "AdamW weight decay", min=0.0)
    warmup_ratio: float = option(0.1, "linear warm-up as a fraction of steps, then linear decay", min=0.0, max=1.0)
    max_grad_norm: float = option(1.0, "gradient clipping norm; 0 disables", min=0.0)
    loss: str = option("bt", "training objective (registry name)")
    swap_pairs: bool = option(
        True, "randomly swap chosen/rejected (label -> 1 - label); a seeded choice per pair and epoch"
    )
    bf16: bool = option(False, "bf16 autocast of the backbone (fp32 where not native)")
    batches: str = option(
        "length-grouped",
        "how pairs form micro-batches: length-grouped (pairs of similar length together, in a seeded random "
        "order; less padding) or random",
        choices=BATCHES,
    )
    forward_groups: bool = option(
        True,
        "run each micro-batch's texts as groups of similar length, each padded to its own longest (the same "
        "loss and gradients to float rounding, less padding computed)",
        volatile=True,
    )
    compile: bool = option(
        False,
        "torch.compile the backbone for training (dynamic shapes); its compile time counts in the run",
        volatile=True,
    )
    seed: int = option(0, "seed for initialisation, data order and swaps", min=0, max=MAX_SEED)
    checkpoint_every: int = option(
        50, "optimiser steps between atomic checkpoints (0 = none: a killed run starts again)", min=0, volatile=True
    )
    checkpoint_minutes: float = option(
        20.0,
        "also write a checkpoint once this many minutes have passed since the last one, so a run of slow steps "
        "loses at most this much to a kill (0 = by steps only; none at all when checkpoint_every is 0)",
        min=0,
        volatile=True,
    )
    progress: bool = option(
        True, "show progress (a bar in a terminal, a line every few percent in a log)", volatile=True
    )
    report_to: str = option(
        "none",
        "experiment tracker that follows the run live, beside log.jsonl (through "
        "Accelerate's trackers; offline: TensorBoard event files, W&B offline files and an "
        "MLflow file store in the run folder's tracking/; trackio: its local store)",
        choices=REPORT_TO,
        volatile=True,
    )
    debias: DebiasSettings = field(default_factory=DebiasSettings)


@dataclass
class EvalSettings:
    batch_size: int = option(64, "pairs per inference batch", min=1, volatile=True)
    n_boot: int = option(1000, "bootstrap replicates of every CI", min=0)


@dataclass
class RunConfig:
    """Everything `rewardsmith train` needs; config.yaml in a run folder is this, resolved."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalSettings = field(default_factory=EvalSettings)
    save_model: bool = option(True, "write model/ (safetensors, HF folder) into the run folder")


def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


# ----------------------------------------------------------------------------------------------------
# Loading and checking


def from_dict(cls: type[T], data: dict[str, Any] | None, where: str = "", base: Any = None) -> T:
    """Builds a (nested) dataclass from a dict. Unknown keys, wrong types and out-of-range values are
    one-line ConfigErrors naming the key and the value. Keys the dict leaves out keep their defaults; for a
    nested section those are the enclosing config's defaults for it (`base`), not the section class's own."""
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"config key {where[:-1]!r} must be a mapping, got {_show(data)}")
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown config key {where + unknown[0]!r}; known: {', '.join(sorted(fields))}")
    kwargs: dict[str, Any] = {}
    if base is not None:
        kwargs = {name: getattr(base, name) for name in fields if fields[name].init and name not in data}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{where}{name}", _field_default(fields[name]))
        _check_range(fields[name], kwargs[name], f"{where}{name}")
    return cls(**kwargs)


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# A decimal number as people write one: 0.1, .5, 3, 1e-5, 2.5E+3 (not nan, inf, 1_000 or words).
_FLOAT_LITERAL = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _convert(tp: Any, value: Any, key: str, default: Any = None) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):  # type: ignore[arg-type]
            return value
        base = default if dataclasses.is_dataclass(default) else None
        return from_dict(tp, value, f"{key}.", base)  # type: ignore[arg-type]
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in typing.get_args(tp):
                return None
            raise ConfigError(f"config key {key!r} must not be empty")
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], value, key)
    if origin is list:
        (inner,) = typing.get_args(tp)
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, str) and not dataclasses.is_dataclass(inner):
            value = _comma_items(value, inner)
        if not isinstance(value, list):
            value = [value]
        return [_convert(inner, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"config key {key!r} must be a mapping, got {_show(value)}")
        return {_convert(key_type, k, key): _convert(value_type, v, f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config key {key!r} must be true or false, got {_show(value)}")
        return value
    if tp is int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (isinstance(value, float) and not value.is_integer())
        ):
            raise ConfigError(f"config key {key!r} must be an integer, got {_show(value)}")
        return int(value)
    if tp is float:
        if isinstance(value, str) and _FLOAT_LITERAL.fullmatch(value):
            value = float(value)  # YAML 1.1 reads 1e-5 (no dot, or no exponent sign) as a string
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
            raise ConfigError(f"config key {key!r} must be a number, got {_show(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key {key!r} must be a string, got {_show(value)}")
        return value
    return value


def _comma_items(text: str, inner: Any) -> list[Any]:
    """A list written as --help shows one ("0,1,2", "q_proj,v_proj"): its comma-separated items, each read as YAML
    (so "8" is a number) unless the list holds strings."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if inner is str:
        return items
    out = []
    for item in items:
        try:
            out.append(yaml.safe_load(item))
        except (yaml.YAMLError, ValueError):  # ValueError: an integer too long for int(); said by the check after
            out.append(item)
    return out


def _check_range(f: dataclasses.Field[Any], value: Any, key: str) -> None:
    meta = f.metadata
    if value is None:
        return
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(f"config key {key!r} must be one of {', '.join(choices)}, got {_show(value)}")
    lo, hi = meta.get("min"), meta.get("max")
    values = value if isinstance(value, list) else [value]
    for v in values:
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        if lo is not None and (v < lo or (meta.get("min_exclusive") and v == lo)):
            bound = f"above {_bound(lo)}" if meta.get("min_exclusive") else f"at least {_bound(lo)}"
            raise ConfigError(f"config key {key!r} must be {bound}, got {_show(v)}")
        if hi is not None and v > hi:
            raise ConfigError(f"config key {key!r} must be at most {_bound(hi)}, got {_show(v)}")


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def validate(obj: Any, where: str = "") -> None:
    """Checks every field of a (nested) config dataclass in place: types and ranges, as on load. Used after
    command-line overrides, which bypass from_dict."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        key = f"{where}{f.name}"
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            validate(value, f"{key}.")
            continue
        if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            for i, item in enumerate(value):
                validate(item, f"{key}[{i}].")
            continue
        setattr(obj, f.name, _convert(hints[f.name], value, key))
        _check_range(f, getattr(obj, f.name), key)


def load_yaml(cls: type[T], path: str | Path, require: dict[str, str] | None = None) -> T:
    """The config of a YAML file, checked as from_dict checks it. require: dotted keys the file must set (a
    default would silently stand in for them) -> what to say when it does not."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:  # ValueError: an integer too long for int()
        raise ConfigError(f"{path}: invalid YAML ({first_line(exc)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    try:
        config = from_dict(cls, data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    for dotted, hint in (require or {}).items():
        section: Any = data
        for name in dotted.split("."):
            section = section.get(name) if isinstance(section, dict) else None
        if section is None:
            raise ConfigError(f"{path}: sets no {dotted}; {hint}")
    return config


def dump_yaml(obj: Any) -> str:
    return yaml.safe_dump(to_dict(obj), sort_keys=False)


def apply_overrides(obj: Any, overrides: dict[str, Any]) -> None:
    """Sets dotted keys (`train.lr`, `model.backbone`) on a nested config (None values are ignored), then
    checks the whole config as on load. A section (a nested config, or a list of them) may be given as the
    mapping or list of mappings YAML would hold."""
    for dotted, value in overrides.items():
        if value is None:
            continue
        target = obj
        *parents, leaf = dotted.split(".")
        for name in parents:
            target = getattr(target, name, None)
            if not dataclasses.is_dataclass(target):
                raise ConfigError(f"unknown config key {dotted!r}")
        if not any(f.name == leaf for f in dataclasses.fields(target)):
            known = ", ".join(f.name for f in dataclasses.fields(target))
            raise ConfigError(f"unknown config key {dotted!r}; known under {'.'.join(parents) or 'the top'}: {known}")
        hint = typing.get_type_hints(type(target))[leaf]
        if isinstance(value, dict | list) and _holds_dataclass(hint):
            value = _convert(hint, value, dotted, getattr(target, leaf))
        setattr(target, leaf, value)
    validate(obj)


def _holds_dataclass(tp: Any) -> bool:
    """True for a dataclass type, or a list / optional of one."""
    if dataclasses.is_dataclass(tp):
        return True
    return any(_holds_dataclass(arg) for arg in typing.get_args(tp))


def config_keys(cls: type, prefix: str = "", defaults: Any = None) -> list[tuple[str, str, Any]]:
    """(dotted YAML key, help, default) of every field of a nested config class, sections flattened. The defaults
    are those of `defaults` (default: `cls()`), so a section whose default factory sets other values than its
    class's fields (ICRMRunConfig.train) shows the values a run gets."""
    defaults = cls() if defaults is None else defaults
    out: list[tuple[str, str, Any]] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out += config_keys(tp, f"{prefix}{f.name}.", getattr(defaults, f.name))  # type: ignore[arg-type]
        else:
            out.append((f"{prefix}{f.name}", str(f.metadata.get("help", "")), getattr(defaults, f.name)))
    return out


def parse_set_options(values: Sequence[str] | None) -> dict[str, Any]:
    """`--set KEY=VALUE` options as {dotted key: value}, each value read as YAML (4, 0.1, true, [a, b],
    {name: x}); a ConfigError names an option without "=" or a value that is not valid YAML."""
    out: dict[str, Any] = {}
    for item in values or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set takes KEY=VALUE (e.g. --set train.grad_accum=4), got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(text) if text.strip() else ""
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer too long for int()
            raise ConfigError(f"--set {key.strip()}: invalid value {_show(text)} ({first_line(exc)})") from None
    return out


def volatile_keys(cls: type, prefix: str = "") -> list[str]:
    """Dotted keys of fields marked volatile (they may change between a run and its resume)."""
    out: list[str] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out += volatile_keys(tp, f"{prefix}{f.name}.")  # type: ignore[arg-type]
        elif f.metadata.get("volatile"):
            out.append(f"{prefix}{f.name}")
    return out


def help_of(cls: type, name: str) -> str:
    """The help text declared next to a dataclass field (used by the CLI so it is written once)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return str(f.metadata.get("help", ""))
    raise KeyError(name)


def default_of(cls: type, name: str) -> Any:
    """The default of a dataclass field (for --help texts)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            return _MISSING
    raise KeyError(name)
