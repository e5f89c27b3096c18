"""The reward server's batching, without HTTP: token-capped inference batches, scores unchanged by how texts
are batched, and the Batcher's rounds (merging, token budget, waiting, isolation of a failing request,
cancellation, back-pressure, draining on close) on a stand-in engine."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest
import torch

from rewardsmith.config import ModelConfig
from rewardsmith.data.collate import PairEncoder, sorted_batches
from rewardsmith.evaluate.scoring import score_encoded
from rewardsmith.models import build_reward_model
from rewardsmith.serve.config import ServeConfig
from rewardsmith.serve.engine import Batcher, Job, QueueFull, ScoringFailed, ServerClosing, TextScores
from rewardsmith.serve.metrics import ServeMetrics

torch.set_num_threads(1)


def test_sorted_batches_cap_padded_tokens() -> None:
    lengths = [10, 3, 7, 5, 2]
    # Longest first; a batch's padded size is rows x its first (longest) text.
    assert list(sorted_batches(lengths, 100, max_tokens=12)) == [[0], [2], [3, 1], [4]]
    assert list(sorted_batches(lengths, 2)) == [[0, 2], [3, 1], [4]]
    assert list(sorted_batches(lengths, 100, max_tokens=1)) == [[0], [2], [3], [1], [4]]
    for batch in sorted_batches(lengths, 100, max_tokens=15):
        assert len(batch) * max(lengths[i] for i in batch) <= 15
    # At most 20% padding: 10 + 7 pads 3 of 20 (+ 5 would pad 8 of 30); 5 + 3 pads 2 of 10 (+ 2: 5 of 15).
    assert list(sorted_batches(lengths, 100, max_padding=0.2)) == [[0, 2], [3, 1], [4]]
    assert list(sorted_batches(lengths, 100, max_padding=1.0)) == [[0, 2, 3, 1, 4]]


def test_scores_do_not_depend_on_how_texts_are_batched() -> None:
    model, tok = build_reward_model(ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8))
    encoder = PairEncoder(tok, 48, 8)
    texts = [encoder.encode(f"\n\nHuman: question {i}?\n\nAssistant:", "word " * (1 + 7 * i % 30)) for i in range(24)]
    alone = score_encoded(model, texts, tok.pad_token_id, batch_size=1)
    for max_tokens, max_padding in ((None, None), (1, None), (64, None), (500, 0.1), (None, 0.5)):
        batched = score_encoded(model, texts, tok.pad_token_id, batch_size=64, max_tokens=max_tokens,
                                max_padding=max_padding)
        np.testing.assert_allclose(batched, alone, atol=1e-5, rtol=0)


class FakeEngine:
    """Tokens = characters of the response; score = length of the response; "boom" breaks any round."""

    in_context = False

    def __init__(self, delay: float = 0.0):
        self.rounds: list[list[list[str]]] = []
        self.delay = delay

    def encode(self, job: Job) -> int:
        job.tokens = sum(len(response) for _, response in job.texts)
        return job.tokens

    def score_round(self, jobs: list[Job]) -> list[TextScores]:
        time.sleep(self.delay)
        self.rounds.append([[r for _, r in job.texts] for job in jobs])
        if any(r == "boom" for job in jobs for _, r in job.texts):
            raise ValueError("boom")
        return [TextScores(np.array([float(len(r)) for _, r in job.texts]), None, job.tokens) for job in jobs]


def _batcher(engine: FakeEngine, max_batch_tokens: int = 1000, max_wait_s: float = 0.2,
             max_queue: int = 1000) -> Batcher:
    batcher = Batcher(engine, ServeMetrics(), max_batch_tokens, max_wait_s, max_queue)  # type: ignore[arg-type]
    batcher.start()
    return batcher


def _texts(*responses: str) -> list[tuple[str, str]]:
    return [("", r) for r in responses]


def test_concurrent_requests_merge_into_one_round_and_keep_their_order() -> None:
    engine = FakeEngine()
    batcher = _batcher(engine)
    futures = [batcher.submit(_texts("a" * (i + 1), "b")) for i in range(5)]
    results = [f.result(5) for f in futures]
    batcher.close(5)
    assert len(engine.rounds) == 1 and len(engine.rounds[0]) == 5
    for i, result in enumerate(results):
        assert result.rewards.tolist() == [i + 1.0, 1.0]


def test_token_budget_closes_a_round_and_the_next_job_opens_the_next() -> None:
    engine = FakeEngine()
    batcher = _batcher(engine, max_batch_tokens=10, max_wait_s=0.2)
    futures = [batcher.submit(_texts("x" * 4)) for _ in range(5)]
    for f in futures:
        f.result(5)
    batcher.close(5)
    assert [len(r) for r in engine.rounds] == [2, 2, 1]  # 4 + 4 <= 10, a third would make 12


def test_budget_of_one_scores_every_request_alone() -> None:
    engine = FakeEngine()
    batcher = _batcher(engine, max_batch_tokens=1, max_wait_s=0.2)
    for f in [batcher.submit(_texts("abc")) for _ in range(4)]:
        f.result(5)
    batcher.close(5)
    assert [len(r) for r in engine.rounds] == [1, 1, 1, 1]


def test_a_lone_request_waits_at_most_max_wait() -> None:
    batcher = _batcher(FakeEngine(), max_wait_s=0.05)
    t0 = time.perf_counter()
    batcher.submit(_texts("a")).result(5)
    assert time.perf_counter() - t0 < 1.0
    batcher.close(5)


def test_a_request_that_breaks_the_model_fails_alone() -> None:
    engine = FakeEngine()
    batcher = _batcher(engine)
    good = [batcher.submit(_texts("fine", "ok")) for _ in range(3)]
    bad = batcher.submit(_texts("boom"))
    more = batcher.submit(_texts("also fine"))
    for f in [*good, more]:
        assert f.result(5).rewards.size > 0
    with pytest.raises(ScoringFailed, match="ValueError: boom"):
        bad.result(5)
    batcher.close(5)


def test_cancelled_jobs_are_skipped_and_queue_space_returns() -> None:
    engine = FakeEngine(delay=0.2)
    batcher = _batcher(engine, max_wait_s=0.0, max_queue=3)
    first = batcher.submit(_texts("a"))
    time.sleep(0.05)  # the worker is busy with `first`
    waiting = batcher.submit(_texts("b", "c"))
    with pytest.raises(QueueFull):
        batcher.submit(_texts("d"))
    assert waiting.cancel()
    assert batcher.waiting == 1
    first.result(5)
    batcher.close(5)
    assert engine.rounds == [[["a"]]]
    assert batcher.waiting == 0


def test_close_scores_what_is_queued_then_refuses_new_work() -> None:
    engine = FakeEngine(delay=0.05)
    batcher = _batcher(engine, max_batch_tokens=1, max_wait_s=0.0)
    futures: list[Future[TextScores]] = [batcher.submit(_texts("x")) for _ in range(6)]
    closer = threading.Thread(target=batcher.close, args=(10,))
    closer.start()
    closer.join(10)
    assert all(f.done() and f.exception() is None for f in futures)
    with pytest.raises(ServerClosing):
        batcher.submit(_texts("late"))


def test_a_full_request_must_fit_the_queue() -> None:
    from rewardsmith.errors import ConfigError

    with pytest.raises(ConfigError, match="max_queue"):
        ServeConfig(max_items=100, max_queue=150).validate()
    with pytest.raises(ConfigError, match="precision"):
        ServeConfig(precision="fp16").validate()
