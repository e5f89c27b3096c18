"""UltraFeedback binarized sample: `ultrafeedback`.

Files: <data_dir>/ultrafeedback/train_clean.jsonl (split "train", default) and eval_clean.jsonl ("eval").
Rows: prompt, chosen, rejected (assistant replies only), source_index, metadata {score_chosen,
score_rejected} (GPT-4 overall score, 1-10). Pairs with equal scores are dropped ("tie") by default;
identical responses ("identical") and whitespace-only responses ("empty_response") are always dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.data.adapters._common import (
    BadRow,
    PairCollector,
    check_split,
    data_file,
    iter_jsonl,
    require_text,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, user_prompt

ULTRAFEEDBACK_FILES = {"train": "train_clean.jsonl", "eval": "eval_clean.jsonl"}


def _score(scores: Mapping[str, Any], key: str) -> float:
    value = scores.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRow(f"expected a number, got {value!r}"[:120], f"metadata.{key}")
    return float(value)


def load_ultrafeedback(opts: LoadOptions, keep_ties: bool = False) -> PairDataset:
    """PairDataset of the UltraFeedback sample; pair_id "ultrafeedback:<split>:<0-based row>".

    keep_ties=True keeps equal-score pairs with label 0.5 instead of dropping them.
    metadata: score_chosen, score_rejected, score_margin, source_index.
    """
    name = "ultrafeedback"
    split = check_split(name, opts.split, tuple(ULTRAFEEDBACK_FILES), "train")
    path = data_file(opts, "ultrafeedback", ULTRAFEEDBACK_FILES[split])

    def convert(row_index: int, record: Mapping[str, Any]) -> PreferencePair | str:
        prompt = require_text(record, "prompt")
        chosen = require_text(record, "chosen", allow_empty=True)
        rejected = require_text(record, "rejected", allow_empty=True)
        scores = record.get("metadata")
        if not isinstance(scores, Mapping):
            raise BadRow("expected an object with score_chosen and score_rejected", "metadata")
        score_chosen, score_rejected = _score(scores, "score_chosen"), _score(scores, "score_rejected")
        if chosen == rejected:
            return "identical"
        if not chosen.strip() or not rejected.strip():
            return "empty_response"
        tie = score_chosen == score_rejected
        if tie and not keep_ties:
            return "tie"
        return PreferencePair(
            prompt=user_prompt(prompt),
            chosen=chosen.strip(),
            rejected=rejected.strip(),
            label=0.5 if tie else 1.0,
            domain=name,
            pair_id=f"{name}:{split}:{row_index}",
            metadata={
                "score_chosen": score_chosen,
                "score_rejected": score_rejected,
                "score_margin": score_chosen - score_rejected,
                "source_index": record.get("source_index"),
            },
        )

    return PairCollector(name, path, opts).collect(iter_jsonl(path), convert)
