"""A scalar reward model of any origin (models.loading: rewardsmith folders, Hugging Face sequence classifiers,
OpenRLHF checkpoints, LoRA adapters), scored by evaluate.scoring.RewardScorer: texts sorted by length, padded per
forward pass, each pass capped at max_tokens padded tokens of which at most max_padding padding."""

from __future__ import annotations

from collections.abc import Sequence

from rewardsmith.evaluate.scoring import RewardScorer
from rewardsmith.inference.base import Encoded, Inference, InferenceOptions, Standard, TextScores
from rewardsmith.inference.items import TextItem, encode_item
from rewardsmith.models.loading import LoadedModel


class ScalarInference(Inference):
    """One scalar reward model and its scorer. options: batch size and precision; max_tokens / max_padding: cap
    each forward pass (the server's rounds)."""

    kind = "scalar"

    def __init__(
        self,
        loaded: LoadedModel,
        options: InferenceOptions | None = None,
        max_tokens: int | None = None,
        max_padding: float | None = None,
    ):
        options = options or InferenceOptions()
        self.loaded = loaded
        self.bf16 = options.runs_bf16(loaded)
        self.encoder = loaded.encoder()
        self.scorer = RewardScorer(
            loaded.model,
            self.encoder,
            loaded.pad_id,
            options.batch_size,
            self.bf16,
            max_tokens=max_tokens,
            max_padding=max_padding,
        )

    @property
    def counts(self) -> dict[str, int]:
        return self.encoder.counts

    def encode(self, items: Sequence[TextItem]) -> Encoded:
        encoded = [encode_item(self.encoder, item) for item in items]
        return Encoded(encoded, unsplit=[k for k, e in enumerate(encoded) if e.unsplit])

    def score_encoded(
        self, batch: Encoded, standard: Standard | None = None, progress: str | None = None
    ) -> TextScores:
        self.check_demos(standard.demos if standard else None)
        rewards = self.scorer.score_encoded(batch.encoded, progress)
        return TextScores(rewards, tokens=sum(batch.lengths), unsplit=list(batch.unsplit))
