"""Evaluation protocols for a scalar reward model: the standard accuracy block on any pair set (with the
reliability data a report plots), and RM-Bench's style matrix where the pairs carry their 3x3 variants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardsmith.data.collate import PairEncoder
from rewardsmith.data.schema import PreferencePair
from rewardsmith.evaluate.metrics import evaluate_margins, json_float, length_correlation, reliability_curve
from rewardsmith.evaluate.rmbench import rmbench_accuracy
from rewardsmith.evaluate.scoring import encode_pair_texts, score_encoded, score_pairs
from rewardsmith.models.reward_model import RewardModel
from rewardsmith.stats import sigmoid


def response_lengths(pairs: Sequence[PreferencePair]) -> tuple[np.ndarray, np.ndarray]:
    """Character lengths of chosen (N,) and rejected (N,) responses (the length rule's input)."""
    return (np.array([len(p.chosen) for p in pairs], dtype=np.float64),
            np.array([len(p.rejected) for p in pairs], dtype=np.float64))


def gold_labels(pairs: Sequence[PreferencePair]) -> np.ndarray | None:
    """Labels (N,) when any pair has a non-gold label, else None (chosen always preferred)."""
    labels = np.array([p.label for p in pairs], dtype=np.float64)
    return None if np.all(labels == 1.0) else labels


def accuracy_block(margins: np.ndarray, pairs: Sequence[PreferencePair], n_boot: int = 1000,
                   seed: int = 0, scores: np.ndarray | None = None) -> dict[str, Any]:
    """The accuracy block of evaluate_margins plus `reliability` (the top-label reliability curve of
    p = sigmoid(margin), for the report's diagram) and, given the responses' scores (2N,) (chosen and
    rejected interleaved), `length_correlation` (Spearman of reward and response length) with its CI."""
    chosen_len, rejected_len = response_lengths(pairs)
    labels = gold_labels(pairs)
    block = evaluate_margins(margins, chosen_len, rejected_len, labels, n_boot=n_boot, seed=seed)
    block["reliability"] = reliability_curve(sigmoid(margins), labels).to_dict()
    if scores is not None:
        corr = length_correlation(scores[0::2], scores[1::2], chosen_len, rejected_len, n_boot=n_boot, seed=seed)
        block["length_correlation"], block["length_correlation_ci"] = json_float(corr.value), corr.ci
    return block


def evaluate_pairs(model: RewardModel, tokenizer: Any, pairs: Sequence[PreferencePair], max_length: int = 256,
                   min_prompt_tokens: int = 64, batch_size: int = 64, bf16: bool = False, n_boot: int = 1000,
                   progress: str | None = None) -> tuple[dict[str, Any], np.ndarray]:
    """Scores pairs and returns (the accuracy block with a `truncated` count of texts cut to max_length,
    scores (2N,): chosen and rejected interleaved)."""
    encoder = PairEncoder(tokenizer, max_length, min_prompt_tokens)
    scores = score_encoded(model, encode_pair_texts(encoder, pairs), int(tokenizer.pad_token_id), batch_size, bf16,
                           progress=progress)
    margins = scores[0::2] - scores[1::2]
    block = accuracy_block(margins, pairs, n_boot, scores=scores)
    block["truncated"] = dict(encoder.counts)
    return block, scores


def has_rmbench_variants(pairs: Sequence[PreferencePair]) -> bool:
    return bool(pairs) and all("chosen_variants" in p.metadata and "rejected_variants" in p.metadata
                               for p in pairs)


def evaluate_rmbench(model: RewardModel, tokenizer: Any, pairs: Sequence[PreferencePair], max_length: int = 256,
                     min_prompt_tokens: int = 64, batch_size: int = 64, bf16: bool = False) -> dict[str, Any]:
    """RM-Bench easy / normal / hard accuracy from the 3x3 matrix of style variants of each row."""
    texts: list[PreferencePair] = []
    for p in pairs:
        for c, r in zip(p.metadata["chosen_variants"], p.metadata["rejected_variants"], strict=True):
            texts.append(PreferencePair(p.prompt, c, r, 1.0, p.domain))
    chosen, rejected = score_pairs(model, tokenizer, texts, max_length, min_prompt_tokens, batch_size, bf16)
    n_styles = len(pairs[0].metadata["chosen_variants"])
    return rmbench_accuracy(chosen.reshape(-1, n_styles), rejected.reshape(-1, n_styles))
