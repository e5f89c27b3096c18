"""An in-context (ICRM) reward model: utility and confidence of each text under the demonstrations of a
standard (icrm.scoring.ICRMScorer; set-mode contexts cached per standard). A long-running process bounds how many
ad-hoc standards it keeps (max_standards): the least recently used one goes first; registered standards stay."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from rewardsmith.icrm.scoring import ICRMScorer
from rewardsmith.inference.base import Encoded, Inference, InferenceOptions, Standard, TextScores
from rewardsmith.inference.items import TextItem, encode_item, item_parts
from rewardsmith.models.loading import LoadedModel


class InContextInference(Inference):
    """An ICRM model and its scorer. options: batch size and precision; max_tokens: the padded tokens of one forward
    pass (the server's rounds); max_standards: ad-hoc standards whose context is kept."""

    kind = "in-context"

    def __init__(
        self,
        loaded: LoadedModel,
        options: InferenceOptions | None = None,
        max_tokens: int | None = None,
        max_standards: int = 1024,
    ):
        options = options or InferenceOptions()
        self.loaded = loaded
        self.bf16 = options.runs_bf16(loaded)
        self.encoder = loaded.encoder()
        # A forward pass holds at most max_tokens padded tokens.
        rows = options.batch_size if max_tokens is None else max(1, max_tokens // loaded.max_length)
        self.scorer = ICRMScorer(loaded.model, self.encoder, rows, self.bf16)  # type: ignore[arg-type]
        self.max_standards = max_standards
        self._adhoc: OrderedDict[str, None] = OrderedDict()

    @property
    def in_context(self) -> bool:
        return True

    @property
    def counts(self) -> dict[str, int]:
        return self.encoder.counts

    def encode(self, items: Sequence[TextItem]) -> Encoded:
        encoded = [encode_item(self.encoder, item) for item in items]
        parts = [item_parts(self.encoder, item) for item in items]
        return Encoded(encoded, parts, unsplit=[k for k, e in enumerate(encoded) if e.unsplit])

    def score_encoded(
        self, batch: Encoded, standard: Standard | None = None, progress: str | None = None
    ) -> TextScores:
        demos = standard.demos if standard is not None else ()
        if batch.items:
            u, s = self.scorer.score_texts(batch.items, demos)
        else:
            u, s = np.zeros(0), np.zeros(0)
        if standard is not None:
            self._remember(standard)
        return TextScores(u, confidence=s, tokens=sum(batch.lengths), unsplit=list(batch.unsplit))

    def prepare_standard(self, standard: Standard) -> None:
        if self.scorer.model.mode == "set":  # a concat-mode model reads demonstrations with every text instead
            self.scorer.context(standard.demos)
        self._remember(standard)

    def _remember(self, standard: Standard) -> None:
        """Keeps the context cache within max_standards: the least recently used ad-hoc standard goes first."""
        if standard.registered:
            self._adhoc.pop(standard.key, None)
            return
        self._adhoc[standard.key] = None
        self._adhoc.move_to_end(standard.key)
        while len(self.scorer.cache.contexts) > self.max_standards and self._adhoc:
            oldest, _ = self._adhoc.popitem(last=False)
            self.scorer.cache.discard(oldest)
