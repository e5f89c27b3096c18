"""The one inference path: every command (score, eval, calibrate --model, bench, bon, rl, the demo) and the server
score through it. A model of any kind (scalar, in-context, ensemble) is loaded by `load_inference`, which tells the
kind from its folder, and scores through one interface (base.Inference: encode, score_encoded); a scored text's
input is a TextItem and its result a TextScores (items.py, base.py)."""

from rewardsmith.inference.base import Encoded, Inference, InferenceOptions, Standard, TextScores
from rewardsmith.inference.ensemble import EnsembleInference, MixedReading
from rewardsmith.inference.in_context import InContextInference
from rewardsmith.inference.items import (
    TextItem,
    encode_item,
    item_results,
    item_texts,
    read_score_rows,
    response_text,
    text_row,
    texts_digest,
)
from rewardsmith.inference.loading import load_inference
from rewardsmith.inference.making import write_ensemble
from rewardsmith.inference.scalar import ScalarInference
from rewardsmith.inference.scorers import ModelScores

__all__ = [
    "Encoded",
    "EnsembleInference",
    "InContextInference",
    "Inference",
    "InferenceOptions",
    "MixedReading",
    "ModelScores",
    "ScalarInference",
    "Standard",
    "TextItem",
    "TextScores",
    "encode_item",
    "item_results",
    "item_texts",
    "load_inference",
    "read_score_rows",
    "response_text",
    "text_row",
    "texts_digest",
    "write_ensemble",
]
