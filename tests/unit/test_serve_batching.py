"""The reward server's batching, without HTTP: token-capped inference batches, scores unchanged by how texts
are batched, the fair share of a round (plan_round, by hand), the Batcher's rounds on a stand-in engine (merging,
token budget, a wait counted per round, large requests split across rounds with small ones interleaved,
isolation of a failing request, cancellation, back-pressure, closing with and without a deadline), and the
encoder's cut of long texts before tokenising (the same ids as tokenising the whole text, a bounded number of
characters given to the tokenizer)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rewardsmith.config import ModelConfig
from rewardsmith.data.collate import EncodedText, PairEncoder, sorted_batches
from rewardsmith.data.schema import Turn
from rewardsmith.evaluate.scoring import score_encoded
from rewardsmith.inference import Encoded, TextItem, TextScores, encode_item
from rewardsmith.models import build_reward_model
from rewardsmith.serve.config import ServeConfig
from rewardsmith.serve.engine import (
    Batcher,
    Piece,
    QueueFull,
    ScoringFailed,
    ServerClosing,
    plan_round,
)
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
        batched = score_encoded(
            model, texts, tok.pad_token_id, batch_size=64, max_tokens=max_tokens, max_padding=max_padding
        )
        np.testing.assert_allclose(batched, alone, atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------------------------------
# The fair share of a round, by hand


def test_plan_round_gives_every_request_an_equal_share() -> None:
    # A large request of 100-token texts and three of one 50-token text, budget 400: the large one takes 100
    # (first in turn), each small one 50 (the least served go next), the large one 100 more (350); its third
    # text would make 450.
    assert plan_round([[100] * 10, [50], [50], [50]], 400) == [2, 1, 1, 1]
    # Two large requests alternate; the earlier one wins the tie: 10, 10, 10, 10, 10 (= 50); the next would pass.
    assert plan_round([[10] * 10, [10] * 10], 50) == [3, 2]
    # What a request does not need goes to the others: 20 + 20 + 60 of 100.
    assert plan_round([[20], [20], [30, 30, 30]], 100) == [1, 1, 2]
    # A text longer than the budget goes alone when its request is first in turn, and no other text joins it.
    assert plan_round([[300], [5]], 100) == [1, 0]
    assert plan_round([[5], [300], [5]], 100) == [1, 0, 1]
    # Budget 1: one text per round, from the first request in turn.
    assert plan_round([[3, 3], [3]], 1) == [1, 0]
    # A request whose next text does not fit takes no more, even if a later, shorter one would: 50, 40, then
    # its 50 would make 140, and its 5 stays for the next round; the third request's 35 does not fit 90 + 35.
    assert plan_round([[50, 50, 5], [40], [35]], 100) == [1, 1, 0]
    assert plan_round([], 100) == [] and plan_round([[], [4]], 10) == [0, 1]


# ----------------------------------------------------------------------------------------------------
# The Batcher on a stand-in engine: a text of n characters is n tokens; its score is its length


def _encoded(text: str) -> EncodedText:
    return EncodedText([1] * len(text), [0] * len(text), [1] * len(text), False, False)


def prepared(*texts: str) -> Encoded:
    return Encoded([_encoded(t) for t in texts])


BOOM = 13


class FakeEngine:
    """Tokens = characters; score = length; a text of BOOM characters breaks any round it is in. rounds: the
    number of texts each round took from each request, a list per round; texts: "<job id>:<start>-<end>" per
    piece. hook(k, pieces) runs at the start of round k (0-based), on the
    worker thread, before the round is scored."""

    in_context = False

    def __init__(self, delay: float = 0.0, hook: Callable[[int, list[Piece]], None] | None = None):
        self.rounds: list[list[int]] = []
        self.texts: list[list[str]] = []
        self.delay = delay
        self.hook = hook
        self.ended: list[float] = []

    def score_round(self, pieces: list[Piece]) -> list[TextScores]:
        if self.hook is not None:
            self.hook(len(self.rounds), pieces)
        time.sleep(self.delay)
        lengths = [p.job.lengths[p.start : p.end] for p in pieces]
        self.rounds.append([p.size for p in pieces])
        self.texts.append([f"{id(p.job)}:{p.start}-{p.end}" for p in pieces])
        self.ended.append(time.monotonic())
        if any(BOOM in x for x in lengths):
            raise ValueError("boom")
        return [TextScores(np.array(x, dtype=float)) for x in lengths]


class Gate:
    """Holds round `held` (0-based) of a FakeEngine until released: entered is set once that round has begun."""

    def __init__(self, held: int = 0) -> None:
        self.held = held
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, k: int, _: list[Piece]) -> None:
        if k == self.held:
            self.entered.set()
            self.release.wait(10)

    def hold(self) -> None:
        assert self.entered.wait(10), f"round {self.held} did not begin"


class FakeClock:
    """Stands in for the batcher's clock (rewardsmith.serve.engine's `time`): it moves only when the test moves
    it. The batcher's waits still last real seconds, so with a max_wait_s far beyond the test's run a round
    closes early only when its requests come, or when the test moves the clock and wakes the worker."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class CountedCondition(threading.Condition):
    """The batcher's lock and condition, counting the worker's waits (parks), so a test knows when the worker
    has looked at the queue again and gone back to waiting."""

    def __init__(self) -> None:
        super().__init__(threading.RLock())
        self.parks = 0
        self.seen = threading.Condition()

    def wait(self, timeout: float | None = None) -> bool:
        with self.seen:
            self.parks += 1
            self.seen.notify_all()
        return super().wait(timeout)

    def parked_after(self, parks: int, also: Callable[[], bool] = lambda: False) -> None:
        """Waits until the worker has parked more than `parks` times in all (or `also()` holds)."""
        with self.seen:
            assert self.seen.wait_for(lambda: self.parks > parks or also(), 10), "the worker did not wait again"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    from rewardsmith.serve import engine

    fake = FakeClock()
    monkeypatch.setattr(engine, "time", fake)
    return fake


