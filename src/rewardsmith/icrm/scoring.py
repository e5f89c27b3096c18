"""Scoring under a standard given by demonstrations, with per-standard caching (set mode).

In set mode a standard's context vector depends only on its demonstrations: DemoCache computes it once
(one backbone pass per demonstration) and every later pair scored under the same standard reuses it, so
scoring P pairs under N demonstrations costs 2P + 2N backbone passes instead of 2P (N + 1).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import PairEncoder, pad_texts, sorted_batches
from rewardsmith.data.schema import PreferencePair, stable_hash, user_prompt
from rewardsmith.errors import DataError
from rewardsmith.icrm.features import concat_prompt, embed_texts
from rewardsmith.icrm.model import BetaRewardModel, load_beta_reward_model


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


@dataclass
class PairScores:
    """Per pair (P,) float64: utilities and confidences of chosen and rejected, posterior mean mu =
    P(chosen preferred) and concentration tau."""

    u_chosen: np.ndarray
    u_rejected: np.ndarray
    s_chosen: np.ndarray
    s_rejected: np.ndarray

    @property
    def mu(self) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self.u_chosen - self.u_rejected)))

    @property
    def tau(self) -> np.ndarray:
        return np.logaddexp(0, self.s_chosen) + np.logaddexp(0, self.s_rejected) + 1.0


class ICRMScorer:
    """Scores texts and pairs with a BetaRewardModel under demonstrations."""

    def __init__(
        self,
        model: BetaRewardModel,
        tokenizer: Any,
        max_length: int = 192,
        min_prompt_tokens: int = 48,
        batch_size: int = 64,
        bf16: bool = False,
        cache: DemoCache | None = None,
    ):
        self.model = model.eval()
        self.encoder = PairEncoder(tokenizer, max_length, min_prompt_tokens)
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
            items = []
            for d in demos:
                prompt = d.prompt_text()
                items += [(prompt, d.chosen), (prompt, d.rejected)]
            emb = embed_texts(self.model, self.encoder, items, self.batch_size, self.bf16).to(self.device)
            mask = torch.ones(1, len(demos), dtype=torch.bool, device=self.device)
            context, n = self.model.context(emb[0::2].unsqueeze(0), emb[1::2].unsqueeze(0), mask)
            context, n = context[0].cpu(), n[0].cpu()
        self.cache.update(key, context, n)
        return context, n

    @torch.inference_mode()
    def score_texts(
        self, items: Sequence[tuple[str, str]], demos: Sequence[PreferencePair] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """Utility u (M,) and confidence s (M,) of (prompt text, response) items under the demonstrations."""
        if self.model.mode == "set":
            context, n = self.context(demos)
            h = embed_texts(self.model, self.encoder, items, self.batch_size, self.bf16).to(self.device)
            u, s = self.model.response_heads(h, context.to(self.device), n.to(self.device))
            return u.double().cpu().numpy(), s.double().cpu().numpy()
        demo_triples = [(d.prompt_text(), d.chosen, d.rejected) for d in demos]
        texts = [(concat_prompt(demo_triples, prompt), response) for prompt, response in items]
        encoded = [self.encoder.encode(p, r) for p, r in texts]
        u_out, s_out = np.zeros(len(items)), np.zeros(len(items))
        for idx in sorted_batches([len(t.input_ids) for t in encoded], self.batch_size):
            batch = pad_texts([encoded[i] for i in idx], int(self.encoder.tokenizer.pad_token_id))
            u, s = self.model.concat_heads({k: v.to(self.device) for k, v in batch.items()})
            u_out[idx], s_out[idx] = u.double().cpu().numpy(), s.double().cpu().numpy()
        return u_out, s_out

    def score_pairs(
        self, pairs: Sequence[PreferencePair], demos: Sequence[PreferencePair] = ()
    ) -> PairScores:
        """PairScores of each pair under the demonstrations."""
        items: list[tuple[str, str]] = []
        for p in pairs:
            prompt = p.prompt_text()
            items += [(prompt, p.chosen), (prompt, p.rejected)]
        u, s = self.score_texts(items, demos)
        return PairScores(u[0::2], u[1::2], s[0::2], s[1::2])


def read_demos(path: str | Path) -> list[PreferencePair]:
    """Demonstrations from a JSON Lines file (or a JSON array): {"prompt", "chosen", "rejected"} per row;
    "prompt" is the user's message."""
    path = Path(path)
    if not path.exists():
        raise DataError("demonstrations file not found", path=path)
    text = path.read_text(encoding="utf-8")
    try:
        rows = (
            json.loads(text)
            if text.lstrip().startswith("[")
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON ({exc.msg}, line {exc.lineno})", path=path) from None
    demos = []
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DataError("expected an object", path=path, row=i)
        for key in ("prompt", "chosen", "rejected"):
            if not isinstance(row.get(key), str):
                raise DataError("missing or not a string", path=path, row=i, field=key)
        demos.append(PreferencePair(user_prompt(row["prompt"]), row["chosen"], row["rejected"]))
    return demos


def score_with_demos(
    model_dir: str | Path,
    pairs_or_texts: Sequence[PreferencePair] | Sequence[tuple[str, str]],
    demos_file: str | Path | None = None,
    batch_size: int = 64,
    bf16: bool | None = None,
) -> dict[str, np.ndarray]:
    """Scores with a saved ICRM steered by the demonstrations in demos_file (None: no demonstrations).

    bf16: autocast the backbone; None = as the model was trained (its config), so scores match training.

    pairs_or_texts: PreferencePairs, or (prompt text, response) tuples where the prompt text is a
    PreferencePair.prompt_text() rendering or a plain user message.
    Returns for pairs: {"chosen", "rejected"} utilities, {"confidence_chosen", "confidence_rejected"},
    "mu" = P(chosen preferred) and "tau", each (P,); for texts: {"utility", "confidence"}, each (M,).
    """
    model, tokenizer, cfg = load_beta_reward_model(model_dir)
    model.to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    use_bf16 = cfg.bf16 if bf16 is None else bf16
    scorer = ICRMScorer(model, tokenizer, cfg.max_length, cfg.min_prompt_tokens, batch_size, use_bf16)
    demos = read_demos(demos_file) if demos_file else []
    items = list(pairs_or_texts)
    if items and isinstance(items[0], PreferencePair):
        s = scorer.score_pairs(items, demos)  # type: ignore[arg-type]  # checked: PreferencePairs
        return {
            "chosen": s.u_chosen,
            "rejected": s.u_rejected,
            "confidence_chosen": s.s_chosen,
            "confidence_rejected": s.s_rejected,
            "mu": s.mu,
            "tau": s.tau,
        }
    raw: list[tuple[str, str]] = items  # type: ignore[assignment]
    texts = [(p if p.startswith("\n\nHuman:") else user_prompt_text(p), r) for p, r in raw]
    u, conf = scorer.score_texts(texts, demos)
    return {"utility": u, "confidence": conf}


def user_prompt_text(message: str) -> str:
    """A plain user message in the HH framing the models were trained on."""
    return PreferencePair(user_prompt(message), "", "").prompt_text()
