"""Backbone embeddings of pools (cached on disk), set-mode episode tensors and concat-mode texts."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import PairEncoder, pad_texts, sorted_batches
from rewardsmith.data.schema import stable_hash
from rewardsmith.icrm.episodes import Episode, PairPool
from rewardsmith.icrm.model import BetaRewardModel, BetaScores
from rewardsmith.train.checkpoint import save_checkpoint

CONCAT_HEADER = "Examples of the preferred standard."


@torch.inference_mode()
def embed_texts(
    model: BetaRewardModel,
    encoder: PairEncoder,
    items: Sequence[tuple[str, str]],
    batch_size: int = 64,
    bf16: bool = False,
    progress: bool = False,
    description: str = "embed",
) -> torch.Tensor:
    """Pooled embeddings (N, H) float32 of (prompt, response) texts, in input order."""
    model.eval()
    device = next(model.parameters()).device
    texts = [encoder.encode(prompt, response) for prompt, response in items]
    out = torch.zeros(len(texts), model.hidden_size, dtype=torch.float32)
    if not texts:
        return out
    pad_id = int(encoder.tokenizer.pad_token_id)
    autocast: Any = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
    batches = list(sorted_batches([len(t.input_ids) for t in texts], batch_size))
    iterator: Any = batches
    if progress and len(batches) > 1:
        from rich.progress import track

        iterator = track(batches, description=description, transient=True)
    with autocast:
        for idx in iterator:
            batch = {k: v.to(device) for k, v in pad_texts([texts[i] for i in idx], pad_id).items()}
            out[idx] = model.embed(batch).float().cpu()
    return out


@dataclass
class PoolEmbeddings:
    """Embeddings of each pair's stored chosen (P, H) and rejected (P, H) response."""

    chosen: torch.Tensor
    rejected: torch.Tensor


def pool_fingerprint(pool: PairPool, settings: str) -> str:
    """Changes whenever the pairs' texts or the embedding settings change (a stale cache is never reused);
    the pool's name does not enter, so a renamed view of the same pairs shares the cache."""
    texts = "\x1f".join(f"{p.prompt_text()}\x1e{p.chosen}\x1e{p.rejected}" for p in pool.pairs)
    return stable_hash(f"{settings}::{len(pool)}::{texts}")


def embed_pool(
    model: BetaRewardModel,
    encoder: PairEncoder,
    pool: PairPool,
    batch_size: int = 64,
    bf16: bool = False,
    progress: bool = False,
    cache_dir: str | Path | None = None,
    settings: str = "",
) -> PoolEmbeddings:
    """Embeds every pair of `pool` once; with cache_dir, reads/writes `<fingerprint>.pt` there (atomic)."""
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"{pool_fingerprint(pool, settings)[:20]}.pt"
        if path.exists():
            state = torch.load(path, map_location="cpu")
            return PoolEmbeddings(state["chosen"], state["rejected"])
    items: list[tuple[str, str]] = []
    for p in pool.pairs:
        prompt = p.prompt_text()
        items += [(prompt, p.chosen), (prompt, p.rejected)]
    emb = embed_texts(model, encoder, items, batch_size, bf16, progress, description=f"embed {pool.name}")
    out = PoolEmbeddings(emb[0::2].contiguous(), emb[1::2].contiguous())
    if path is not None:
        save_checkpoint(path, {"chosen": out.chosen, "rejected": out.rejected})
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


def set_scores(model: BetaRewardModel, tensors: dict[str, torch.Tensor]) -> BetaScores:
    """Scores of a set-mode batch built by set_episode_tensors (moved to the model's device)."""
    device = next(model.parameters()).device
    tensors = {k: v.to(device) for k, v in tensors.items()}
    context, n = model.context(tensors["demo_preferred"], tensors["demo_other"], tensors["demo_mask"])
    return model.score_embeddings(tensors["first"], tensors["second"], context, n)


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
    encoder: PairEncoder,
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
            demos.append((dp.prompt_text(), w, lo))
        prompt = concat_prompt(demos, pair.prompt_text())
        a, b = (pair.chosen, pair.rejected) if e.first_is_chosen else (pair.rejected, pair.chosen)
        firsts.append(encoder.encode(prompt, a))
        seconds.append(encoder.encode(prompt, b))
    batch = pad_texts(firsts + seconds, int(encoder.tokenizer.pad_token_id))
    labels = torch.tensor([e.label for e in episodes], dtype=torch.float32)
    return batch, labels


def concat_scores(model: BetaRewardModel, batch: dict[str, torch.Tensor]) -> BetaScores:
    """Scores of a concat-mode batch built by concat_episode_batch (moved to the model's device)."""
    device = next(model.parameters()).device
    u, s = model.concat_heads({k: v.to(device) for k, v in batch.items()})
    half = u.shape[0] // 2
    return BetaScores(u[:half], u[half:], s[:half], s[half:])


def to_numpy(scores: BetaScores) -> dict[str, np.ndarray]:
    """u_first, u_second, s_first, s_second, mu, tau as float64 arrays (B,)."""
    fields = {
        "u_first": scores.u_first,
        "u_second": scores.u_second,
        "s_first": scores.s_first,
        "s_second": scores.s_second,
        "mu": scores.mu,
        "tau": scores.tau,
    }
    return {k: v.detach().double().cpu().numpy() for k, v in fields.items()}
