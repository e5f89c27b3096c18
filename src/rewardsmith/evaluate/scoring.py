"""Scoring: rewards for many texts or pairs, batched by length, in inference mode."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import EncodedText, PairEncoder, pad_texts, sorted_batches
from rewardsmith.data.schema import PreferencePair
from rewardsmith.models.reward_model import RewardModel


@torch.inference_mode()
def score_encoded(model: RewardModel, texts: Sequence[EncodedText], pad_id: int, batch_size: int = 64,
                  bf16: bool = False, padding_side: str = "right", progress: bool = False) -> np.ndarray:
    """Rewards (N,) float64 for encoded texts, in input order. Batches are formed by descending length."""
    model.eval()
    device = next(model.parameters()).device
    out = np.zeros(len(texts), dtype=np.float64)
    autocast: Any = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
    batches = list(sorted_batches([len(t.input_ids) for t in texts], batch_size))
    iterator: Any = batches
    if progress and len(batches) > 1:
        from rich.progress import track

        iterator = track(batches, description="score", transient=True)
    with autocast:
        for idx in iterator:
            batch = {k: v.to(device) for k, v in pad_texts([texts[i] for i in idx], pad_id, padding_side).items()}
            out[idx] = model(batch).rewards.float().cpu().numpy()
    return out


def score_pairs(model: RewardModel, tokenizer: Any, pairs: Sequence[PreferencePair], max_length: int = 256,
                min_prompt_tokens: int = 64, batch_size: int = 64, bf16: bool = False,
                padding_side: str = "right", progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Rewards of the chosen (N,) and rejected (N,) responses of each pair."""
    encoder = PairEncoder(tokenizer, max_length, min_prompt_tokens)
    texts: list[EncodedText] = []
    for p in pairs:
        prompt = p.prompt_text()
        texts.append(encoder.encode(prompt, p.chosen))
        texts.append(encoder.encode(prompt, p.rejected))
    scores = score_encoded(model, texts, int(tokenizer.pad_token_id), batch_size, bf16, padding_side, progress)
    return scores[0::2], scores[1::2]
