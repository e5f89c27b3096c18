"""The sampler of rollouts/policy.py: the nucleus read from a growing top-k equals the nucleus of a full sort; each
row's draws follow its distribution (the nucleus renormalised at top_p < 1); the prompt's cache, read for one row,
continues the prompt as reading it whole does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rewardsmith.rollouts.policy import SeededSampling, _cache_keyword, _prompt_cache, nucleus


def _sorted_nucleus(probs: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The nucleus by a sort of the whole vocabulary (sampler 1's way), for comparison."""
    ordered, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(ordered, dim=-1) - ordered
    return torch.where(before >= top_p, torch.zeros_like(ordered), ordered), order


@pytest.mark.parametrize("top_p", [0.1, 0.5, 0.9, 0.99, 0.999999])
@pytest.mark.parametrize("spread", [0.3, 3.0, 10.0])
def test_the_nucleus_of_a_growing_top_k_is_the_nucleus_of_a_full_sort(top_p: float, spread: float) -> None:
    """Flat rows (spread 0.3: the nucleus holds thousands of tokens, so the top-k grows) and peaked ones. Tokens of
    exactly equal probability may come in either order (both sorts are unstable): the same tokens, each at a place
    of its own probability."""
    probs = torch.softmax(torch.randn(6, 5000, generator=torch.Generator().manual_seed(1)) * spread, dim=-1)
    kept, order = nucleus(probs, top_p)
    ref_kept, ref_order = _sorted_nucleus(probs, top_p)
    for row in range(probs.shape[0]):
        size = int((ref_kept[row] > 0).sum())
        assert int((kept[row] > 0).sum()) == size
        assert set(order[row, :size].tolist()) == set(ref_order[row, :size].tolist())
        assert torch.equal(probs[row, order[row, :size]], probs[row, ref_order[row, :size]])
        assert torch.equal(kept[row, :size], ref_kept[row, :size])
        assert float(ref_kept[row, :size].sum()) >= min(top_p, float(probs[row].sum())) - 1e-6


@pytest.mark.parametrize("top_p", [1.0, 0.7])
def test_each_row_draws_from_its_distribution(top_p: float) -> None:
    """2,000 rows with one set of logits: the tokens' frequencies match the probabilities (the nucleus's,
    renormalised, at top_p < 1) within 4 standard errors, and no token outside the nucleus is drawn."""
    logits = torch.tensor([0.5, -3.0, 2.0, -20.0, 1.0, 0.0, 1.5, -1.0])  # not in order of probability
    rows = 2000
    generators = [torch.Generator().manual_seed(k) for k in range(rows)]
    out = SeededSampling(generators, temperature=1.0, top_p=top_p)(None, logits.repeat(rows, 1))  # type: ignore[arg-type]
    assert bool(((out == 0).sum(dim=1) == 1).all()) and bool(torch.isinf(out).sum(dim=1).eq(7).all())
    counts = np.bincount(out.argmax(dim=1).numpy(), minlength=8) / rows
    p = torch.softmax(logits, dim=0).numpy().astype(float)
    if top_p < 1:
        ordered = np.sort(p)[::-1]
        size = int(np.searchsorted(np.cumsum(ordered) - ordered, top_p, side="left"))
        p = np.where(np.argsort(np.argsort(-p)) < size, p, 0.0)
        p /= p.sum()
        assert size < 8 and counts[p == 0].sum() == 0
    assert np.all(np.abs(counts - p) <= 4 * np.sqrt(p * (1 - p) / rows) + 1e-12), (counts, p)


def test_a_row_draws_the_same_token_whatever_shares_its_batch() -> None:
    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(2))
    seeds = [11, 12, 13, 14, 15]
    together = SeededSampling([torch.Generator().manual_seed(s) for s in seeds], 0.8, 0.9)(None, logits)  # type: ignore[arg-type]
    for row, seed in enumerate(seeds):
        alone = SeededSampling([torch.Generator().manual_seed(seed)], 0.8, 0.9)(None, logits[row : row + 1])  # type: ignore[arg-type]
        assert int(alone.argmax()) == int(together[row].argmax())


def test_the_prompt_cache_continues_the_prompt_as_reading_it_whole(chat_tokenizer_dir) -> None:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from conftest import TINY_DECODER

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), **TINY_DECODER)).eval()
    ids = tok("a question about rivers and the sea")["input_ids"]
    cache = _prompt_cache(model, ids, torch.device("cpu"))
    assert cache is not None and cache.get_seq_length() == len(ids) - 1
    cache.batch_repeat_interleave(3)
    with torch.no_grad():
        whole = model(input_ids=torch.tensor([ids] * 3)).logits[:, -1]
        continued = model(input_ids=torch.tensor([ids[-1:]] * 3), **{_cache_keyword(model): cache}).logits[:, -1]
    torch.testing.assert_close(continued, whole, rtol=1e-5, atol=1e-5)
    assert _prompt_cache(model, ids[:1], torch.device("cpu")) is None  # one token: nothing to share
