"""Tokenisation with prompt-aware truncation, response masks, length-grouped batching and dynamic padding.

Each side of a pair is encoded as the tokenizer's pair template around (prompt, response), e.g.
`[CLS] prompt [SEP] response [SEP]` for BERT-style encoders and plain concatenation for decoders.
Truncation keeps the END of the prompt (the part that matters) and cuts the response from the right only
when the response alone would leave fewer than `min_prompt_tokens` for the prompt (DATA-NOTES.md).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rewardsmith.data.schema import PreferencePair, Turn, render_turns


@dataclass(frozen=True)
class PairTemplate:
    """Special tokens around (prompt, response), read off the tokenizer once by probing."""

    prefix: list[int]
    middle: list[int]
    suffix: list[int]
    prefix_type: int = 0
    response_type: int = 0
    uses_token_types: bool = False

    @property
    def n_special(self) -> int:
        return len(self.prefix) + len(self.middle) + len(self.suffix)


def probe_pair_template(tokenizer: Any) -> PairTemplate:
    """Finds the special tokens the tokenizer puts around a text pair (transformers 5 has no
    build_inputs_with_special_tokens on every tokenizer, so the template is read from an example)."""
    a = tokenizer("hello", add_special_tokens=False)["input_ids"]
    b = tokenizer("world", add_special_tokens=False)["input_ids"]
    enc = tokenizer("hello", "world", add_special_tokens=True)
    full: list[int] = list(enc["input_ids"])
    i = _find(full, a, 0)
    j = _find(full, b, i + len(a))
    if i < 0 or j < 0:  # tokenizer merges across the boundary: fall back to plain concatenation
        return PairTemplate([], [], [])
    types = enc.get("token_type_ids")
    uses_types = types is not None and len(set(types)) > 1
    return PairTemplate(
        prefix=full[:i],
        middle=full[i + len(a) : j],
        suffix=full[j + len(b) :],
        prefix_type=int(types[0]) if uses_types else 0,
        response_type=int(types[j]) if uses_types else 0,
        uses_token_types=bool(uses_types),
    )


def _find(seq: list[int], sub: list[int], start: int) -> int:
    for k in range(start, len(seq) - len(sub) + 1):
        if seq[k : k + len(sub)] == sub:
            return k
    return -1


@dataclass(frozen=True)
class EncodedText:
    """One encoded (prompt, response) sequence: token ids, token types and which tokens are response.

    unsplit: the text arrived as one string that could not be read back into turns, so it was tokenised whole
    (prompt_truncated then means its start was cut)."""

    input_ids: list[int]
    token_type_ids: list[int]
    response_mask: list[int]
    prompt_truncated: bool
    response_truncated: bool
    unsplit: bool = False


class PairEncoder:
    """Encodes (prompt, response) texts under a token budget, caching tokenisation of repeated prompts.

    counts: how many texts were encoded and how many had their prompt or response cut (for run summaries).
    """

    def __init__(self, tokenizer: Any, max_length: int = 256, min_prompt_tokens: int = 64, response_prefix: str = " "):
        if max_length <= 8:
            raise ValueError(f"max_length must be > 8, got {max_length}")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.min_prompt_tokens = min_prompt_tokens
        self.template = probe_pair_template(tokenizer)
        # Decoders see prompt and response as one text; a leading space keeps the first response word
        # tokenised as it would be mid-sentence.
        self.response_prefix = response_prefix if not self.template.middle else ""
        self._prompt_cache: dict[str, list[int]] = {}
        self.counts = {"texts": 0, "prompt_truncated": 0, "response_truncated": 0}

    def _tokens(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode(self, prompt: str | Sequence[Turn], response: str) -> EncodedText:
        """prompt: the prompt text in HH framing (or a context built around it), or turns (rendered so)."""
        if not isinstance(prompt, str):
            prompt = render_turns(tuple(prompt))
        t = self.template
        prompt_ids = self._prompt_cache.get(prompt)
        if prompt_ids is None:
            prompt_ids = self._tokens(prompt)
            if len(self._prompt_cache) < 100_000:
                self._prompt_cache[prompt] = prompt_ids
        response_ids = self._tokens(self.response_prefix + response)
        budget = self.max_length - t.n_special
        response_cut = False
        # The prompt keeps at least min_prompt_tokens, or half the budget when the budget is smaller than that.
        keep_prompt = min(len(prompt_ids), self.min_prompt_tokens if self.min_prompt_tokens < budget else budget // 2)
        if len(response_ids) > budget - keep_prompt:
            response_ids = response_ids[: budget - keep_prompt]
            response_cut = True
        room = budget - len(response_ids)
        prompt_cut = len(prompt_ids) > room
        if prompt_cut:
            prompt_ids = prompt_ids[len(prompt_ids) - room :] if room > 0 else []
        ids = t.prefix + prompt_ids + t.middle + response_ids + t.suffix
        n_first = len(t.prefix) + len(prompt_ids) + len(t.middle)
        types = [t.prefix_type] * n_first + [t.response_type] * (len(ids) - n_first)
        mask = [0] * n_first + [1] * len(response_ids) + [0] * len(t.suffix)
        if not response_ids:  # an empty response still needs one position to pool from
            mask[min(n_first, len(ids) - 1)] = 1
        self.counts["texts"] += 1
        self.counts["prompt_truncated"] += int(prompt_cut)
        self.counts["response_truncated"] += int(response_cut)
        return EncodedText(ids, types, mask, prompt_cut, response_cut)


@dataclass(frozen=True)
class EncodedPair:
    """index: position in the pair list; swapped: sides exchanged for this presentation (label = 1 - q)."""

    chosen: EncodedText
    rejected: EncodedText
    label: float
    index: int
    swapped: bool = False

    @property
    def length(self) -> int:
        return max(len(self.chosen.input_ids), len(self.rejected.input_ids))


class Encoder(Protocol):
    """What encodes a (prompt, response): rewardsmith.data.templates' encoders (the prompt as turns, or a
    prompt string), and PairEncoder (a prompt string in HH framing)."""

    counts: dict[str, int]

    def encode(self, prompt: Any, response: str) -> EncodedText: ...


def encode_pairs(encoder: Encoder, pairs: Sequence[PreferencePair]) -> list[EncodedPair]:
    """Tokenises every pair once (the trainer and evaluators reuse the result across epochs)."""
    return [
        EncodedPair(encoder.encode(p.prompt, p.chosen), encoder.encode(p.prompt, p.rejected), float(p.label), i)
        for i, p in enumerate(pairs)
    ]


def pad_texts(texts: Sequence[EncodedText], pad_id: int, padding_side: str = "right") -> dict[str, torch.Tensor]:
    """Stacks encoded texts into padded tensors.

    Returns input_ids, attention_mask, token_type_ids, response_mask and position_ids, each (B, T) with
    T = the longest text. position_ids count only real tokens, so scores do not depend on padding side.
    """
    width = max(len(t.input_ids) for t in texts)
    n = len(texts)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    types = torch.zeros((n, width), dtype=torch.long)
    response = torch.zeros((n, width), dtype=torch.bool)
    for row, t in enumerate(texts):
        k = len(t.input_ids)
        sl = slice(0, k) if padding_side == "right" else slice(width - k, width)
        input_ids[row, sl] = torch.tensor(t.input_ids)
        attention[row, sl] = 1
        types[row, sl] = torch.tensor(t.token_type_ids)
        response[row, sl] = torch.tensor(t.response_mask, dtype=torch.bool)
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "token_type_ids": types,
        "response_mask": response,
        "position_ids": positions,
    }


def collate_pairs(batch: Sequence[EncodedPair], pad_id: int, padding_side: str = "right") -> dict[str, torch.Tensor]:
    """One forward batch for B pairs: rows 0..B-1 are the chosen sides, rows B..2B-1 the rejected.

    Returns the pad_texts tensors (2B, T) plus labels (B,) float32, pair_index (B,) long and swapped (B,)
    bool (True where row i holds the pair's original rejected response).
    """
    texts = [p.chosen for p in batch] + [p.rejected for p in batch]
    out = pad_texts(texts, pad_id, padding_side)
    out["labels"] = torch.tensor([p.label for p in batch], dtype=torch.float32)
    out["pair_index"] = torch.tensor([p.index for p in batch], dtype=torch.long)
    out["swapped"] = torch.tensor([p.swapped for p in batch], dtype=torch.bool)
    return out


# What one extra forward pass costs beyond its tokens, in padded-token equivalents: forward_groups trades it
# against the padding a cut saves. Chosen on MiniLM forward+backward over 320 hh-rlhf pairs on a 2-core CPU
# (one epoch, length-grouped batches): 32 and 64 cut too often (4.7 and 3.5 groups a batch, no faster than one
# pass), 128 (2.2 groups, 14% -> 7% padding) was at least as fast in fp32 and bf16.
GROUP_OVERHEAD_TOKENS = 128


def forward_groups(lengths: Sequence[int], overhead: int = GROUP_OVERHEAD_TOKENS) -> list[list[int]]:
    """The rows of one forward batch cut into groups that run as separate forward passes, each padded to its own
    longest text: of the partitions of the rows sorted by length (longest first) into runs, the one with the fewest
    padded tokens plus `overhead` per group (exact, by dynamic programming). One group when cutting saves
    nothing. Deterministic in `lengths` (ties keep row order)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    n = len(order)
    cost = [0.0] + [float("inf")] * n  # cost[j]: the best cut of the j longest rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):  # rows i..j-1 (sorted) form the last group, padded to lengths[order[i]]
            c = cost[i] + (j - i) * lengths[order[i]] + overhead
            if c < cost[j]:
                cost[j], cut[j] = c, i
    groups: list[list[int]] = []
    j = n
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]