def _batcher(
    engine: FakeEngine, max_batch_tokens: int = 1000, max_wait_s: float = 0.2, max_queue: int = 1000
) -> Batcher:
    batcher = Batcher(engine, ServeMetrics(), max_batch_tokens, max_wait_s, max_queue)  # type: ignore[arg-type]
    batcher.start()
    return batcher


def _stop(batcher: Batcher) -> None:
    batcher.close()
    assert batcher.join(10)


def test_requests_queued_during_a_round_merge_into_the_next_and_keep_their_order() -> None:
    gate = Gate()
    engine = FakeEngine(hook=gate)
    batcher = _batcher(engine, max_wait_s=0.5)
    batcher.submit(prepared("w"))
    gate.hold()
    jobs = [batcher.submit(prepared("a" * (i + 1), "b")) for i in range(5)]
    gate.release.set()
    results = [j.future.result(5) for j in jobs]
    _stop(batcher)
    assert engine.rounds == [[1], [2, 2, 2, 2, 2]]
    for i, result in enumerate(results):
        assert result.rewards.tolist() == [i + 1.0, 1.0] and result.tokens == i + 2


def test_token_budget_closes_a_round_and_the_next_one_takes_the_rest() -> None:
    gate = Gate()
    engine = FakeEngine(hook=gate)
    batcher = _batcher(engine, max_batch_tokens=10, max_wait_s=0.2)
    batcher.submit(prepared("w"))
    gate.hold()
    jobs = [batcher.submit(prepared("x" * 4)) for _ in range(5)]
    gate.release.set()
    for j in jobs:
        j.future.result(5)
    _stop(batcher)
    assert engine.rounds == [[1], [1, 1], [1, 1], [1]]  # 4 + 4 <= 10, a third would make 12


def test_budget_of_one_scores_every_text_alone() -> None:
    engine = FakeEngine()
    batcher = _batcher(engine, max_batch_tokens=1, max_wait_s=0.0)
    jobs = [batcher.submit(prepared("abc", "de")) for _ in range(3)]
    assert [j.future.result(5).rewards.tolist() for j in jobs] == [[3.0, 2.0]] * 3
    _stop(batcher)
    assert engine.rounds == [[1]] * 6


