"""Evaluation protocols for a scalar reward model: the standard accuracy block on any pair set, and
RM-Bench's style matrix where the pairs carry their 3x3 variants."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.evaluate.metrics import evaluate_margins, preference_probabilities, reliability_curve
from rewardsmith.evaluate.rmbench import rmbench_accuracy
from rewardsmith.evaluate.scoring import score_pairs
from rewardsmith.models.reward_model import RewardModel


def response_lengths(pairs: Sequence[PreferencePair]) -> tuple[np.ndarray, np.ndarray]:
    """Character lengths of chosen (N,) and rejected (N,) responses (the length rule's input)."""
    return (np.array([len(p.chosen) for p in pairs], dtype=np.float64),
            np.array([len(p.rejected) for p in pairs], dtype=np.float64))


def gold_labels(pairs: Sequence[PreferencePair]) -> np.ndarray | None:
    """Labels (N,) when any pair has a non-gold label, else None (chosen always preferred)."""
    labels = np.array([p.label for p in pairs], dtype=np.float64)
    return None if np.all(labels == 1.0) else labels


def accuracy_block(margins: np.ndarray, pairs: Sequence[PreferencePair], seed: int = 0) -> dict[str, Any]:
    chosen_len, rejected_len = response_lengths(pairs)
    return evaluate_margins(margins, chosen_len, rejected_len, gold_labels(pairs), seed=seed)


def evaluate_pairs(model: RewardModel, tokenizer: Any, pairs: Sequence[PreferencePair], max_length: int = 256,
                   min_prompt_tokens: int = 64, batch_size: int = 64, bf16: bool = False,
                   plot_path: Path | None = None, progress: bool = False) -> tuple[dict[str, Any], np.ndarray]:
    """Scores pairs and returns (the accuracy block, margins (N,)). With plot_path, also writes the
    reliability diagram of p = sigmoid(margin) there."""
    chosen, rejected = score_pairs(model, tokenizer, pairs, max_length, min_prompt_tokens, batch_size, bf16,
                                   progress=progress)
    margins = chosen - rejected
    block = accuracy_block(margins, pairs)
    if plot_path is not None:
        from rewardsmith.report.plots import plot_reliability_diagram

        curve = reliability_curve(preference_probabilities(margins), gold_labels(pairs))
        plot_reliability_diagram(curve.confidence, curve.accuracy, curve.counts, plot_path, edges=curve.edges,
                                 ece=curve.ece())
        block["reliability_plot"] = plot_path.name
    return block, margins


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
