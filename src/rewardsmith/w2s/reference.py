"""Reference hidden states for anchoring, three ways.

- FrozenCopyReference: a frozen copy of the pretrained model, one extra forward pass per step (the
  paper's form; 43-50% extra step time in fp32 on CPU here).
- AdapterDisabledReference: with LoRA, the base model is the reference: the same weights with the
  adapter switched off, under no_grad. No second copy of the weights.
- CachedReference: the reference states of every training sequence are computed once before training
  and read back each step. The data are fixed and the reference is frozen, so this is exact up to the
  storage precision (fp16 here); only response tokens are stored because the anchor loss reads no other.

Cache layout: one array of shape (n_response_tokens_total, n_layers, H), in memory or as an on-disk
numpy memmap, plus for each (pair index, side) the offset and count of its response tokens. Side 0 is the
pair's original chosen response and side 1 its original rejected one; a batch row is mapped to a side
with batch["swapped"], so the trainer's random swaps read the right states.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from rewardsmith.data.collate import EncodedPair, sorted_batches
from rewardsmith.errors import DataError
from rewardsmith.evaluate.scoring import forward_batches
from rewardsmith.models.reward_model import RewardModel


class ReferenceProvider(Protocol):
    def __call__(
        self, model: RewardModel, batch: dict[str, torch.Tensor], layers: Sequence[int]
    ) -> dict[int, torch.Tensor]:
        """Reference hidden states layer -> (2B, T, H) for a collate_pairs batch (zeros where unused)."""
        ...


class FrozenCopyReference:
    """A deep copy of the model taken before training, frozen, run each step (the paper's form)."""

    def __init__(self, model: RewardModel):
        self.reference = copy.deepcopy(model).eval()
        for p in self.reference.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def __call__(
        self, model: RewardModel, batch: dict[str, torch.Tensor], layers: Sequence[int]
    ) -> dict[int, torch.Tensor]:
        _, states = self.reference.encode(batch, layers)
        return states


class AdapterDisabledReference:
    """LoRA: the reference is the student's own backbone with the adapter disabled (no weight copy)."""

    @torch.no_grad()
    def __call__(
        self, model: RewardModel, batch: dict[str, torch.Tensor], layers: Sequence[int]
    ) -> dict[int, torch.Tensor]:
        backbone: Any = getattr(model, "module", model).backbone
        if not hasattr(backbone, "disable_adapter"):
            raise DataError("AdapterDisabledReference needs a LoRA (peft) backbone")
        inner = getattr(model, "module", model)
        with backbone.disable_adapter():
            _, states = inner.encode(batch, layers)
        return states


def side_of_rows(swapped: torch.Tensor) -> torch.Tensor:
    """(2B,) side per batch row: rows 0..B-1 hold side 0 unless swapped, rows B..2B-1 the other side."""
    s = swapped.long()
    return torch.cat([s, 1 - s])


def _tmp_name(base: Path, suffix: str) -> str:
    return f"{base}.{os.getpid()}.tmp{suffix}"


class ReferenceStateCache:
    """Response-token reference states for every (pair index, side), stored once in fp16.

    Build with `build(...)`; look states up with `lookup(batch, layers)`. `path` None keeps the array in
    memory; a path stores it as an on-disk memmap (`<path>.npy`, `<path>.json`) that later runs with the
    same fingerprint reuse without recomputing.
    """

    def __init__(
        self,
        layers: Sequence[int],
        offsets: np.ndarray,
        counts: np.ndarray,
        states: np.ndarray,
        pooled: np.ndarray | None = None,
        fingerprint: str = "",
    ):
        self.layers = list(layers)
        self.offsets = offsets  # (N, 2) int64
        self.counts = counts  # (N, 2) int64
        self.states = states  # (n_tokens, n_layers, H) float16
        self.pooled = pooled  # (N, 2, H) float32: mean-pooled last hidden state of the reference
        self.fingerprint = fingerprint

    @property
    def nbytes(self) -> int:
        return int(self.states.nbytes)

    @staticmethod
    def fingerprint_of(encoded: Sequence[EncodedPair], layers: Sequence[int], model_name: str) -> str:
        h = hashlib.sha1(f"{model_name}|{list(layers)}".encode())
        for p in encoded:
            for t in (p.chosen, p.rejected) if not p.swapped else (p.rejected, p.chosen):
                h.update(np.asarray(t.input_ids, dtype=np.int64).tobytes())
                h.update(np.asarray(t.response_mask, dtype=np.int8).tobytes())
        return h.hexdigest()[:16]

    @classmethod
    @torch.no_grad()
    def build(
        cls,
        model: RewardModel,
        encoded: Sequence[EncodedPair],
        layers: Sequence[int],
        pad_id: int,
        path: str | Path | None = None,
        batch_size: int = 32,
        bf16: bool = False,
    ) -> ReferenceStateCache:
        """Runs the (pretrained, frozen) model once over both sides of every pair.

        encoded: pairs as the trainer holds them (index i = position, not swapped). layers: hidden-state
        indices (0 = embeddings, L = last). The reference is `model` as it is now; call before training.
        """
        layers = [int(x) for x in layers]
        fingerprint = cls.fingerprint_of(encoded, layers, getattr(model, "backbone_name", ""))
        if path is not None:
            loaded = cls.load(path, fingerprint)
            if loaded is not None:
                return loaded
        texts = []
        for p in encoded:
            first, second = (p.rejected, p.chosen) if p.swapped else (p.chosen, p.rejected)
            texts += [first, second]
        counts = np.array([sum(t.response_mask) for t in texts], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        hidden = int(model.config.hidden_size)
        shape = (int(counts.sum()), len(layers), hidden)
        if path is not None:
            base = Path(path)
            base.parent.mkdir(parents=True, exist_ok=True)
            states: np.ndarray = np.lib.format.open_memmap(
                _tmp_name(base, ".npy"), mode="w+", dtype=np.float16, shape=shape
            )
        else:
            states = np.zeros(shape, dtype=np.float16)
        pooled = np.zeros((len(texts), hidden), dtype=np.float32)
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        batches = list(sorted_batches([len(t.input_ids) for t in texts], batch_size))
        for idx, batch, out in forward_batches(
            lambda b: model(b, hidden_layers=layers), texts, batches, pad_id, device, bf16
        ):
            pooled[idx] = out.pooled.float().cpu().numpy()
            mask = batch["response_mask"]
            for row, i in enumerate(idx):
                if counts[i] == 0:
                    continue
                rows = torch.stack([out.hidden_states[layer][row][mask[row]] for layer in layers], dim=1)
                states[offsets[i] : offsets[i] + counts[i]] = rows.float().cpu().numpy().astype(np.float16)
        model.train(was_training)
        cache = cls(
            layers,
            offsets.reshape(-1, 2),
            counts.reshape(-1, 2),
            states,
            pooled.reshape(-1, 2, hidden),
            fingerprint,
        )
        if path is not None:
            cache._save(Path(path))
            return cls.load(path, fingerprint) or cache
        return cache

    def _save(self, base: Path) -> None:
        assert isinstance(self.states, np.memmap)
        self.states.flush()
        # Temporary names carry the process id and files appear by atomic rename, so two runs that build
        # the same cache at once (seeds in parallel processes) never read a half-written file.
        os.replace(str(self.states.filename), str(base) + ".npy")
        index_tmp = _tmp_name(base, ".index.npz")
        np.savez(
            index_tmp,
            offsets=self.offsets,
            counts=self.counts,
            pooled=self.pooled if self.pooled is not None else np.zeros(0),
        )
        os.replace(index_tmp, str(base) + ".index.npz")
        meta_tmp = _tmp_name(base, ".json")
        Path(meta_tmp).write_text(json.dumps({"fingerprint": self.fingerprint, "layers": self.layers}))
        os.replace(meta_tmp, str(base) + ".json")  # last: its presence marks a complete cache

    @classmethod
    def load(cls, path: str | Path, fingerprint: str | None = None) -> ReferenceStateCache | None:
        """The cache at `path` (memory-mapped, read-only), or None when absent or built for other data."""
        base = Path(path)
        meta_path = Path(str(base) + ".json")
        if not meta_path.exists():
            return None
        meta = json.loads(meta_path.read_text())
        if fingerprint is not None and meta["fingerprint"] != fingerprint:
            return None
        index = np.load(str(base) + ".index.npz")
        states = np.load(str(base) + ".npy", mmap_mode="r")
        pooled = index["pooled"] if index["pooled"].size else None
        return cls(meta["layers"], index["offsets"], index["counts"], states, pooled, meta["fingerprint"])

    def lookup(self, batch: dict[str, torch.Tensor], layers: Sequence[int]) -> dict[int, torch.Tensor]:
        """Reference states layer -> (2B, T, H) float32 for a collate_pairs batch, zero off the response."""
        mask = batch["response_mask"]
        n_rows, width = mask.shape
        pairs = batch["pair_index"].cpu().numpy()
        sides = side_of_rows(batch["swapped"].cpu()).numpy()
        rows_pair = np.concatenate([pairs, pairs])
        starts = self.offsets[rows_pair, sides]
        counts = self.counts[rows_pair, sides]
        have = mask.sum(dim=1).cpu().numpy()
        if not np.array_equal(have, counts):
            raise DataError(
                "reference cache does not match this batch's response tokens "
                "(built from other data or another max_length)"
            )
        gather = np.concatenate([np.arange(s, s + c) for s, c in zip(starts, counts, strict=True)])
        columns = [self.layers.index(layer) for layer in layers]
        packed = torch.from_numpy(np.asarray(self.states[gather][:, columns], dtype=np.float32))
        out: dict[int, torch.Tensor] = {}
        for j, layer in enumerate(layers):
            full = torch.zeros(n_rows, width, packed.shape[-1], dtype=torch.float32, device=mask.device)
            full[mask] = packed[:, j].to(mask.device)
            out[layer] = full
        return out


class CachedReference:
    """Reads reference states from a ReferenceStateCache (no reference forward during training)."""

    def __init__(self, cache: ReferenceStateCache):
        self.cache = cache

    def __call__(
        self, model: RewardModel, batch: dict[str, torch.Tensor], layers: Sequence[int]
    ) -> dict[int, torch.Tensor]:
        return self.cache.lookup(batch, layers)