def test_a_round_waits_for_as_many_requests_as_the_last_round_answered(clock: FakeClock) -> None:
    # Round 1 answers A and B. C arrived during it and has waited past max_wait when round 2 opens; round 2
    # still waits for a second request (as the clients of A and B come back), so D joins C.
    first, second = Gate(), Gate()
    engine = FakeEngine(hook=lambda k, pieces: first(k, pieces) if k == 0 else second(k - 1, pieces))
    batcher = _batcher(engine, max_wait_s=100.0)
    batcher.submit(prepared("w"))
    first.hold()
    a, b = batcher.submit(prepared("a")), batcher.submit(prepared("b"))
    first.release.set()
    second.hold()  # round 1 (A and B) is being scored
    c = batcher.submit(prepared("cc"))
    clock.now += 200.0  # C has waited twice max_wait
    second.release.set()
    a.future.result(5)
    d = batcher.submit(prepared("ddd"))
    for j in (b, c, d):
        j.future.result(5)
    _stop(batcher)
    assert engine.rounds == [[1], [1, 1], [1, 1]]


def test_a_round_that_continues_a_large_request_waits_from_the_first_new_arrival(clock: FakeClock) -> None:
    # Round 1 answers A and B and takes a share of the large request L; round 2 opens at once (at clock 0) for the
    # rest of L, and waits up to max_wait (100) for two requests. A's client is back at 60 and B's at 130: a wait
    # counted from the opening would close at 100, before B; a wait counted from A's arrival lasts until 160.
    gate = Gate()
    opened = threading.Event()
    parks_in_round_1: list[int] = []

    def hook(k: int, pieces: list[Piece]) -> None:
        gate(k, pieces)
        if k == 1:
            parks_in_round_1.append(cond.parks)
        if k == 2:
            opened.set()

    engine = FakeEngine(hook=hook)
    batcher = Batcher(engine, ServeMetrics(), 30, 100.0, 1000)  # type: ignore[arg-type]
    cond = batcher._cond = CountedCondition()  # before the worker starts: it counts the worker's waits
    batcher.start()
    batcher.submit(prepared("w"))
    gate.hold()
    large = batcher.submit(prepared(*["L" * 10] * 10))
    a, b = batcher.submit(prepared("a" * 10)), batcher.submit(prepared("b" * 10))
    gate.release.set()
    a.future.result(10), b.future.result(10)
    cond.parked_after(parks_in_round_1[0])  # round 2 is open and waiting
    clock.now = 60.0
    parks = cond.parks
    again = [batcher.submit(prepared("c" * 10))]
    cond.parked_after(parks)  # it has seen A and waits on
    clock.now = 130.0
    parks = cond.parks
    with cond:
        cond.notify_all()
    cond.parked_after(parks, opened.is_set)  # it has looked at the clock: waiting on, or round 2 has begun
    again.append(batcher.submit(prepared("c" * 10)))
    batcher.close()
    for job in (large, *again):
        job.future.result(10)
    assert batcher.join(10)
    assert engine.rounds[1] == [1, 1, 1]  # L's share, A, B
    assert len(engine.rounds[2]) == 3, engine.rounds  # the rest of L, and both clients back


def test_a_lone_request_does_not_wait() -> None:
    batcher = _batcher(FakeEngine(), max_wait_s=600.0)
    # Answered at once (within the 10 s the result is awaited, far below max_wait): the one request the last
    # round answered is back.
    batcher.submit(prepared("a")).future.result(10)
    _stop(batcher)


def test_a_large_request_is_split_across_rounds_and_small_ones_interleave() -> None:
    gate = Gate()
    late: list[Any] = []

    def hook(k: int, pieces: list[Piece]) -> None:
        gate(k, pieces)
        if k == 2:  # a small request arriving while the large one is being scored joins the next round
            late.append(batcher.submit(prepared("s" * 10)))

    engine = FakeEngine(hook=hook)
    batcher = _batcher(engine, max_batch_tokens=50, max_wait_s=0.2)
    first = batcher.submit(prepared("w"))
    gate.hold()
    large = batcher.submit(prepared(*["L" * 10] * 20))
    small = [batcher.submit(prepared("s" * 10)) for _ in range(3)]
    gate.release.set()
    assert large.future.result(10).rewards.tolist() == [10.0] * 20
    assert [s.future.result(10).rewards.tolist() for s in small + late] == [[10.0]] * 4
    _stop(batcher)
    # Round 1: 2 of the large request's texts and the 3 small requests (50 tokens, fair share); round 2: 5 of
    # the large one; round 3: the late small request and 4 of the large one; then the rest of the large one.
    assert engine.rounds[1] == [2, 1, 1, 1] and engine.rounds[2] == [5]
    assert sorted(engine.rounds[3]) == [1, 4]
    assert sum(sum(r) for r in engine.rounds[1:]) == 24 and all(sum(r) <= 5 for r in engine.rounds[1:])
    assert first.future.done()


