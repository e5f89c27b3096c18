"""An ensemble of reward models (models.ensemble: a folder holding ensemble.json) as one model: every member loaded
as `score` loads it, each encoding and scoring the texts in its own template, the rule applied to the standardised
rewards, and the spread of the standardised members as each text's uncertainty (TextScores.uncertainty); and
`write_ensemble`, which makes one: it scores the reference texts with every member and writes their scales, their
content fingerprints and the rule."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import ConfigError
from rewardsmith.inference.base import Encoded, Inference, InferenceOptions, Standard, TextScores
from rewardsmith.inference.items import TextItem, encode_item, item_texts, read_score_rows, texts_digest
from rewardsmith.io.atomic import atomic_write_text
from rewardsmith.models.ensemble import (
    ENSEMBLE_FILE,
    EnsembleSpec,
    Reference,
    check_members,
    check_rule,
    combine,
    member_fingerprint,
    read_ensemble,
    scales,
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

    @classmethod
    def load_folder(
        cls,
        source: str | Path,
        options: InferenceOptions | None = None,
        max_tokens: int | None = None,
        max_padding: float | None = None,
    ) -> EnsembleInference:
        from rewardsmith.inference.loading import load_inference

        spec = read_ensemble(source)
        members = [load_inference(m, options, max_tokens, max_padding) for m in spec.members]
        return cls(str(source), spec, members)

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


def write_ensemble(
    models: Sequence[str],
    out: str | Path,
    rule: str = "mean",
    lam: float = 1.0,
    reference: str | Path | None = None,
    options: InferenceOptions | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> tuple[EnsembleSpec, np.ndarray, str]:
    """Writes the ensemble folder `out`: the members (paths relative to it), each one's content fingerprint, the
    rule, and each member's mean and sd of rewards on the reference texts (a score input file; default: the
    packaged demo sample's held-out pairs). Returns the spec, the members' reference rewards (K, M) and the
    reference's label."""
    from rewardsmith.inference.loading import load_inference

    out = Path(out)
    check_rule(rule, lam)
    check_members(out, list(models), "ensemble")
    spec_path = out / ENSEMBLE_FILE
    if out.exists() and any(out.iterdir()) and not (overwrite and spec_path.exists()):
        raise ConfigError(
            f"{out}: not empty" + ("; --overwrite replaces the ensemble it holds" if spec_path.exists() else "")
        )
    ref_label, items = reference_items(reference)
    if len(items) < 2:
        raise ConfigError(f"{ref_label}: the reference set needs at least two texts to give each member a scale")
    members = [load_inference(m, options) for m in models]
    for m, name in zip(members, models, strict=True):
        if m.in_context:
            raise ConfigError(f"ensemble: member {name} is an in-context model; an ensemble takes scalar models")
    rewards = score_members(members, items, "reference" if progress else None)
    _, sd = scales(rewards)
    for name, s in zip(models, sd, strict=True):
        if not (np.isfinite(s) and s > 0):
            raise ConfigError(f"ensemble: member {name} gives every reference text the same reward; it has no scale")
    out.mkdir(parents=True, exist_ok=True)
    spec = EnsembleSpec(
        tuple(_relative(Path(m), out) for m in models),
        rule,
        float(lam),
        Reference(
            ref_label,
            len(items),
            texts_digest(items),  # item_texts gives each prompt as its turns
            tuple(float(x) for x in rewards.mean(axis=1)),
            tuple(float(x) for x in sd),
        ),
        tuple(models),
        tuple(member_fingerprint(m) for m in models),
    )
    atomic_write_text(spec_path, json.dumps(spec.to_dict(), indent=1) + "\n")
    return spec, rewards, ref_label


def _relative(member: Path, out: Path) -> str:
    """A local member beside or under the ensemble folder's parent as a path relative to the folder (they move
    together); one elsewhere as an absolute path; a hub id as written."""
    if not member.exists():
        return str(member)
    relative = os.path.relpath(member.resolve(), out.resolve())
    return relative if not relative.startswith(os.path.join("..", "..")) else str(member.resolve())


# The default reference texts: this many pairs of each of the packaged sample's HH-RLHF test files.
REFERENCE_PAIRS = 100
REFERENCE_SETS = ("hh-rlhf/harmless-base", "hh-rlhf/helpful-base")


def reference_items(reference: str | Path | None) -> tuple[str, list[tuple[Any, str]]]:
    """(label, texts) of the reference set: a file `score` reads (both responses of a pair), or by default the
    first REFERENCE_PAIRS pairs of each REFERENCE_SETS file of the packaged sample."""
    if reference is not None:
        _, pairs, singles, _ = read_score_rows(Path(reference))
        return str(reference), item_texts(pairs, singles)
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.data.sources import sample_dir

    with sample_dir() as data_dir:
        pairs = [p for name in REFERENCE_SETS for p in load_dataset(name, data_dir=data_dir).pairs[:REFERENCE_PAIRS]]
    label = f"the packaged sample: the first {REFERENCE_PAIRS} pairs of {' and '.join(REFERENCE_SETS)}"
    return label, item_texts(pairs, [False] * len(pairs))
