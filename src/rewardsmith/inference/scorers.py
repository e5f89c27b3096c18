"""Scoring (prompt, response) texts with several reward models by source, each loaded once: what best-of-n's
proxies and learned golds, and the RL gold tracker, score through."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from rewardsmith.data.schema import Turn
from rewardsmith.errors import ConfigError
from rewardsmith.inference.base import Inference, InferenceOptions
from rewardsmith.inference.ensemble import score_members
from rewardsmith.inference.loading import load_inference


class ModelScores:
    """Scores texts with reward models through the one inference path, each model loaded once (options: how each is
    read and run); `seconds` adds up the time spent scoring."""

    def __init__(self, options: InferenceOptions | None = None, progress: bool = False):
        self.options = options or InferenceOptions()
        self.progress = progress
        self.loaded: dict[str, Inference] = {}
        self.seconds = 0.0

    def model(self, source: str) -> Inference:
        """The model of `source`, loaded on first use."""
        inference = self.loaded.get(source)
        if inference is None:
            inference = self.loaded[source] = load_inference(source, self.options)
        return inference

    def __call__(
        self, source: str, texts: Sequence[tuple[tuple[Turn, ...], str]], demos: str | None = None
    ) -> np.ndarray:
        """Rewards (M,) of the texts by the model `source`; `demos`: a demonstrations file steering an in-context
        model."""
        inference = self.model(source)
        steering: Sequence = ()
        if demos is not None:
            from rewardsmith.icrm.scoring import read_demos

            if not inference.in_context:
                raise ConfigError(f"{source} with demonstrations {demos}: a scalar reward model takes none")
            steering = read_demos(demos).pairs
        start = time.perf_counter()
        shown = f"scoring with {source}" if self.progress else None
        if steering or inference.kind != "scalar":
            rewards = inference.score_texts(list(texts), steering, progress=shown).rewards
        else:  # through the member cache: an ensemble of these models scores the same texts without scoring again
            rewards = score_members([inference], list(texts), shown)[0]
        self.seconds += time.perf_counter() - start
        return np.asarray(rewards, dtype=np.float64)
