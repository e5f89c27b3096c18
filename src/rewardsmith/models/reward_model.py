"""The models rewardsmith trains share one part: a transformers backbone whose last hidden state is pooled
over the response (PooledBackbone). RewardModel adds a scalar head; BetaRewardModel (models/beta.py) adds
the in-context utility and confidence heads."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from rewardsmith.models.debias import DebiasOutput

POOLINGS = ("mean", "last", "cls")


@dataclass
class RewardOutput:
    """rewards: (B,) float32. hidden_states: layer index -> (B, T, H) (0 = embeddings, L = last layer).
    response_mask: (B, T) bool, the tokens anchoring and mean pooling use. pooled: (B, H) float32."""

    rewards: torch.Tensor
    pooled: torch.Tensor
    response_mask: torch.Tensor
    hidden_states: dict[int, torch.Tensor] = field(default_factory=dict)
    debias: Any = None  # models.debias.DebiasOutput while a debias head is attached and training


def pool(
    hidden: torch.Tensor,
    attention_mask: torch.Tensor,
    response_mask: torch.Tensor,
    pooling: str,
    input_ids: torch.Tensor | None = None,
    pad_token_id: int | None = None,
) -> torch.Tensor:
    """Pools (B, T, H) hidden states to (B, H) in float32.

    mean: average over response tokens; last: the last attended token (the end of the response for
    decoders), or, given the pad token id, the rightmost token that is not the pad token: transformers'
    *ForSequenceClassification rule, so that an exported model reads the same position even where the pad token
    is the EOS token a text ends with; cls: the first attended token (works under left padding too).
    """
    hidden = hidden.float()
    if pooling == "mean":
        weights = response_mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
    positions = torch.arange(attention_mask.shape[1], device=hidden.device).expand_as(attention_mask)
    if pooling == "last" and input_ids is not None and pad_token_id is not None:
        index = (positions * (input_ids != pad_token_id)).argmax(dim=1)
    elif pooling == "last":
        index = torch.where(attention_mask.bool(), positions, -1).max(dim=1).values
    elif pooling == "cls":
        index = torch.where(attention_mask.bool(), positions, attention_mask.shape[1]).min(dim=1).values
    else:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), index]


def _row_keys(batch: dict[str, torch.Tensor]) -> list[bytes]:
    """One key per row: the tokens it attends to and the response tokens it pools (with token types where the
    batch has them), so two rows share a key exactly when the backbone and pooling see the same text."""
    ends = batch["attention_mask"].sum(dim=1).tolist()
    fields = [batch[k] for k in ("input_ids", "response_mask", "token_type_ids") if k in batch]
    return [
        b"".join(f[i, : int(n)].to(torch.int64).cpu().numpy().tobytes() for f in fields) for i, n in enumerate(ends)
    ]


def deterministic_frozen(model: nn.Module) -> bool:
    """Whether the backbone of `model` is frozen and gives one output per text in training mode: no backbone
    parameter trains and no dropout is active (no Dropout module with p > 0, no attention dropout in its config)."""
    backbone = getattr(model, "backbone", None)
    if backbone is None or any(p.requires_grad for p in backbone.parameters()):
        return False
    if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in backbone.modules()):
        return False
    config = getattr(backbone, "config", None)
    names = ("attention_probs_dropout_prob", "attention_dropout", "attn_pdrop")
    return not any(float(getattr(config, name, 0.0) or 0.0) > 0 for name in names)


@contextmanager
def frozen_features(
    model: nn.Module, enabled: bool = True, texts: Iterable[dict[str, torch.Tensor]] = ()
) -> Iterator[None]:
    """While open (and enabled), a PooledBackbone `model` reads each text's pooled representation from a cache
    (PooledBackbone.pooled), first filled from `texts` (batches of model inputs, in the order given); closed, the
    cache is dropped. For a backbone that deterministic_frozen says gives one output per text; anything else
    leaves the model as it is. Filled in a fixed order, the cache holds the same numbers in a run and in its
    resumption, whichever batch comes first."""
    if not enabled or not isinstance(model, PooledBackbone):
        yield
        return
    model.feature_cache = {}
    try:
        device = next(model.parameters()).device
        for batch in texts:
            model.cache_features({k: v.to(device) for k, v in batch.items()})
        yield
    finally:
        model.feature_cache = None


class PooledBackbone(nn.Module):
    """backbone -> hidden states -> response-pooled representation (B, H) in float32.

    Subclasses add heads; `head_parameters()` lists the parameters outside the backbone (the trainer gives
    them their own learning rate, and a saved model stores them in heads.safetensors).
    """

    def __init__(self, backbone: Any, pooling: str = "mean", kind: str = "encoder", backbone_name: str = ""):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.backbone: Any = backbone  # a transformers base model, or a peft wrapper of one
        self.pooling = pooling
        self.kind = kind
        self.backbone_name = backbone_name
        # Set for decoders with last-token pooling (see pool); None keeps the attention-mask rule of older models.
        self.pad_token_id: int | None = None
        # text -> pooled representation while a frozen, deterministic backbone trains (frozen_features)
        self.feature_cache: dict[bytes, torch.Tensor] | None = None

    @property
    def config(self) -> Any:
        return self.backbone.config

    @property
    def hidden_size(self) -> int:
        return int(self.backbone.config.hidden_size)

    @property
    def _no_split_modules(self) -> list[str] | None:
        """The backbone's layer classes, so an FSDP auto-wrap policy by layer class finds them through this model."""
        return getattr(self.backbone, "_no_split_modules", None)

    def head_parameters(self) -> list[nn.Parameter]:
        """Trainable parameters outside the backbone."""
        return [p for name, p in self.named_parameters() if not name.startswith("backbone.")]

    def encode(
        self, batch: dict[str, torch.Tensor], hidden_layers: Sequence[int] = ()
    ) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """Runs the backbone on pad_texts tensors (B, T). Returns the last hidden state (B, T, H) and the
        requested layers (index 0 = embeddings, L = last; negative counts from the end).

        A batch with "forward_group" (B,) (the trainer's, data.collate.forward_groups) runs one backbone pass per
        group of rows, each cut to its own longest text, and the outputs are padded back to (B, T): the same
        values as one pass to float rounding, with less padding computed. The token embeddings are looked up once
        for the whole batch and each pass takes its rows of them, so their backward (a dense gradient the size of
        the vocabulary's matrix, MiniLM's 30,522 x 384) runs once a batch instead of once a group."""
        if "forward_group" in batch:
            return self._encode_in_groups(batch, hidden_layers)
        kwargs: dict[str, Any] = {
            "attention_mask": batch["attention_mask"],
            "position_ids": batch["position_ids"],
        }
        if "inputs_embeds" in batch:
            kwargs["inputs_embeds"] = batch["inputs_embeds"]
        else:
            kwargs["input_ids"] = batch["input_ids"]
        if self.kind == "encoder" and "token_type_ids" in batch and getattr(self.config, "type_vocab_size", 0) > 1:
            kwargs["token_type_ids"] = batch["token_type_ids"]
        want = bool(hidden_layers)
        out = self.backbone(**kwargs, output_hidden_states=want, return_dict=True)
        states = {}
        if want:
            n = len(out.hidden_states)
            states = {layer: out.hidden_states[layer if layer >= 0 else n + layer] for layer in hidden_layers}
        return out.last_hidden_state, states

    def _encode_in_groups(
        self, batch: dict[str, torch.Tensor], hidden_layers: Sequence[int]
    ) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        mask = batch["attention_mask"]
        width = mask.shape[1]
        ends = mask.sum(dim=1)
        if not torch.equal(mask.bool(), torch.arange(width, device=mask.device) < ends[:, None]):
            raise ValueError("forward groups need right-padded rows (collate_pairs' default)")
        groups = batch["forward_group"]
        embeds = self.backbone.get_input_embeddings()(batch["input_ids"])
        rows_of, lasts, states_of = [], [], []
        for g in torch.unique(groups).tolist():
            rows = (groups == g).nonzero().squeeze(1)
            cut = int(ends[rows].max())
            part = {k: v[rows, :cut] for k, v in batch.items() if k != "forward_group" and v.dim() == 2}
            part["inputs_embeds"] = embeds[rows, :cut]
            last, states = self.encode(part, hidden_layers)
            rows_of.append(rows)
            lasts.append(nn.functional.pad(last, (0, 0, 0, width - cut)))
            states_of.append({k: nn.functional.pad(v, (0, 0, 0, width - cut)) for k, v in states.items()})
        back = torch.argsort(torch.cat(rows_of))  # grouped order -> the batch's row order
        last = torch.cat(lasts)[back]
        states = {k: torch.cat([s[k] for s in states_of])[back] for k in states_of[0]}
        return last, states

    def embed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Pooled representation (B, H) float32 of pad_texts tensors."""
        last, _ = self.encode(batch)
        return self.pool(last, batch)

    def cache_features(self, batch: dict[str, torch.Tensor]) -> None:
        """Puts the pooled representation of every row of pad_texts tensors into the feature cache."""
        if self.feature_cache is None:
            raise RuntimeError("no feature cache is open (frozen_features)")
        with torch.no_grad():
            pooled = self.embed(batch)
        for key, row in zip(_row_keys(batch), pooled, strict=True):
            self.feature_cache.setdefault(key, row)

    def pooled(
        self, batch: dict[str, torch.Tensor], hidden_layers: Sequence[int] = ()
    ) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """(pooled (B, H) float32, the requested hidden layers) of a batch. With a feature cache (frozen_features)
        and no layers asked for, every row reads its representation from the cache; a text the cache lacks runs
        the backbone alone and unpadded (the same numbers whichever batch holds it) and is kept."""
        cache = self.feature_cache
        if cache is None or hidden_layers:
            last, states = self.encode(batch, hidden_layers)
            return self.pool(last, batch), states
        keys = _row_keys(batch)
        ends = batch["attention_mask"].sum(dim=1).tolist()
        for i, key in enumerate(keys):
            if key not in cache:
                self.cache_features({k: v[i : i + 1, : int(ends[i])] for k, v in batch.items() if v.dim() == 2})
        return torch.stack([cache[key] for key in keys]), {}

    def pool(self, last: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return pool(
            last,
            batch["attention_mask"],
            batch["response_mask"],
            self.pooling,
            batch.get("input_ids"),
            self.pad_token_id,
        )


class RewardModel(PooledBackbone):
    """PooledBackbone -> linear head -> scalar reward per sequence.

    The head has no bias: Bradley-Terry sees only reward differences, and without it the weights match
    transformers' *ForSequenceClassification `score` layer for decoder export.
    """

    def __init__(self, backbone: Any, pooling: str = "mean", kind: str = "encoder", backbone_name: str = ""):
        super().__init__(backbone, pooling, kind, backbone_name)
        self.head = nn.Linear(self.hidden_size, 1, bias=False)
        nn.init.normal_(self.head.weight, std=1.0 / self.hidden_size**0.5)
        self.head.float()
        self.debias: nn.Module | None = None  # a training-only head (models.debias); None when scoring
        self.last_debias: DebiasOutput | None = None  # the debias head's outputs of the last training forward

    def forward(self, batch: dict[str, torch.Tensor], hidden_layers: Sequence[int] = ()) -> RewardOutput:
        """batch: tensors from collate_pairs / pad_texts, each (B, T). Returns RewardOutput."""
        pooled, states = self.pooled(batch, hidden_layers)
        with torch.autocast(device_type=pooled.device.type, enabled=False):
            rewards = self.head(pooled.float()).squeeze(-1)
            if self.debias is not None and self.training:
                log_length = torch.log1p(batch["response_mask"].sum(dim=1).float())
                extra = self.debias(pooled, log_length)
                self.last_debias = DebiasOutput(extra, rewards, log_length)
                return RewardOutput(rewards + extra, pooled, batch["response_mask"], states, self.last_debias)
        return RewardOutput(rewards, pooled, batch["response_mask"], states)