def random_batches(count: int, batch_size: int, seed: int) -> list[list[int]]:
    """Batches of indices in a seeded random order, lengths ignored (what length grouping is measured against)."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return [order[k : k + batch_size] for k in range(0, count, batch_size)]


def length_grouped_batches(
    lengths: Sequence[int],
    batch_size: int,
    seed: int,
    mega_factor: int = 50,
) -> list[list[int]]:
    """Batches of indices with similar lengths, in a seeded random order.

    Indices are shuffled, cut into mega-chunks of `mega_factor * batch_size`, sorted by length inside each
    chunk (longest first) and cut into batches; batch order is then shuffled. Padding waste falls while
    the order stays random across chunks. Deterministic in (lengths, batch_size, seed), which exact resume
    relies on.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunk = max(batch_size, mega_factor * batch_size)
    batches: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: -lengths[i])
        batches.extend(part[k : k + batch_size] for k in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


def sorted_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int | None = None, max_padding: float | None = None
) -> Iterator[list[int]]:
    """Inference batches in descending length order (least padding); callers restore the order.

    max_tokens: also cap each batch's padded size (rows x its longest text) at this many tokens; a text longer
    than the cap gets a batch of its own. max_padding: also cap the share of a batch's padded size that is
    padding (on a CPU a padded token costs as much as a real one)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batch: list[int] = []
    real = 0
    for i in order:
        # Descending order: the batch's first text is its longest, so its padded size is rows * lengths[first].
        padded = (len(batch) + 1) * lengths[batch[0]] if batch else 0
        if batch and (
            len(batch) >= batch_size
            or (max_tokens is not None and padded > max_tokens)
            or (max_padding is not None and padded - real - lengths[i] > max_padding * padded)
        ):
            yield batch
            batch, real = [], 0
        batch.append(i)
        real += lengths[i]
    if batch:
        yield batch
