"""The gold tracker: its proxy scorer gives an empty sample (a collapsed policy's answer) no reward and never sends
it, so the run that shows the collapse does not end on the server's 422; its KL estimate is the sum of log-ratios
computed by hand, token by token, for two tiny models with known, different weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rewardsmith.data.schema import Turn
from rewardsmith.rl.tracker import _row_means, served_proxy


class _Client:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def rewards(self, prompts: list[Any], responses: list[str], rater: Any = None, standard: Any = None) -> list[float]:
        assert all(r.strip() for r in responses), "an empty response reached the server"
        self.sent += responses
        return [float(len(r)) for r in responses]


def test_empty_samples_get_nan_and_are_not_sent() -> None:
    client = _Client()
    turns = (Turn("user", "hi"),)
    scores = served_proxy(client)([(turns, "abc"), (turns, "  "), (turns, "hello")])
    assert client.sent == ["abc", "hello"]
    np.testing.assert_array_equal(scores, [3.0, np.nan, 5.0])
    # A prompt's mean leaves its empty samples out; a prompt with none scored has no mean.
    np.testing.assert_array_equal(_row_means(np.array([[3.0, np.nan], [np.nan, np.nan]])), [3.0, np.nan])


def _tiny_decoder(tokenizer: Any, seed: int) -> Any:
    """A tiny random Llama whose output layer is scaled up, so its next-token distributions are peaked and two seeds
    disagree by nats, not by the thousandths a fresh random model's near-uniform logits give."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from conftest import TINY_DECODER

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        **TINY_DECODER,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(200.0)
    return model


def _log_prob_by_hand(model: Any, context: list[int], token: int) -> float:
    """log p(token | context): one forward pass on the context alone, the last position's logits, logsumexp."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([context])).logits[0, -1].double()
    return float(logits[token] - torch.logsumexp(logits, dim=0))


def test_the_tracker_kl_is_the_sum_of_log_ratios_computed_token_by_token(
    tmp_path: Any, chat_tokenizer_dir: Any
) -> None:
    """KL(policy || reference) of a point: per prompt, the mean over its samples (drawn from the policy) of the sum
    over the completion's tokens of log pi - log pi_ref, each token scored from its own prefix. A sign error, a
    logit read one position off, or a sum over the prompt's tokens would each miss the hand computation."""
    from transformers import AutoTokenizer

    from rewardsmith.rl.tracker import GoldTracker, TrackerSettings
    from rewardsmith.rollouts.policy import Policy, sample_prompt
    from rewardsmith.rollouts.prompt import BonPrompt, prompt_id

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    policy, reference = _tiny_decoder(tok, 0), _tiny_decoder(tok, 1)
    prompts = [BonPrompt(prompt_id((Turn("user", t),)), (Turn("user", t),)) for t in ("Name a river.", "Say hi.")]
    settings = TrackerSettings(samples=3, max_new_tokens=4, seed=5, n_boot=20)
    tracker = GoldTracker(
        tmp_path, prompts, Policy(policy, tok, "tiny", True), golds=[], score_with_model=None,  # type: ignore[arg-type]
        proxy=lambda items: np.zeros(len(items)), settings=settings, reference=reference,
    )  # fmt: skip
    point = tracker.point(policy, step=2)
    by_hand = []
    for prompt in prompts:
        chat = Policy(policy, tok, "tiny", True)
        context = chat.prompt_ids(prompt)
        # The tracker's samples again: seeded per (seed + step, prompt, index), drawn at temperature 1, no top-p.
        done = sample_prompt(
            chat, prompt, settings.samples, seed=settings.seed + 2, temperature=1.0, top_p=1.0,
            max_new_tokens=settings.max_new_tokens, batch_size=settings.samples,
        )  # fmt: skip
        sums = []
        for completion in done:
            ids = list(completion.ids)
            assert ids, "an empty completion tests nothing"
            sums.append(
                sum(
                    _log_prob_by_hand(policy, context + ids[:k], ids[k])
                    - _log_prob_by_hand(reference, context + ids[:k], ids[k])
                    for k in range(len(ids))
                )
            )
        by_hand.append(float(np.mean(sums)))
    assert max(abs(x) for x in by_hand) > 1.0  # the two models differ by nats: an error could not hide in rounding
    np.testing.assert_allclose(point["per_prompt"]["kl"], by_hand, rtol=1e-4, atol=1e-4)
    assert point["kl"]["estimate"] == pytest.approx(float(np.mean(by_hand)), rel=1e-4, abs=1e-4)
