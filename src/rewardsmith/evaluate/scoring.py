"""The one batched inference loop and the scalar scorer on it: texts sorted by length, padded per batch, run under
inference mode (bf16 autocast on request, heads in fp32), results returned in input order. Reward scoring
(RewardScorer: score, eval, serve, demo, the W2S teacher and students, the ICRM protocols' BT baseline), ICRM
embeddings and the server all go through `batched_forward`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import EncodedText, Encoder, pad_texts, sorted_batches
from rewardsmith.data.schema import PreferencePair
from rewardsmith.io.progress import Progress
from rewardsmith.models.reward_model import PooledBackbone


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def default_device() -> torch.device:
    """The first CUDA device when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@torch.inference_mode()
def batched_forward(forward: Callable[[dict[str, torch.Tensor]], torch.Tensor], texts: Sequence[EncodedText],
                    pad_id: int, device: torch.device, batch_size: int = 64, bf16: bool = False,
                    padding_side: str = "right", progress: str | None = None,
                    max_tokens: int | None = None, max_padding: float | None = None) -> torch.Tensor:
    """forward(pad_texts batch on `device`) -> (B, ...) for every text, batched by descending length.

    Returns (N, ...) float32 on the CPU in input order. progress: a description to show progress under
    (None: silent). max_tokens, max_padding: also cap each batch's padded tokens (rows x longest text) and the
    share of them that is padding (sorted_batches)."""
    if not texts:
        return torch.zeros(0)
    autocast: Any = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
    batches = list(sorted_batches([len(t.input_ids) for t in texts], batch_size, max_tokens, max_padding))
    out: torch.Tensor | None = None
    done = 0
    with Progress(progress or "", len(texts), enabled=progress is not None and len(batches) > 1,
                  unit="texts") as bar, autocast:
        for idx in batches:
            batch = {k: v.to(device) for k, v in pad_texts([texts[i] for i in idx], pad_id, padding_side).items()}
            values = forward(batch).float().cpu()
            if out is None:
                out = torch.zeros((len(texts), *values.shape[1:]), dtype=torch.float32)
            out[torch.as_tensor(idx)] = values
            done += len(idx)
            bar.update(done)
    assert out is not None
    return out


def score_encoded(model: torch.nn.Module, texts: Sequence[EncodedText], pad_id: int, batch_size: int = 64,
                  bf16: bool = False, padding_side: str = "right", progress: str | None = None,
                  max_tokens: int | None = None, max_padding: float | None = None) -> np.ndarray:
    """Rewards (N,) float64 of encoded texts, in input order: `model(batch).rewards` of every batch_forward batch
    (any kind of loaded model; max_tokens, max_padding: as in batched_forward)."""
    model.eval()
    rewards = batched_forward(lambda b: model(b).rewards, texts, pad_id, model_device(model), batch_size, bf16,
                              padding_side, progress, max_tokens, max_padding)
    return rewards.double().numpy()


def embed_encoded(model: PooledBackbone, texts: Sequence[EncodedText], pad_id: int, batch_size: int = 64,
                  bf16: bool = False, progress: str | None = None) -> torch.Tensor:
    """Pooled representations (N, H) float32 of encoded texts, in input order."""
    model.eval()
    out = batched_forward(model.embed, texts, pad_id, model_device(model), batch_size, bf16, "right", progress)
    return out if len(texts) else torch.zeros(0, model.hidden_size)


def encode_pair_texts(encoder: Encoder, pairs: Sequence[PreferencePair]) -> list[EncodedText]:
    """[chosen_0, rejected_0, chosen_1, ...]: both sides of every pair, encoded."""
    texts: list[EncodedText] = []
    for p in pairs:
        texts.append(encoder.encode(p.prompt, p.chosen))
        texts.append(encoder.encode(p.prompt, p.rejected))
    return texts


class RewardScorer:
    """The one way a scalar reward model (any kind: models.loading) scores text: conversations are encoded in
    the model's template, batched by length, run under inference mode (bf16 autocast on request), and returned
    in input order as float64. counts: the encoder's truncation counts so far.

    max_tokens, max_padding: cap each forward pass's padded tokens and its share of padding (the server's
    rounds); padding_side only matters to tests (scores do not depend on it)."""

    def __init__(self, model: torch.nn.Module, encoder: Encoder, pad_id: int, batch_size: int = 64,
                 bf16: bool = False, padding_side: str = "right", max_tokens: int | None = None,
                 max_padding: float | None = None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model.eval()
        self.encoder = encoder
        self.pad_id = int(pad_id)
        self.batch_size = batch_size
        self.bf16 = bf16
        self.padding_side = padding_side
        self.max_tokens = max_tokens
        self.max_padding = max_padding

    @classmethod
    def for_model(cls, model: torch.nn.Module, tokenizer: Any, model_cfg: Any, batch_size: int = 64,
                  bf16: bool = False) -> RewardScorer:
        """The scorer of a rewardsmith model held in memory, in its ModelConfig's template and budget."""
        from rewardsmith.data.templates import encoder_for

        return cls(model, encoder_for(tokenizer, model_cfg), int(tokenizer.pad_token_id), batch_size, bf16)

    @property
    def counts(self) -> dict[str, int]:
        return self.encoder.counts

    def score_encoded(self, texts: Sequence[EncodedText], progress: str | None = None) -> np.ndarray:
        """Rewards (N,) float64 of encoded texts, in input order."""
        return score_encoded(self.model, texts, self.pad_id, self.batch_size, self.bf16, self.padding_side, progress,
                             self.max_tokens, self.max_padding)

    def score_texts(self, items: Sequence[tuple[Any, str]], progress: str | None = None) -> np.ndarray:
        """Rewards (M,) of (prompt, response) items; a prompt is turns or a prompt string."""
        return self.score_encoded([self.encoder.encode(prompt, response) for prompt, response in items], progress)

    def score_pairs(self, pairs: Sequence[PreferencePair], progress: str | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Rewards of the chosen (N,) and rejected (N,) responses of each pair."""
        scores = self.score_encoded(encode_pair_texts(self.encoder, pairs), progress)
        return scores[0::2], scores[1::2]


def score_pairs(model: torch.nn.Module, tokenizer: Any, pairs: Sequence[PreferencePair], max_length: int = 256,
                min_prompt_tokens: int = 64, batch_size: int = 64, bf16: bool = False, padding_side: str = "right",
                template: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """RewardScorer(...).score_pairs(pairs) for a model held in memory under a tokenizer, template and budget."""
    from rewardsmith.data.templates import make_encoder

    encoder = make_encoder(tokenizer, template, max_length, min_prompt_tokens)
    return RewardScorer(model, encoder, int(tokenizer.pad_token_id), batch_size, bf16, padding_side).score_pairs(pairs)
