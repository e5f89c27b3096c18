"""An ensemble of reward models (models.ensemble: a folder holding ensemble.json) as one model: every member loaded
as `score` loads it (inference.loading), each encoding and scoring the texts in its own template, the rule applied
to the standardised rewards, and the spread of the standardised members as each text's uncertainty
(TextScores.uncertainty). Making one is making.py."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import ConfigError
from rewardsmith.inference.base import Encoded, Inference, Standard, TextScores
from rewardsmith.inference.items import TextItem, encode_item, texts_digest
from rewardsmith.models.ensemble import (
    EnsembleSpec,
    combine,
    member_fingerprint,
)


class EnsembleModel:
    """What a command reads off an ensemble where it reads a LoadedModel: its kind, templates, budget, description."""

    kind = "ensemble"
    model_type = "reward"
    in_context = False
    model_config = None

    def __init__(self, source: str, spec: EnsembleSpec, members: Sequence[Inference]):
        self.source = source
        self.spec = spec
        self.members = [m.loaded for m in members]
        self.template = "/".join(dict.fromkeys(m.template for m in self.members))
        self.max_length = min(m.max_length for m in self.members)
        self.bf16 = any(m.bf16 for m in self.members)
        self.meta: dict[str, Any] = {"ensemble": spec.to_dict()}

    def describe(self) -> str:
        spec = self.spec
        rule = f"uwo (mean - {spec.lam:g} sd)" if spec.rule == "uwo" else spec.rule
        return (
            f"ensemble {self.source}: {len(self.members)} members ({', '.join(spec.labels)}), rule {rule} over "
            f"rewards standardised on {spec.reference.texts} reference texts; each member in its own template "
            f"({self.template})"
        )


class MixedReading(ConfigError):
    """An ensemble's members read a rendered text differently: some split it into turns, others cannot (their
    templates differ), so its reward would mix a conversation's scores with a verbatim string's. position: the
    text's index in the batch."""

    def __init__(self, position: int, message: str):
        super().__init__(message)
        self.position = position


class MemberScores:
    """Member rewards of given texts scored in this process: (member identity, texts digest) -> rewards (M,), the
    oldest forgotten first beyond `limit`. Another ensemble of the same members (the rules of one `bon` run, or the
    reference texts of several rules) is not scored again."""

    def __init__(self, limit: int = 64):
        self.limit = limit
        self._rewards: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> np.ndarray | None:
        return self._rewards.get(key)

    def update(self, key: tuple[Any, ...], rewards: np.ndarray) -> None:
        self._rewards[key] = rewards
        while len(self._rewards) > self.limit:
            self._rewards.popitem(last=False)


MEMBER_SCORES = MemberScores()  # this process's, shared by every ensemble it loads


def _member_identity(member: Inference) -> tuple[Any, ...]:
    """What makes a member's rewards of given texts: its content (member_fingerprint), template, length and
    precision."""
    loaded = member.loaded
    return (member_fingerprint(str(loaded.source)), loaded.template, loaded.max_length, member.bf16)


def score_members(members: Sequence[Inference], items: Sequence[tuple[Any, str]], progress: str | None) -> np.ndarray:
    """Every member's rewards (K, M) of the items, each on its own scale, each scored once per process for the same
    texts read the same way (MEMBER_SCORES)."""
    digest = texts_digest(items)
    out = []
    for k, m in enumerate(members):
        key = (*_member_identity(m), digest)
        rewards = MEMBER_SCORES.get(key)
        if rewards is None:
            shown = f"{progress} {k + 1}/{len(members)}" if progress else None
            rewards = m.score_texts(items, progress=shown).rewards
            MEMBER_SCORES.update(key, rewards)
        out.append(rewards)
    return np.stack(out)


class EnsembleInference(Inference):
    """Inference over an ensemble folder (see the module docstring)."""

    kind = "ensemble"

    def __init__(self, source: str, spec: EnsembleSpec, members: Sequence[Inference]):
        for m, label in zip(members, spec.labels, strict=True):
            if m.in_context:
                raise ConfigError(f"{source}: member {label} is an in-context model; an ensemble takes scalar models")
        self.spec = spec
        self.members = list(members)
        self.loaded = EnsembleModel(source, spec, members)
        self.bf16 = self.loaded.bf16

    @property
    def counts(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for m in self.members:
            for k, v in m.counts.items():
                total[k] = total.get(k, 0) + v
        return total

    def encode(self, items: Sequence[TextItem]) -> Encoded:
        """Each member's encodings of the texts. A rendered text some members read as turns and others cannot
        (their templates differ) is refused (MixedReading); one no member can split is scored verbatim by each."""
        members = [[encode_item(m.encoder, item) for item in items] for m in self.members]  # type: ignore[attr-defined]
        labels = self.spec.labels
        for k in range(len(items)):
            verbatim = [label for label, encoded in zip(labels, members, strict=True) if encoded[k].unsplit]
            if verbatim and len(verbatim) < len(labels):
                split = [label for label in labels if label not in verbatim]
                raise MixedReading(
                    k,
                    f"the ensemble's members read this rendered text differently: {', '.join(split)} split it into "
                    f"turns of their template, {', '.join(verbatim)} cannot (templates {self.loaded.template}); send "
                    "the conversation as turns (/v1/score items) or serve members of one template",
                )
        unsplit = [k for k, e in enumerate(members[0]) if e.unsplit]
        return Encoded(members[0], members=members, unsplit=unsplit)

    def score_encoded(
        self, batch: Encoded, standard: Standard | None = None, progress: str | None = None
    ) -> TextScores:
        self.check_demos(standard.demos if standard else None)
        rewards = np.stack(
            [
                member.score_encoded(Encoded(encoded), progress=self._shown(progress, k)).rewards
                for k, (member, encoded) in enumerate(zip(self.members, batch.members, strict=True))
            ]
        )
        return self._scores(rewards, sum(batch.lengths), list(batch.unsplit))

    def score_texts(
        self, items: Sequence[tuple[Any, str]], demos: Sequence[PreferencePair] = (), progress: str | None = None
    ) -> TextScores:
        self.check_demos(demos)
        return self._scores(self.member_rewards(items, progress), 0, [])

    def member_rewards(self, items: Sequence[tuple[Any, str]], progress: str | None = None) -> np.ndarray:
        """Every member's rewards (K, M) of the items, on its own scale (score_members)."""
        return score_members(self.members, items, progress)

    def pair_doubt(self, scores: TextScores) -> np.ndarray | None:
        """The sd across members (ddof 1) of each pair's standardised margin."""
        assert scores.members is not None
        sd = np.asarray(self.spec.reference.sd)[:, None]
        margins = (scores.members[:, 0::2] - scores.members[:, 1::2]) / sd
        return margins.std(axis=0, ddof=1)

    def _scores(self, rewards: np.ndarray, tokens: int, unsplit: list[int]) -> TextScores:
        combined, spread = combine(rewards, self.spec)
        return TextScores(combined, uncertainty=spread, members=rewards, tokens=tokens, unsplit=unsplit)

    def _shown(self, progress: str | None, k: int) -> str | None:
        return f"{progress} {k + 1}/{len(self.members)}" if progress else None
