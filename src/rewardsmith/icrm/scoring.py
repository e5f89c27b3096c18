"""Scoring under a standard given by demonstrations, with per-standard caching (set mode).

In set mode a standard's context vector depends only on its demonstrations: DemoCache computes it once
(one backbone pass per demonstration) and every later pair scored under the same standard reuses it, so
scoring P pairs under N demonstrations costs 2P + 2N backbone passes instead of 2P (N + 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import Encoder
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.schema import PreferencePair, render_turns, stable_hash
from rewardsmith.errors import DataError
from rewardsmith.evaluate.scoring import batched_forward
from rewardsmith.icrm.features import concat_prompt, embed_texts
from rewardsmith.losses.beta_elbo import beta_posterior
from rewardsmith.models.beta import BetaRewardModel
from rewardsmith.stats import require_finite


def demo_key(demos: Sequence[PreferencePair]) -> str:
    """Identity of a standard: the hash of its demonstrations' texts, independent of their order (set-mode
    pooling is a mean, so the order cannot change the context)."""
    parts = sorted(stable_hash(f"{d.prompt_text()}\x1e{d.chosen}\x1e{d.rejected}") for d in demos)
    return stable_hash("|".join(parts))


@dataclass
class DemoCache:
    """Context vectors (D,) and N per standard, keyed by demo_key. hits / misses count lookups."""

    contexts: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get(self, key: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        found = self.contexts.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def update(self, key: str, context: torch.Tensor, n_demos: torch.Tensor) -> None:
        self.contexts[key] = (context, n_demos)

    def discard(self, key: str) -> None:
        """Forgets one standard (a long-running server bounds how many ad-hoc standards it keeps)."""
        self.contexts.pop(key, None)


@dataclass
class PairScores:
    """Per pair (P,) float64: utilities and confidences of chosen and rejected, and the Beta posterior's mean
    mu = P(chosen preferred) and concentration tau."""

    u_chosen: np.ndarray
    u_rejected: np.ndarray
    s_chosen: np.ndarray
    s_rejected: np.ndarray
    mu: np.ndarray
    tau: np.ndarray


class ICRMScorer:
    """Scores texts and pairs with a BetaRewardModel under demonstrations."""

    def __init__(
        self,
        model: BetaRewardModel,
        encoder: Encoder,
        batch_size: int = 64,
        bf16: bool = False,
        cache: DemoCache | None = None,
    ):
        self.model = model.eval()
        self.encoder = encoder
        self.batch_size = batch_size
        self.bf16 = bf16
        self.cache = cache if cache is not None else DemoCache()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.inference_mode()
    def context(self, demos: Sequence[PreferencePair]) -> tuple[torch.Tensor, torch.Tensor]:
        """Set mode: the context vector (D,) and N of a standard, from the cache when seen before."""
        key = demo_key(demos)
        found = self.cache.get(key)
        if found is not None:
            return found
        if not demos:
            context, n = torch.zeros(self.model.context_dim), torch.tensor(0.0)
        else:
            items: list[tuple[Any, str]] = []
            for d in demos:
                items += [(d.prompt, d.chosen), (d.prompt, d.rejected)]
            emb = embed_texts(self.model, self.encoder, items, self.batch_size, self.bf16).to(self.device)
            mask = torch.ones(1, len(demos), dtype=torch.bool, device=self.device)
            context, n = self.model.context(emb[0::2].unsqueeze(0), emb[1::2].unsqueeze(0), mask)
            context, n = context[0].cpu(), n[0].cpu()
        self.cache.update(key, context, n)
        return context, n

    @torch.inference_mode()
    def score_texts(
        self, items: Sequence[tuple[Any, str]], demos: Sequence[PreferencePair] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """Utility u (M,) and confidence s (M,) of (prompt, response) items (a prompt as turns or, in concat
        mode, a rendered prompt string) under the demonstrations."""
        return self.score_texts_under(items, [demos])[0]

    @torch.inference_mode()
    def score_texts_under(
        self, items: Sequence[tuple[Any, str]], standards: Sequence[Sequence[PreferencePair]]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """score_texts under each standard in turn. In set mode an item's embedding does not depend on the
        demonstrations, so the items pass the backbone once for all standards (the same numbers as one call per
        standard); in concat mode the demonstrations are part of every input and each standard is a pass."""
        if self.model.mode == "set":
            h = embed_texts(self.model, self.encoder, items, self.batch_size, self.bf16).to(self.device)
            out = []
            for demos in standards:
                context, n = self.context(demos)
                u, s = self.model.response_heads(h, context.to(self.device), n.to(self.device))
                out.append(_finite(u.double().cpu().numpy(), s.double().cpu().numpy()))
            return out
        return [self._concat_scores(items, demos) for demos in standards]

    def _concat_scores(
        self, items: Sequence[tuple[Any, str]], demos: Sequence[PreferencePair]
    ) -> tuple[np.ndarray, np.ndarray]:
        demo_triples = [(d.prompt_text(), d.chosen, d.rejected) for d in demos]
        texts = [
            (concat_prompt(demo_triples, prompt if isinstance(prompt, str) else render_turns(tuple(prompt))), response)
            for prompt, response in items
        ]
        encoded = [self.encoder.encode(p, r) for p, r in texts]
        out = batched_forward(
            lambda b: torch.stack(self.model.concat_heads(b), dim=-1),
            encoded,
            int(self.encoder.tokenizer.pad_token_id),  # type: ignore[attr-defined]
            self.device,
            self.batch_size,
            self.bf16,
        )
        return _finite(out[:, 0].double().numpy(), out[:, 1].double().numpy())

    def score_pairs(self, pairs: Sequence[PreferencePair], demos: Sequence[PreferencePair] = ()) -> PairScores:
        """PairScores of each pair under the demonstrations."""
        return self.score_pairs_under(pairs, [demos])[0]

    def score_pairs_under(
        self, pairs: Sequence[PreferencePair], standards: Sequence[Sequence[PreferencePair]]
    ) -> list[PairScores]:
        """PairScores of each pair under each standard (score_texts_under: set mode embeds the pairs once)."""
        items: list[tuple[Any, str]] = []
        for p in pairs:
            items += [(p.prompt, p.chosen), (p.prompt, p.rejected)]
        return [pair_scores(u[0::2], u[1::2], s[0::2], s[1::2]) for u, s in self.score_texts_under(items, standards)]


def pair_scores(
    u_chosen: np.ndarray, u_rejected: np.ndarray, s_chosen: np.ndarray, s_rejected: np.ndarray
) -> PairScores:
    """PairScores of P pairs from the utilities and confidences (P,) of their two sides (score_texts output)."""
    t = [
        torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64))
        for v in (u_chosen, u_rejected, s_chosen, s_rejected)
    ]
    post = beta_posterior(*t)
    return PairScores(
        np.asarray(u_chosen),
        np.asarray(u_rejected),
        np.asarray(s_chosen),
        np.asarray(s_rejected),
        post.mu.double().numpy(),
        post.tau.double().numpy(),
    )


@dataclass(frozen=True)
class Demonstrations:
    """The demonstrations that steer an in-context model (steering_demos) and how many were given."""

    pairs: tuple[PreferencePair, ...]
    given: int

    def line(self) -> str:
        """One summary line: how many demonstrations steered the scores."""
        left_out = self.given - len(self.pairs)
        if not left_out:
            return f"steered by {len(self.pairs)} demonstrations"
        return (
            f"steered by {len(self.pairs)} of {self.given} demonstrations ({left_out} left out: no preference, "
            "the same or an empty response on both sides)"
        )


def steering_demos(pairs: Sequence[PreferencePair], where: str | Path, given: int | None = None) -> Demonstrations:
    """The one rule of `score --demos` and the server for which demonstrations steer: a pair whose chosen and
    rejected responses are the same states no preference and is left out (as every dataset leaves it out). given:
    how many were given (default len(pairs); more when a reader already left some out). DataError naming `where`
    when none is left: scores would silently be those of no demonstrations."""
    given = len(pairs) if given is None else given
    kept = tuple(p for p in pairs if p.chosen != p.rejected)
    if not kept:
        raise DataError(
            f"none of the {given} demonstrations states a preference (the same or an empty response on both sides): "
            "nothing to steer by",
            path=where,
        )
    return Demonstrations(kept, given)


def read_demos(path: str | Path) -> Demonstrations:
    """Demonstrations from a preference file: any format the `file` dataset reads (JSONL / JSON / Parquet /
    CSV rows with prompt, chosen, rejected; HH transcripts; chat lists), malformed rows an error; those that
    steer chosen by steering_demos."""
    dataset = load_dataset("file", path=path)
    return steering_demos(dataset.pairs, path, dataset.n_rows)


def _finite(u: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(u, s) when both are finite everywhere; else NonFiniteReward naming the first text that is not."""
    return require_finite(u, "utility"), require_finite(s, "confidence")
