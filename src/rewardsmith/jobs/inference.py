"""The one inference path of `score`, `eval`, `calibrate --model`, `serve` and the demo: a loaded model
(models.loading: rewardsmith folders, Hugging Face reward models, OpenRLHF checkpoints, LoRA adapters), its
scorer (evaluate.scoring.RewardScorer for a scalar model, icrm.scoring.ICRMScorer for an in-context one steered
by demonstrations), an optional per-rater map (calibrate.maps), and one formatter of scored items.

An item is a single response ({prompt, response}) or a pair ({prompt, chosen, rejected}); its result holds
`reward`, or `reward_chosen`, `reward_rejected` and `p_chosen` (the preference probability on the model's own
scale: sigmoid of the reward margin, or an in-context model's posterior mean), plus the confidences of an
in-context model and, for a pair, its posterior's spread `p_chosen_sd` (posterior_sd), or an ensemble's
uncertainty `reward_sd` (`reward_sd_chosen`, `reward_sd_rejected`: the sd of its standardised members).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.data.collate import EncodedText
from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import ConfigError
from rewardsmith.evaluate.scoring import RewardScorer, default_device
from rewardsmith.models.loading import LoadedModel, load_reward_model
from rewardsmith.stats import sigmoid


@dataclass
class TextScores:
    """Scores of M texts, in order: rewards (M,) float64 (an in-context model's utility u; an ensemble's rule),
    confidence (M,) for an in-context model (None for a scalar one), and for an ensemble (models.ensemble) the
    uncertainty (M,), the sd of its standardised members, and the members' own rewards (K, M)."""

    rewards: np.ndarray
    confidence: np.ndarray | None = None
    uncertainty: np.ndarray | None = None
    members: np.ndarray | None = None


