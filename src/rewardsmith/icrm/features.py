"""Backbone embeddings of pools (cached on disk), set-mode episode tensors and concat-mode texts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from rewardsmith.config import ICRMModelConfig
from rewardsmith.data.collate import Encoder, pad_texts
from rewardsmith.data.schema import render_turns, stable_hash
from rewardsmith.evaluate.scoring import embed_encoded
from rewardsmith.icrm.episodes import Episode, PairPool
from rewardsmith.io.atomic import atomic_write_bytes
from rewardsmith.losses.beta_elbo import beta_posterior
from rewardsmith.models.beta import BetaRewardModel, BetaScores

CONCAT_HEADER = "Examples of the preferred standard."


def embed_texts(
    model: BetaRewardModel,
    encoder: Encoder,
    items: Sequence[tuple[Any, str]],
    batch_size: int = 64,
    bf16: bool = False,
    progress: str | None = None,
) -> torch.Tensor:
    """Pooled embeddings (N, H) float32 of (prompt, response) texts (a prompt as turns or a prompt string), in
    input order."""
    texts = [encoder.encode(prompt, response) for prompt, response in items]
    return embed_encoded(model, texts, _pad_id(encoder), batch_size, bf16, progress)


def _pad_id(encoder: Encoder) -> int:
    return int(encoder.tokenizer.pad_token_id)  # type: ignore[attr-defined]


@dataclass
class PoolEmbeddings:
    """Embeddings of each pair's stored chosen (P, H) and rejected (P, H) response."""

    chosen: torch.Tensor
    rejected: torch.Tensor


def embedding_settings(model_cfg: ICRMModelConfig, bf16: bool) -> str:
    """Everything an embedding depends on besides the texts (part of the cache fingerprint)."""
    m = model_cfg
    template = "" if m.template == "hh" else f"|{m.template}"  # older caches (all HH) keep their fingerprints
    return f"{m.backbone}|{m.pooling}|{m.max_length}|{m.min_prompt_tokens}|{m.num_layers}|{bf16}{template}"


def pool_fingerprint(pool: PairPool, settings: str) -> str:
    """Changes whenever the pairs' texts or the embedding settings change (a stale cache is never reused);
    the pool's name does not enter, so a renamed view of the same pairs shares the cache."""
    texts = "\x1f".join(f"{p.prompt_text()}\x1e{p.chosen}\x1e{p.rejected}" for p in pool.pairs)
    return stable_hash(f"{settings}::{len(pool)}::{texts}")


def embed_pool(
    model: BetaRewardModel,
    encoder: Encoder,
    pool: PairPool,
    batch_size: int = 64,
    bf16: bool = False,
    progress: bool = False,
    cache_dir: str | Path | None = None,
    settings: str = "",
) -> PoolEmbeddings:
    """Embeds every pair of `pool` once; with cache_dir, reads/writes `<fingerprint>.safetensors` there
    (atomic, pickle-free)."""
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"{pool_fingerprint(pool, settings)[:20]}.safetensors"
        if path.exists():
            try:
                state = load_file(str(path))
                return PoolEmbeddings(state["chosen"], state["rejected"])
            except (SafetensorError, OSError, KeyError):
                path.unlink(missing_ok=True)  # a torn or foreign cache file: recompute it
    items: list[tuple[Any, str]] = []
    for p in pool.pairs:
        items += [(p.prompt, p.chosen), (p.prompt, p.rejected)]
    emb = embed_texts(model, encoder, items, batch_size, bf16, f"embed {pool.name}" if progress else None)
    out = PoolEmbeddings(emb[0::2].contiguous(), emb[1::2].contiguous())
    if path is not None:
        atomic_write_bytes(
            path, lambda fh: fh.write(save({"chosen": out.chosen.contiguous(), "rejected": out.rejected.contiguous()}))
        )
    return out