def test_with_room_for_one_text_a_served_request_goes_behind_those_that_arrived() -> None:
    gate = Gate()
    engine = FakeEngine(hook=gate)
    batcher = _batcher(engine, max_batch_tokens=1, max_wait_s=0.0)
    large = batcher.submit(prepared("L1", "L2", "L3"))
    gate.hold()  # L1 is being scored
    s1, s2 = batcher.submit(prepared("s")), batcher.submit(prepared("t"))
    gate.release.set()
    for j in (large, s1, s2):
        j.future.result(10)
    _stop(batcher)
    owners = [text.split(":")[0] for r in engine.texts for text in r]
    assert owners == [str(id(j)) for j in (large, s1, s2, large, large)]


def test_a_request_that_breaks_the_model_fails_alone() -> None:
    engine = FakeEngine()
    batcher = _batcher(engine)
    good = [batcher.submit(prepared("fine", "ok")) for _ in range(3)]
    bad = batcher.submit(prepared("b" * BOOM))
    more = batcher.submit(prepared("also fine"))
    for j in [*good, more]:
        assert j.future.result(5).rewards.size > 0
    with pytest.raises(ScoringFailed, match="ValueError: boom"):
        bad.future.result(5)
    _stop(batcher)


def test_cancelled_requests_are_dropped_and_queue_space_returns() -> None:
    gate = Gate()
    engine = FakeEngine(hook=gate)
    batcher = _batcher(engine, max_wait_s=0.0, max_queue=3)
    first = batcher.submit(prepared("a"))
    gate.hold()  # the worker is busy with `first`
    waiting = batcher.submit(prepared("b", "c"))
    with pytest.raises(QueueFull):
        batcher.submit(prepared("d"))
    assert batcher.cancel(waiting) and waiting.future.cancelled()
    assert batcher.waiting == 1
    gate.release.set()
    first.future.result(5)
    assert not batcher.cancel(first)  # it has its result
    _stop(batcher)
    assert engine.rounds == [[1]] and batcher.waiting == 0


def test_a_request_cancelled_while_it_is_scored_gets_no_more_rounds() -> None:
    holder: list[Any] = []
    engine = FakeEngine(hook=lambda k, _: batcher.cancel(holder[0]) if k == 1 else None)
    batcher = _batcher(engine, max_batch_tokens=4, max_wait_s=0.0)
    holder.append(batcher.submit(prepared(*["xx"] * 50)))
    wait([holder[0].future], 10)
    _stop(batcher)
    assert holder[0].future.cancelled() and len(engine.rounds) == 2  # rounds 0 and 1 (cancelled during it)


def test_close_scores_what_is_queued_then_refuses_new_work() -> None:
    engine = FakeEngine(delay=0.02)
    batcher = _batcher(engine, max_batch_tokens=1, max_wait_s=0.0)
    jobs = [batcher.submit(prepared("x")) for _ in range(6)]
    batcher.close()
    assert batcher.join(10)
    assert all(j.future.done() and j.future.exception() is None for j in jobs)
    with pytest.raises(ServerClosing):
        batcher.submit(prepared("late"))
    assert not batcher.has_room(1)


def test_close_with_a_deadline_scores_what_fits_and_fails_the_rest() -> None:
    gate = Gate(held=1)
    engine = FakeEngine(delay=0.05, hook=gate)
    batcher = _batcher(engine, max_batch_tokens=1, max_wait_s=0.0)
    batcher.submit(prepared("w")).future.result(5)  # one round: the batcher learns its pace
    jobs = [batcher.submit(prepared("x")) for _ in range(40)]  # 2 s of rounds at least
    gate.hold()  # the first of them is being scored: it began before the deadline was set
    batcher.close(stop_at=time.monotonic() + 0.4)
    gate.release.set()
    assert batcher.join(10)
    outcomes = [j.future.exception(5) for j in jobs]
    done = sum(e is None for e in outcomes)
    assert 1 <= done < 40 and all(isinstance(e, ServerClosing) for e in outcomes if e is not None)
    assert outcomes == sorted(outcomes, key=lambda e: e is not None)  # the first in line were the ones scored


