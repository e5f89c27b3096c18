"""The interface every kind of model scores through (scalar.py, in_context.py, ensemble.py), and its records.

    inference = load_inference("runs/helpful/model")          # loading.py tells the kind from the folder
    batch = inference.encode([TextItem(prompt, response)])     # tokenised in the model's template(s)
    scores = inference.score_encoded(batch, standard=None)    # TextScores: rewards (+ confidence, uncertainty)

`encode` may run on another thread than `score_encoded` (the server tokenises on one thread and scores on its
worker); an Encoded batch can be cut into pieces and joined again (the server's rounds), and padding or the way a
batch is cut never changes a score. `score_texts` is encode then score_encoded, for commands.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import EncodedText
from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import ConfigError
from rewardsmith.inference.items import TextItem, item_texts
from rewardsmith.models.precision import use_bf16


@dataclass
class TextScores:
    """Scores of M texts, in order: the one record of a scored text's result.

    rewards (M,) float64 (an in-context model's utility u; an ensemble's rule); confidence (M,) of an in-context
    model (None for others); uncertainty (M,) of an ensemble: the sd of its standardised members; members (K, M): an
    ensemble's members' own rewards; tokens: the tokens the texts took; unsplit: positions of texts that could not be
    read back into turns (tokenised whole, cut from their start when long)."""

    rewards: np.ndarray
    confidence: np.ndarray | None = None
    uncertainty: np.ndarray | None = None
    members: np.ndarray | None = None
    tokens: int = 0
    unsplit: list[int] = field(default_factory=list)

    def part(self, start: int, end: int) -> TextScores:
        """The scores of texts start..end-1 (tokens and unsplit are not cut: they belong to a whole request)."""

        def cut(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[..., start:end]

        return TextScores(
            self.rewards[start:end], cut(self.confidence), cut(self.uncertainty), cut(self.members), 0, []
        )


@dataclass(frozen=True)
class InferenceOptions:
    """How `score`, `eval`, `bench`, `bon`, `rl` and the server read and run a model (the command-line options
    --template, --max-length, --trust-remote-code, --batch-size, --bf16). template / max_length /
    trust_remote_code: how a model from elsewhere is read (models.loading); batch_size: texts per forward pass;
    bf16: autocast the backbone (None: as the model was trained). ConfigError for a batch size below 1."""

    template: str = "auto"
    max_length: int | None = None
    trust_remote_code: bool = False
    batch_size: int = 64
    bf16: bool | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be at least 1, got {self.batch_size}")

    def runs_bf16(self, loaded: Any) -> bool:
        """Whether scoring the LoadedModel `loaded` runs under bf16 autocast: as asked (None: as the model was
        trained), where its device multiplies bf16 natively (models/precision.py says so once where it does not)."""
        asked = loaded.bf16 if self.bf16 is None else self.bf16
        device = next(loaded.model.parameters(), torch.empty(0)).device
        return use_bf16(asked, device)

    def key(self) -> dict[str, Any]:
        """What changes a score (the batch size does not): part of every saved result's key."""
        return {
            "template": self.template,
            "max_length": self.max_length,
            "bf16": self.bf16,
            "trust_remote_code": self.trust_remote_code,
        }


@dataclass(frozen=True)
class Standard:
    """Demonstrations steering an in-context model. key: their digest (icrm.scoring.demo_key); registered: held by
    the server's POST /v1/standards (never evicted from the model's context cache), else an ad-hoc standard."""

    key: str
    demos: tuple[PreferencePair, ...]
    registered: bool = False