@dataclass(frozen=True)
class InferenceOptions:
    """How `score`, `eval`, `bench` and the server read and run a model (the command-line options of cli/common.py:
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


class Inference:
    """A loaded model and the scorer that turns its texts into scores (see the module docstring).

    options: its batch size and precision (InferenceOptions); max_tokens / max_padding: cap each forward pass (the
    server's rounds)."""

    def __init__(
        self,
        loaded: LoadedModel,
        options: InferenceOptions | None = None,
        max_tokens: int | None = None,
        max_padding: float | None = None,
    ):
        options = options or InferenceOptions()
        batch_size = options.batch_size
        self.loaded = loaded
        self.bf16 = loaded.bf16 if options.bf16 is None else options.bf16
        self.encoder = loaded.encoder()
        self.scorer: Any
        if loaded.in_context:
            from rewardsmith.icrm.scoring import ICRMScorer

            # A forward pass holds at most max_tokens padded tokens.
            rows = batch_size if max_tokens is None else max(1, max_tokens // loaded.max_length)
            self.scorer = ICRMScorer(loaded.model, self.encoder, rows, self.bf16)  # type: ignore[arg-type]
        else:
            self.scorer = RewardScorer(
                loaded.model,
                self.encoder,
                loaded.pad_id,
                batch_size,
                self.bf16,
                max_tokens=max_tokens,
                max_padding=max_padding,
            )

    @classmethod
    def load(
        cls,
        source: str | Path,
        options: InferenceOptions | None = None,
        max_tokens: int | None = None,
        max_padding: float | None = None,
    ) -> Inference:
        """load_reward_model(source, ...) as `options` say, on the first CUDA device (else the CPU), with its
        scorer."""
        from rewardsmith.models.ensemble import is_ensemble

        if is_ensemble(source):
            from rewardsmith.jobs.ensemble import EnsembleInference

            return EnsembleInference.load_folder(source, options, max_tokens, max_padding)
        options = options or InferenceOptions()
        loaded = load_reward_model(
            source, options.template, options.max_length, trust_remote_code=options.trust_remote_code
        )
        loaded.to(default_device())
        return cls(loaded, options, max_tokens, max_padding)

    @property
    def in_context(self) -> bool:
        return self.loaded.in_context

    @property
    def counts(self) -> dict[str, int]:
        return self.encoder.counts

    def check_demos(self, demos: Sequence[PreferencePair] | None, what: str = "demonstrations") -> None:
        """ConfigError when demonstrations are given to a scalar model (`what` names the field or option)."""
        if demos and not self.in_context:
            raise ConfigError(f"{what}: a scalar reward model takes no demonstrations (only an in-context model does)")

    def score_encoded(
        self, texts: Sequence[EncodedText], items: Sequence[tuple[Any, str]] = (), demos: Sequence[PreferencePair] = ()
    ) -> TextScores:
        """Scores of texts already encoded by self.encoder (a scalar model), or of their items (an in-context
        model encodes with its demonstrations)."""
        if self.in_context:
            u, s = self.scorer.score_texts(items, demos)
            return TextScores(u, s)
        return TextScores(self.scorer.score_encoded(texts))

    def score_texts(
        self, items: Sequence[tuple[Any, str]], demos: Sequence[PreferencePair] = (), progress: str | None = None
    ) -> TextScores:
        """Scores of (prompt, response) items; a prompt is turns or a prompt string."""
        self.check_demos(demos)
        if self.in_context:
            u, s = self.scorer.score_texts(items, demos)
            return TextScores(u, s)
        return TextScores(self.scorer.score_texts(items, progress))


def item_texts(pairs: Sequence[PreferencePair], singles: Sequence[bool]) -> list[tuple[Any, str]]:
    """The texts of scored items in order: one per single response, chosen then rejected per pair."""
    texts: list[tuple[Any, str]] = []
    for pair, single in zip(pairs, singles, strict=True):
        texts.append((pair.prompt, pair.chosen))
        if not single:
            texts.append((pair.prompt, pair.rejected))
    return texts


def text_row(singles: Sequence[bool], position: int) -> tuple[int, str]:
    """(row index, field) of the text at `position` of item_texts(pairs, singles): "response" for a single
    response, "chosen" or "rejected" for a pair."""
    k = 0
    for row, single in enumerate(singles):
        width = 1 if single else 2
        if position < k + width:
            return row, "response" if single else ("chosen", "rejected")[position - k]
        k += width
    raise IndexError(position)


def item_results(
    singles: Sequence[bool], scores: TextScores, maps: Any = None, rater: str | None = None
) -> list[dict[str, float]]:
    """One result per item (see the module docstring) from the scores of item_texts. maps + rater: rewards
    mapped to that rater's scale; p_chosen stays on the model's own scale (an in-context model's posterior
    mean)."""
    rewards, confidence, sd = scores.rewards, scores.confidence, scores.uncertainty
    posterior = pair_posteriors(singles, scores)
    shown = rewards if maps is None else maps.apply(str(rater), rewards)[0]
    out: list[dict[str, float]] = []
    k = pair_no = 0
    for single in singles:
        if single:
            result = {"reward": float(shown[k])}
            if confidence is not None:
                result["confidence"] = float(confidence[k])
            if sd is not None:
                result["reward_sd"] = float(sd[k])
            k += 1
        else:
            p = posterior.mu[pair_no] if posterior is not None else sigmoid(rewards[k] - rewards[k + 1])
            result = {"reward_chosen": float(shown[k]), "reward_rejected": float(shown[k + 1]), "p_chosen": float(p)}
            if posterior is not None:
                result["p_chosen_sd"] = float(posterior_sd(posterior.mu[pair_no], posterior.tau[pair_no]))
            if confidence is not None:
                result["confidence_chosen"], result["confidence_rejected"] = (
                    float(confidence[k]),
                    float(confidence[k + 1]),
                )
            if sd is not None:
                result["reward_sd_chosen"], result["reward_sd_rejected"] = float(sd[k]), float(sd[k + 1])
            k += 2
            pair_no += 1
        out.append(result)
    return out


def posterior_sd(mu: Any, tau: Any) -> Any:
    """The standard deviation of an in-context model's Beta posterior over P(chosen preferred), mean mu and
    concentration tau (Beta(mu tau, (1 - mu) tau)): sqrt(mu (1 - mu) / (tau + 1)). Its spread: few or
    contradicting cues leave tau small and the sd wide (tau >= 1 here, so at most sqrt(1/8), about 0.35)."""
    return np.sqrt(mu * (1.0 - mu) / (tau + 1.0))


def pair_posteriors(singles: Sequence[bool], scores: TextScores) -> Any:
    """An in-context model's Beta posterior per pair item (icrm.scoring.PairScores: mean mu = P(chosen
    preferred), concentration tau); None for a scalar model (p_chosen is then the sigmoid of the margin)."""
    if scores.confidence is None:
        return None
    from rewardsmith.icrm.scoring import pair_scores

    first, second = [], []
    k = 0
    for single in singles:
        if not single:
            first.append(k)
            second.append(k + 1)
        k += 1 if single else 2
    u, s = scores.rewards, scores.confidence
    return pair_scores(u[first], u[second], s[first], s[second])