def set_episode_tensors(
    episodes: Sequence[Episode],
    tables: dict[str, PoolEmbeddings],
    demo_tables: dict[str, PoolEmbeddings] | None = None,
) -> dict[str, torch.Tensor]:
    """Set-mode batch from cached embeddings.

    Returns first, second (B, H): the target's responses as presented; labels (B,) P(first preferred);
    demo_preferred, demo_other (B, M, H) with M = the largest N in the batch (at least 1); demo_mask (B, M)
    bool; n_demos (B,) float.
    """
    demo_tables = demo_tables or tables
    b = len(episodes)
    width = max([1] + [e.n_demos for e in episodes])
    hidden = next(iter(tables.values())).chosen.shape[1]
    first = torch.empty(b, hidden)
    second = torch.empty(b, hidden)
    pref = torch.zeros(b, width, hidden)
    other = torch.zeros(b, width, hidden)
    mask = torch.zeros(b, width, dtype=torch.bool)
    for row, e in enumerate(episodes):
        t = tables[e.standard.pool]
        c, r = t.chosen[e.target], t.rejected[e.target]
        first[row], second[row] = (c, r) if e.first_is_chosen else (r, c)
        if e.demos:
            d = demo_tables[e.standard.pool]
            idx = torch.tensor([x.index for x in e.demos])
            wins = torch.tensor([x.chosen_wins for x in e.demos]).unsqueeze(-1)
            dc, dr = d.chosen[idx], d.rejected[idx]
            k = len(e.demos)
            pref[row, :k] = torch.where(wins, dc, dr)
            other[row, :k] = torch.where(wins, dr, dc)
            mask[row, :k] = True
    labels = torch.tensor([e.label for e in episodes], dtype=torch.float32)
    n = torch.tensor([float(e.n_demos) for e in episodes])
    return {
        "first": first,
        "second": second,
        "labels": labels,
        "demo_preferred": pref,
        "demo_other": other,
        "demo_mask": mask,
        "n_demos": n,
    }


def concat_prompt(demos: Sequence[tuple[str, str, str]], target_prompt: str) -> str:
    """The context a concat-mode model reads: each demonstration (prompt, preferred, other) serialised, then
    the target prompt. PairEncoder keeps the end of a long prompt, so the earliest demonstrations are the
    ones cut when the context is full."""
    if not demos:
        return target_prompt
    parts = [CONCAT_HEADER]
    for k, (prompt, preferred, other) in enumerate(demos, start=1):
        parts.append(f"\n\nExample {k}:{prompt} {preferred}\nPreferred over:{prompt} {other}")
    parts.append(f"\n\nNow the conversation to judge:{target_prompt}")
    return "".join(parts)


def concat_episode_batch(
    episodes: Sequence[Episode],
    pools: dict[str, PairPool],
    encoder: Encoder,
    demo_pools: dict[str, PairPool] | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Concat-mode batch: rows 0..B-1 are the first responses, B..2B-1 the second ones, each after the
    serialised demonstrations. Returns (pad_texts tensors (2B, T), labels (B,))."""
    demo_pools = demo_pools or pools
    firsts, seconds = [], []
    for e in episodes:
        pair = pools[e.standard.pool].pairs[e.target]
        demo_pairs = demo_pools[e.standard.pool].pairs
        demos = []
        for d in e.demos:
            dp = demo_pairs[d.index]
            w, lo = (dp.chosen, dp.rejected) if d.chosen_wins else (dp.rejected, dp.chosen)
            demos.append((render_turns(dp.prompt), w, lo))
        prompt = concat_prompt(demos, render_turns(pair.prompt))
        a, b = (pair.chosen, pair.rejected) if e.first_is_chosen else (pair.rejected, pair.chosen)
        firsts.append(encoder.encode(prompt, a))
        seconds.append(encoder.encode(prompt, b))
    batch = pad_texts(firsts + seconds, _pad_id(encoder))
    labels = torch.tensor([e.label for e in episodes], dtype=torch.float32)
    return batch, labels


def to_numpy(scores: BetaScores) -> dict[str, np.ndarray]:
    """u_first, u_second, s_first, s_second and the Beta posterior's mu and tau as float64 arrays (B,)."""
    post = beta_posterior(scores.u_first, scores.u_second, scores.s_first, scores.s_second)
    fields = {
        "u_first": scores.u_first,
        "u_second": scores.u_second,
        "s_first": scores.s_first,
        "s_second": scores.s_second,
        "mu": post.mu,
        "tau": post.tau,
    }
    return {k: v.detach().double().cpu().numpy() for k, v in fields.items()}