@dataclass(frozen=True)
class Encoded:
    """M texts ready for the model, in order. encoded: each text's tokens (what a scalar model scores, and what a
    token budget counts: an ensemble's first member's); items: the (prompt, response) an in-context model scores
    with its demonstrations (empty for other kinds); members: an ensemble's K lists of M encodings, each in its own
    template; unsplit: positions of texts that could not be read back into turns."""

    encoded: list[EncodedText]
    items: list[tuple[Any, str]] = field(default_factory=list)
    members: list[list[EncodedText]] = field(default_factory=list)
    unsplit: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.encoded)

    @property
    def lengths(self) -> list[int]:
        return [len(e.input_ids) for e in self.encoded]

    def part(self, start: int, end: int) -> Encoded:
        """Texts start..end-1 (positions renumbered from start)."""
        return Encoded(
            self.encoded[start:end],
            self.items[start:end],
            [m[start:end] for m in self.members],
            [k - start for k in self.unsplit if start <= k < end],
        )

    @classmethod
    def join(cls, parts: Sequence[Encoded]) -> Encoded:
        """Parts as one batch, positions renumbered."""
        encoded: list[EncodedText] = []
        items: list[tuple[Any, str]] = []
        unsplit: list[int] = []
        members: list[list[EncodedText]] = [[] for _ in parts[0].members] if parts else []
        for part in parts:
            unsplit += [len(encoded) + k for k in part.unsplit]
            encoded += part.encoded
            items += part.items
            for joined, more in zip(members, part.members, strict=True):
                joined += more
        return cls(encoded, items, members, unsplit)


class Inference(ABC):
    """A loaded model of any kind and how it scores (see the module docstring).

    loaded: what a command reads off the model (kind, template, max_length, meta, describe()); bf16: the precision
    it scores in; kind: "scalar" | "in-context" | "ensemble"."""

    kind: str
    loaded: Any
    bf16: bool

    @property
    def in_context(self) -> bool:
        """Whether demonstrations steer it."""
        return False

    @property
    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Texts encoded so far and how many were cut (data.templates counts)."""

    @abstractmethod
    def encode(self, items: Sequence[TextItem]) -> Encoded:
        """The texts tokenised in the model's template(s), long parts cut first (items.encode_item)."""

    @abstractmethod
    def score_encoded(
        self, batch: Encoded, standard: Standard | None = None, progress: str | None = None
    ) -> TextScores:
        """The scores of an encoded batch; `standard`: demonstrations (an in-context model only). NonFiniteReward
        (stats.require_finite) for a text whose reward is not a finite number."""

    def prepare_standard(self, standard: Standard) -> None:
        """Computes and caches what a standard costs once (an in-context model's context); nothing for others."""
        self.check_demos(standard.demos, "demonstrations")

    def check_demos(self, demos: Sequence[PreferencePair] | None, what: str = "demonstrations") -> None:
        """ConfigError when demonstrations are given to a model that takes none (`what` names the field or option)."""
        if demos and not self.in_context:
            raise ConfigError(f"{what}: a scalar reward model takes no demonstrations (only an in-context model does)")

    def standard(self, demos: Sequence[PreferencePair]) -> Standard | None:
        """The ad-hoc standard of demonstrations (None for none)."""
        self.check_demos(demos)
        if not demos:
            return None
        from rewardsmith.icrm.scoring import demo_key

        return Standard(demo_key(tuple(demos)), tuple(demos))

    def score_texts(
        self, items: Sequence[tuple[Any, str]], demos: Sequence[PreferencePair] = (), progress: str | None = None
    ) -> TextScores:
        """Scores of (prompt, response) items (a prompt: turns or a prompt string), steered by `demos` (an
        in-context model)."""
        standard = self.standard(demos)
        batch = self.encode([TextItem(prompt, response) for prompt, response in items])
        return self.score_encoded(batch, standard, progress)

    def score_pairs_with_doubt(
        self, pairs: Sequence[PreferencePair], progress: str | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Rewards of the chosen (N,) and rejected (N,) responses, and each pair's doubt (N,) where the model has
        one (an ensemble: the sd across members of the standardised margin), else None."""
        scores = self.score_texts(item_texts(pairs, [False] * len(pairs)), progress=progress)
        return scores.rewards[0::2], scores.rewards[1::2], self.pair_doubt(scores)

    def score_pairs(
        self, pairs: Sequence[PreferencePair], progress: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        chosen, rejected, _ = self.score_pairs_with_doubt(pairs, progress)
        return chosen, rejected

    def pair_doubt(self, scores: TextScores) -> np.ndarray | None:
        """The doubt of each (chosen, rejected) pair of `scores` (texts interleaved); None for a model with none."""
        return None

    def describe(self) -> str:
        return str(self.loaded.describe())
