"""The one batched inference loop and the scalar scorer on it: texts sorted by length, padded per batch, run under
inference mode (bf16 autocast on request, heads in fp32), results returned in input order. Reward scoring
(RewardScorer: score, eval, serve, demo, the W2S teacher and students, the ICRM protocols' BT baseline), ICRM
embeddings and the server all go through `batched_forward`.

Data-parallel under a launcher (`accelerate launch --num_processes N ...`): every process holds the same texts
and the same single-process batch plan; process p runs batches p, p + N, p + 2N, ... of it, and the rows are
gathered (torch.distributed all_gather) and put back in input order, so every process returns every score. A
batch is the batch one process would have run (same texts, same padding), so the scores are the very floats
one process computes, given the same kernels (the same device kind and threads per process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import EncodedText, Encoder, pad_texts, sorted_batches
from rewardsmith.data.schema import PreferencePair
from rewardsmith.io.processes import Processes, gather_rows, processes, same_on_every_process
from rewardsmith.io.progress import Progress
from rewardsmith.models.precision import use_bf16
from rewardsmith.models.reward_model import PooledBackbone
from rewardsmith.stats import require_finite


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def default_device() -> torch.device:
    """The device this process computes on: under a launcher, the one accelerate gives it (GPU LOCAL_RANK, or
    the CPU); else the first CUDA device when there is one, else the CPU."""
    procs = processes()
    if procs.several:
        return torch.device(procs.device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@torch.inference_mode()
def batched_forward(
    forward: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    texts: Sequence[EncodedText],
    pad_id: int,
    device: torch.device,
    batch_size: int = 64,
    bf16: bool = False,
    padding_side: str = "right",
    progress: str | None = None,
    max_tokens: int | None = None,
    max_padding: float | None = None,
) -> torch.Tensor:
    """forward(pad_texts batch on `device`) -> (B, ...) for every text, batched by descending length.

    Returns (N, ...) float32 on the CPU in input order. progress: a description to show progress under
    (None: silent; the main process's share under a launcher). max_tokens, max_padding: also cap each batch's
    padded tokens (rows x longest text) and the share of them that is padding (sorted_batches).

    Under a launcher every process must call this with the same texts (the module docstring): each runs its
    share of the batches and all return all rows. RuntimeError when the processes hold different texts."""
    if not texts:
        return torch.zeros(0)
    lengths = [len(t.input_ids) for t in texts]
    batches = list(sorted_batches(lengths, batch_size, max_tokens, max_padding))
    procs = processes()
    if procs.several and not same_on_every_process(_plan_fingerprint(lengths, batch_size), procs):
        raise RuntimeError(
            "data-parallel scoring: the processes of this launch hold different texts; every "
            "process must score the same texts (each runs its share of them)"
        )
    mine = batches[procs.index :: procs.count]
    values = [
        out.float().cpu()
        for _, _, out in forward_batches(
            forward,
            texts,
            mine,
            pad_id,
            device,
            bf16,
            padding_side,
            progress if procs.main and len(batches) > 1 else None,
        )
    ]
    return _in_input_order(batches, values, len(texts), procs)


def forward_batches(
    forward: Callable[[dict[str, torch.Tensor]], Any],
    texts: Sequence[EncodedText],
    batches: Sequence[Sequence[int]],
    pad_id: int,
    device: torch.device,
    bf16: bool = False,
    padding_side: str = "right",
    progress: str | None = None,
) -> Iterator[tuple[Sequence[int], dict[str, torch.Tensor], Any]]:
    """The loop itself: for each batch of text indices, the padded batch on `device` and forward(batch) under
    bf16 autocast on request, with a progress bar under `progress` (None: silent). Yields (indices, batch,
    output). batched_forward collects fixed-shape rows from it; a caller whose outputs are ragged (the W2S
    reference cache: each text's response-token states) writes each batch's rows where it keeps them."""
    autocast: Any = torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16(bf16, device) else nullcontext()
    done = 0
    with (
        Progress(progress or "", sum(len(b) for b in batches), enabled=progress is not None, unit="texts") as bar,
        autocast,
    ):
        for idx in batches:
            batch = {k: v.to(device) for k, v in pad_texts([texts[i] for i in idx], pad_id, padding_side).items()}
            yield idx, batch, forward(batch)
            done += len(idx)
            bar.update(done)


def _plan_fingerprint(lengths: Sequence[int], batch_size: int) -> list[int]:
    """Small integers that differ when two processes would make different batch plans (their texts' lengths)."""
    weighted = 0
    for i, n in enumerate(lengths):
        weighted = (weighted * 1_000_003 + n + i) % 2_147_483_647
    return [len(lengths), sum(lengths), weighted, batch_size]


def _in_input_order(batches: list[list[int]], values: list[torch.Tensor], n: int, procs: Processes) -> torch.Tensor:
    """(n, ...) rows in input order from this process's batch values (batches p, p + N, ... of the plan) and,
    under a launcher, every other process's (gathered)."""
    local = torch.cat(values) if values else torch.zeros(0)
    shares = gather_rows(local, procs)
    trailing = next((s.shape[1:] for s in shares if s.shape[0]), local.shape[1:])
    out = torch.zeros((n, *trailing), dtype=torch.float32)
    for p, rows in enumerate(shares):
        order = [i for idx in batches[p :: procs.count] for i in idx]
        if order:
            out[torch.as_tensor(order)] = rows.reshape(len(order), *trailing)
    return out


def score_encoded(
    model: torch.nn.Module,
    texts: Sequence[EncodedText],
    pad_id: int,
    batch_size: int = 64,
    bf16: bool = False,
    padding_side: str = "right",
    progress: str | None = None,
    max_tokens: int | None = None,
    max_padding: float | None = None,
) -> np.ndarray:
    """Rewards (N,) float64 of encoded texts, in input order: `model(batch).rewards` of every batch_forward batch
    (any kind of loaded model; max_tokens, max_padding: as in batched_forward)."""
    model.eval()
    rewards = batched_forward(
        lambda b: model(b).rewards,
        texts,
        pad_id,
        model_device(model),
        batch_size,
        bf16,
        padding_side,
        progress,
        max_tokens,
        max_padding,
    )
    return require_finite(rewards.double().numpy())


def embed_encoded(
    model: PooledBackbone,
    texts: Sequence[EncodedText],
    pad_id: int,
    batch_size: int = 64,
    bf16: bool = False,
    progress: str | None = None,
) -> torch.Tensor:
    """Pooled representations (N, H) float32 of encoded texts, in input order."""
    model.eval()
    out = batched_forward(model.embed, texts, pad_id, model_device(model), batch_size, bf16, "right", progress)
    return out if len(texts) else torch.zeros(0, model.hidden_size)


def encode_pair_texts(encoder: Encoder, pairs: Sequence[PreferencePair]) -> list[EncodedText]:
    """[chosen_0, rejected_0, chosen_1, ...]: both sides of every pair, encoded."""
    texts: list[EncodedText] = []
    for p in pairs:
        texts.append(encoder.encode(p.prompt, p.chosen))
        texts.append(encoder.encode(p.prompt, p.rejected))
    return texts


class RewardScorer:
    """The one way a scalar reward model (any kind: models.loading) scores text: conversations are encoded in
    the model's template, batched by length, run under inference mode (bf16 autocast on request), and returned
    in input order as float64. counts: the encoder's truncation counts so far.

    max_tokens, max_padding: cap each forward pass's padded tokens and its share of padding (the server's
    rounds); padding_side only matters to tests (scores do not depend on it)."""

    def __init__(
        self,
        model: torch.nn.Module,
        encoder: Encoder,
        pad_id: int,
        batch_size: int = 64,
        bf16: bool = False,
        padding_side: str = "right",
        max_tokens: int | None = None,
        max_padding: float | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model.eval()
        self.encoder = encoder
        self.pad_id = int(pad_id)
        self.batch_size = batch_size
        self.bf16 = bf16
        self.padding_side = padding_side
        self.max_tokens = max_tokens
        self.max_padding = max_padding

    @classmethod
    def for_model(
        cls, model: torch.nn.Module, tokenizer: Any, model_cfg: Any, batch_size: int = 64, bf16: bool = False
    ) -> RewardScorer:
        """The scorer of a rewardsmith model held in memory, in its ModelConfig's template and budget."""
        from rewardsmith.data.templates import encoder_for

        return cls(model, encoder_for(tokenizer, model_cfg), int(tokenizer.pad_token_id), batch_size, bf16)

    @property
    def counts(self) -> dict[str, int]:
        return self.encoder.counts

    def score_encoded(self, texts: Sequence[EncodedText], progress: str | None = None) -> np.ndarray:
        """Rewards (N,) float64 of encoded texts, in input order."""
        return score_encoded(
            self.model,
            texts,
            self.pad_id,
            self.batch_size,
            self.bf16,
            self.padding_side,
            progress,
            self.max_tokens,
            self.max_padding,
        )

    def score_texts(self, items: Sequence[tuple[Any, str]], progress: str | None = None) -> np.ndarray:
        """Rewards (M,) of (prompt, response) items; a prompt is turns or a prompt string."""
        return self.score_encoded([self.encoder.encode(prompt, response) for prompt, response in items], progress)

    def score_pairs(
        self, pairs: Sequence[PreferencePair], progress: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rewards of the chosen (N,) and rejected (N,) responses of each pair."""
        scores = self.score_encoded(encode_pair_texts(self.encoder, pairs), progress)
        return scores[0::2], scores[1::2]


def score_pairs(
    model: torch.nn.Module,
    tokenizer: Any,
    pairs: Sequence[PreferencePair],
    max_length: int = 256,
    min_prompt_tokens: int = 64,
    batch_size: int = 64,
    bf16: bool = False,
    padding_side: str = "right",
    template: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """RewardScorer(...).score_pairs(pairs) for a model held in memory under a tokenizer, template and budget."""
    from rewardsmith.data.templates import make_encoder

    encoder = make_encoder(tokenizer, template, max_length, min_prompt_tokens)
    return RewardScorer(model, encoder, int(tokenizer.pad_token_id), batch_size, bf16, padding_side).score_pairs(pairs)