def test_a_full_request_must_fit_the_queue() -> None:
    from rewardsmith.errors import ConfigError

    with pytest.raises(ConfigError, match="max_queue"):
        ServeConfig(max_items=100, max_queue=150).validate()
    with pytest.raises(ConfigError, match="precision"):
        ServeConfig(precision="fp16").validate()


# ----------------------------------------------------------------------------------------------------
# Long texts are cut before they are tokenised, to the same ids


class CountingTokenizer:
    """A tokenizer that records the longest text it was given (calls and chat templates), else the real one."""

    def __init__(self, tokenizer: Any):
        self.inner = tokenizer
        self.longest = 0

    def __call__(self, text: Any, *args: Any, **kwargs: Any) -> Any:
        self.longest = max(self.longest, len(text) + (len(args[0]) if args and isinstance(args[0], str) else 0))
        return self.inner(text, *args, **kwargs)

    def apply_chat_template(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("tokenize", True):
            self.longest = max(self.longest, sum(len(m["content"]) for m in messages))
        return self.inner.apply_chat_template(messages, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _long_items(rng_words: list[str]) -> list[TextItem]:
    """Texts with a part far longer than max_length: the prompt (a string, turns, a system message), the
    response, a whole conversation that cannot be split, and one that can."""
    big = " ".join(rng_words[i % len(rng_words)] for i in range(40_000))  # ~200k characters
    short = "how do I fix a flat tyre?"
    return [
        TextItem(big, "patch the tube"),
        TextItem(short, big),
        TextItem((Turn("user", big), Turn("assistant", "which bike?"), Turn("user", short)), "a road bike"),
        TextItem((Turn("system", big), Turn("user", short)), "patch it " * 3),
        TextItem((Turn("user", short), Turn("assistant", big), Turn("user", big)), big),
        TextItem(None, big),
        TextItem(None, f"\n\nHuman: {big}\n\nAssistant: {short}"),
    ]


WORDS = [
    "the",
    "tyre",
    "went",
    "flat",
    "on",
    "a",
    "wet",
    "road",
    "and",
    "we",
    "patched",
    "it",
    "quickly",
    "antidisestablishment",
    "9",
    "!",
    "caf\u00e9",
    "\u6f22\u5b57",
]


@pytest.mark.slow
@pytest.mark.parametrize("template", ["hh", "plain", "chat"])
def test_long_texts_are_cut_before_tokenising_to_the_same_ids(template: str, chat_tokenizer_dir: Path) -> None:
    from transformers import AutoTokenizer

    from rewardsmith.data.templates import make_encoder

    if template == "chat":
        tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    else:
        _, tok = build_reward_model(ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8))
    items = _long_items(WORDS)
    whole = make_encoder(tok, template, 64, 16)
    counting = CountingTokenizer(tok)
    cut = make_encoder(counting, template, 64, 16)
    for item in items:
        resolved = whole.encode_unsplit(item.text) if item.prompt is None else whole.encode(item.prompt, item.text)
        got = encode_item(cut, item)
        assert got.input_ids == resolved.input_ids, item.text[:40]
        assert got.response_mask == resolved.response_mask
        assert (got.prompt_truncated, got.response_truncated, got.unsplit) == (
            resolved.prompt_truncated,
            resolved.response_truncated,
            resolved.unsplit,
        )
    # Each part tokenised holds at most 8 characters per token of max_length + margin (two parts at once).
    assert counting.longest <= 3 * 8 * (64 + 16) + 1000, counting.longest


@pytest.mark.slow
def test_the_tokenizer_gives_the_same_ids_from_several_threads(chat_tokenizer_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    texts = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(50 + i % 40)) for i in range(200)]
    alone = [tok(t)["input_ids"] for t in texts]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda t: tok(t)["input_ids"], texts * 5))
    assert together == alone * 5


# ----------------------------------------------------------------------------------------------------
# Request bodies: read by rewardsmith.config.from_dict, one line naming the field


