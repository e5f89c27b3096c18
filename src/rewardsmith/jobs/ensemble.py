"""Ensembles of reward models (models.ensemble): the inference every command uses when its model is an ensemble
folder (each member scored by its own Inference, in its own template; the rule applied to the standardised
rewards), and `rewardsmith ensemble`, which makes one: it scores the reference texts with every member and writes
their scales beside the members and the rule."""

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
from rewardsmith.jobs.common import JobResult, texts_digest
from rewardsmith.jobs.inference import Inference, InferenceOptions, TextScores, item_texts
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


# Member rewards scored in this process: (member identity, texts digest) -> rewards; the oldest go first.
_SCORED: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
_SCORED_MAX = 64


def _member_identity(member: Inference) -> tuple[Any, ...]:
    """What makes a member's rewards of given texts: its content (member_fingerprint), template, length and
    precision."""
    loaded = member.loaded
    return (member_fingerprint(str(loaded.source)), loaded.template, loaded.max_length, member.bf16)


def score_members(members: Sequence[Inference], items: Sequence[tuple[Any, str]], progress: str | None) -> np.ndarray:
    """Every member's rewards (K, M) of the items, each on its own scale. A member that scored the same texts, read
    the same way, earlier in this process (another ensemble of the same members: the rules of one `bon` run, or the
    reference texts of several rules) is not run again."""
    digest = texts_digest(items)
    out = []
    for k, m in enumerate(members):
        key = (*_member_identity(m), digest)
        rewards = _SCORED.get(key)
        if rewards is None:
            shown = f"{progress} {k + 1}/{len(members)}" if progress else None
            rewards = _SCORED[key] = m.score_texts(items, progress=shown).rewards
            while len(_SCORED) > _SCORED_MAX:
                _SCORED.popitem(last=False)
        out.append(rewards)
    return np.stack(out)


class EnsembleScorer:
    """The scorer interface of an ensemble (score_texts, score_pairs, counts): the rule's reward of each text."""

    def __init__(self, members: Sequence[Inference], spec: EnsembleSpec):
        self.members = list(members)
        self.spec = spec

    @property
    def counts(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for m in self.members:
            for k, v in m.counts.items():
                total[k] = total.get(k, 0) + v
        return total

    def member_rewards(self, items: Sequence[tuple[Any, str]], progress: str | None = None) -> np.ndarray:
        """Every member's rewards (K, M) of the items, on its own scale (score_members)."""
        return score_members(self.members, items, progress)

    def score_texts(self, items: Sequence[tuple[Any, str]], progress: str | None = None) -> np.ndarray:
        return combine(self.member_rewards(items, progress), self.spec)[0]

    def score_pairs(
        self, pairs: Sequence[PreferencePair], progress: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        chosen, rejected, _ = self.score_pairs_with_doubt(pairs, progress)
        return chosen, rejected

    def score_pairs_with_doubt(
        self, pairs: Sequence[PreferencePair], progress: str | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rule's rewards of the chosen (N,) and rejected (N,) responses, and each pair's doubt (N,): the sd
        across members of the standardised margin (ddof 1)."""
        rewards = self.member_rewards(item_texts(pairs, [False] * len(pairs)), progress)
        combined, _ = combine(rewards, self.spec)
        sd = np.asarray(self.spec.reference.sd)[:, None]
        margins = (rewards[:, 0::2] - rewards[:, 1::2]) / sd
        return combined[0::2], combined[1::2], margins.std(axis=0, ddof=1)


class EnsembleInference(Inference):
    """Inference over an ensemble folder: every member loaded as `score` loads it; rewards are the rule's, with the
    spread of the standardised members as each text's uncertainty (TextScores.uncertainty)."""

    def __init__(self, source: str, spec: EnsembleSpec, members: Sequence[Inference]):
        for m, label in zip(members, spec.labels, strict=True):
            if m.in_context:
                raise ConfigError(f"{source}: member {label} is an in-context model; an ensemble takes scalar models")
        self.spec = spec
        self.members = list(members)
        self.loaded = EnsembleModel(source, spec, members)  # type: ignore[assignment]
        self.bf16 = self.loaded.bf16
        self.scorer = EnsembleScorer(members, spec)

    @classmethod
    def load_folder(
        cls,
        source: str | Path,
        options: InferenceOptions | None = None,
        max_tokens: int | None = None,
        max_padding: float | None = None,
    ) -> EnsembleInference:
        spec = read_ensemble(source)
        members = [Inference.load(m, options, max_tokens, max_padding) for m in spec.members]
        return cls(str(source), spec, members)

    @property
    def counts(self) -> dict[str, int]:
        return self.scorer.counts

    def score_encoded(self, texts: Any, items: Sequence[tuple[Any, str]] = (), demos: Any = ()) -> TextScores:
        raise ConfigError(f"{self.loaded.source}: an ensemble scores texts in each member's own template")

    def score_texts(
        self, items: Sequence[tuple[Any, str]], demos: Sequence[PreferencePair] = (), progress: str | None = None
    ) -> TextScores:
        self.check_demos(demos)
        rewards = self.scorer.member_rewards(items, progress)
        combined, spread = combine(rewards, self.spec)
        return TextScores(combined, uncertainty=spread, members=rewards)


def make_ensemble(
    models: Sequence[str],
    out: str | Path,
    rule: str = "mean",
    lam: float = 1.0,
    reference: str | Path | None = None,
    options: InferenceOptions | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> JobResult:
    """Writes the ensemble folder `out`: the members (paths relative to it), the rule, and each member's mean and sd
    of rewards on the reference texts (a score input file; default: the packaged demo sample's held-out pairs)."""
    from rewardsmith.io.atomic import atomic_write_text

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
    members = [Inference.load(m, options) for m in models]
    for m, name in zip(members, models, strict=True):
        if m.in_context:
            raise ConfigError(f"ensemble: member {name} is an in-context model; an ensemble takes scalar models")
    rewards = score_members(members, items, "reference" if progress else None)
    mean, sd = scales(rewards)
    for name, s in zip(models, sd, strict=True):
        if not (np.isfinite(s) and s > 0):
            raise ConfigError(f"ensemble: member {name} gives every reference text the same reward; it has no scale")
    out.mkdir(parents=True, exist_ok=True)
    sources = [_relative(Path(m), out) for m in models]
    spec = EnsembleSpec(
        tuple(sources),
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
    return JobResult(
        out,
        f"ensemble of {len(models)} -> {out}",
        spec.to_dict(),
        [
            {"member": name, "reference mean": round(float(mu), 4), "reference sd": round(float(s), 4)}
            for name, mu, s in zip(models, mean, sd, strict=True)
        ],
        [
            f"rule {rule}"
            + (f", lambda {lam:g}" if rule == "uwo" else "")
            + f"; reference {ref_label}: {len(items)} texts",
            f"wrote {spec_path}",
        ],
    )


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
        from rewardsmith.jobs.score import read_score_rows

        _, pairs, singles, _ = read_score_rows(Path(reference))
        return str(reference), item_texts(pairs, singles)
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.jobs.demo import sample_dir

    with sample_dir() as data_dir:
        pairs = [p for name in REFERENCE_SETS for p in load_dataset(name, data_dir=data_dir).pairs[:REFERENCE_PAIRS]]
    label = f"the packaged sample: the first {REFERENCE_PAIRS} pairs of {' and '.join(REFERENCE_SETS)}"
    return label, item_texts(pairs, [False] * len(pairs))