def _refusal(cls: type, data: Any) -> tuple[int, str]:
    from rewardsmith.serve.requests import RequestError, read_body

    with pytest.raises(RequestError) as refused:
        read_body(cls, data)
    return refused.value.status_code, str(refused.value.detail)


def test_request_bodies_are_read_with_exact_types_and_defaults() -> None:
    from rewardsmith.serve.requests import GetRewardRequest, ScoreRequest, TextsRequest, read_body

    body = read_body(GetRewardRequest, {"query": ["q a"], "prompts": ["q", None], "labels": [None, 3]})
    assert body == GetRewardRequest(query=["q a"], prompts=["q", None], labels=[None, 3])
    # A drop-in endpoint ignores the fields other servers define (vLLM's `model`-like extras, OpenRLHF's own).
    assert read_body(GetRewardRequest, {"query": [], "temperature": 1}) == GetRewardRequest(query=[])
    texts = read_body(TextsRequest, {"input": "hi", "activation": False, "softmax": True, "priority": 2})
    assert (texts.input, texts.messages, texts.wants_activation()) == ("hi", None, False)
    assert read_body(TextsRequest, {"input": ["a"], "softmax": True}).wants_activation() is True
    native = read_body(ScoreRequest, {"items": [{"prompt": "p", "response": "r"}], "rater": "a"})
    assert (native.items, native.rater, native.demonstrations, native.standard) == (
        [{"prompt": "p", "response": "r"}],
        "a",
        None,
        None,
    )


def test_request_bodies_are_refused_in_one_line_naming_the_field() -> None:
    from rewardsmith.serve.requests import GetRewardRequest, ScoreRequest, StandardRequest, TextsRequest

    assert _refusal(ScoreRequest, [1, 2]) == (422, "the request body must be a JSON object, got a list")
    assert _refusal(ScoreRequest, {}) == (422, "items: required field missing")
    assert _refusal(ScoreRequest, {"items": [], "colour": "red"}) == (
        422,
        "colour: unknown field (known: items, rater, demonstrations, standard)",
    )
    assert _refusal(StandardRequest, {"demonstrations": [], "name": "x"})[1].startswith("name: unknown field")
    assert _refusal(ScoreRequest, {"items": "text"}) == (422, "items: expected a list, got a string")
    assert _refusal(ScoreRequest, {"items": None}) == (422, "items: must not be null")
    assert _refusal(ScoreRequest, {"items": [], "rater": 5}) == (422, "rater: must be a string, got 5")
    assert _refusal(GetRewardRequest, {"query": ["ok", 7]}) == (422, "query[1]: must be a string, got 7")
    assert _refusal(GetRewardRequest, {"query": ["ok"], "prompts": "ok"}) == (
        422,
        "prompts: expected a list, got a string",
    )
    # Strict: no "true" read as true, no 1 as true.
    assert _refusal(TextsRequest, {"input": "a", "use_activation": "true"}) == (
        422,
        "use_activation: must be true or false, got 'true'",
    )
    assert _refusal(TextsRequest, {"input": "a", "activation": 1}) == (422, "activation: must be true or false, got 1")


def test_an_encoded_batch_cut_into_parts_joins_back_to_itself() -> None:
    from rewardsmith.inference import TextScores

    batch = Encoded(
        [_encoded(t) for t in ("a", "bb", "ccc", "dddd")],
        items=[("p", t) for t in ("a", "bb", "ccc", "dddd")],
        members=[[_encoded(t) for t in ("a", "bb", "ccc", "dddd")]] * 2,
        unsplit=[1, 3],
    )
    parts = [batch.part(0, 1), batch.part(1, 3), batch.part(3, 4)]
    assert [p.unsplit for p in parts] == [[], [0], [0]]
    joined = Encoded.join(parts)
    assert joined.lengths == batch.lengths and joined.unsplit == [1, 3] and joined.items == batch.items
    assert [len(m) for m in joined.members] == [4, 4]
    scores = TextScores(np.arange(4.0), confidence=np.arange(4.0) * 2, members=np.arange(8.0).reshape(2, 4))
    part = scores.part(1, 3)
    assert part.rewards.tolist() == [1.0, 2.0] and part.confidence.tolist() == [2.0, 4.0]
    assert part.members.tolist() == [[1.0, 2.0], [5.0, 6.0]] and part.uncertainty is None
