"""The model owner of the reward server: one worker thread that turns queued requests into scoring rounds.

A request is encoded before it is queued (ScoringEngine.prepare, called on the server's tokenizer thread, so the
worker thread runs forward passes only) and becomes a Job: its encoded texts (for an in-context model also its
(prompt, response) items, which the model encodes with the demonstrations), the tokens of each text, the
standard (demonstrations) an in-context model is steered by, and a future for its scores.

Rounds. The worker opens a round as soon as a job waits and holds it open for others to join until the requests
that no round has served yet fill the token budget (`max_batch_tokens`), until as many of them wait as the last
round answered, or until `max_wait_s` after the round opened, whichever comes first. The wait is counted per
round, not from the oldest request: the clients a round answers send their next requests a few milliseconds
later, and the next round waits for them instead of closing at once on a request that waited through the last
one (which splits the clients into two groups that alternate). A round opened by a request that earlier rounds
have already begun (the rest of a large one) counts the wait from the first new request to arrive, not from when
it opened: it opens the moment the last round ends, before the clients that round answered have their replies,
and a wait counted from then would close before they are back (each would then wait a whole round more, behind
the large request's next share). The round then takes texts from every waiting
request by fair share
(plan_round: the request given the fewest tokens so far in the round adds its next text while the budget
allows, requests in turn: the one waiting longest since it arrived or was last served first). So a large request
is split across rounds and small requests interleave with it: each round holds every small request that waits
plus as much of the large ones as the budget leaves, and when the budget holds fewer texts than there are
requests, a request served in one round goes behind those that arrived meanwhile. A request is answered when its
last text is scored.

A round is scored with the code `rewardsmith score` uses (rewardsmith.inference: one score_encoded call per
standard in the round, whatever the model's kind): scalar models through
`evaluate.scoring.RewardScorer` (texts sorted by length, padded per forward pass, each pass capped at
`max_batch_tokens` padded tokens of which at most `max_padding` padding), in-context models through
`ICRMScorer.score_texts` (one call per standard in the round; set-mode contexts cached per standard by its
DemoCache). Padding never changes a score (position ids count real tokens only, `data/collate.py: pad_texts`), so
neither does batching nor splitting a request across rounds.

A round that fails is scored again one request at a time, so a request that breaks the model fails alone and every
other request in the round is answered. A job whose client has gone is cancelled (Batcher.cancel): its texts not
yet in a round are dropped. On close(stop_at) the batcher takes no new work and keeps scoring rounds while the
next one is expected to end by stop_at (from the seconds per token of recent rounds); the jobs left then fail with
ServerClosing, which the server answers with 503 and Retry-After.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rewardsmith.errors import ConfigError, NonFiniteReward, first_line
from rewardsmith.inference import Encoded, Inference, InferenceOptions, Standard, TextItem, TextScores, load_inference
from rewardsmith.serve.metrics import ServeMetrics

log = logging.getLogger("rewardsmith.serve")

# Token budget of one round when --max-batch-tokens is not given. On a CPU a forward pass costs about as much per
# text from ~16 texts on (benchmarks/bench_serve.py), so a larger round only lengthens the wait of the requests in
# it; on a GPU a larger pass is nearly free.
CPU_BATCH_TOKENS = 2048
GPU_BATCH_TOKENS = 16384


class Job:
    """One request in the queue: its encoded texts, the standard, the future of its scores, and how far it has
    got (next: texts handed to rounds so far; scored: texts scored so far; served: a round has taken from it;
    turn: when it joined the line, as it arrived or when its last round ended: rounds serve the line in order)."""

    def __init__(self, prepared: Encoded, standard: Standard | None):
        self.prepared = prepared
        self.standard = standard
        self.lengths = prepared.lengths
        self.size = len(self.lengths)
        self.tokens = sum(self.lengths)
        self.future: Future[TextScores] = Future()
        self.enqueued = time.monotonic()
        self.turn = self.enqueued
        self.next = 0
        self.scored = 0
        self.served = False
        self.parts: list[tuple[int, TextScores]] = []  # (start, scores) of each piece scored so far

    def result(self) -> TextScores:
        """The scores of all its texts (every piece scored), in order."""
        parts = [scores for _, scores in sorted(self.parts, key=lambda part: part[0])]

        def joined(name: str) -> np.ndarray | None:
            values = [getattr(p, name) for p in parts]
            return None if not values or values[0] is None else np.concatenate(values, axis=-1)

        rewards = np.concatenate([p.rewards for p in parts]) if parts else np.zeros(0)
        return TextScores(
            rewards,
            joined("confidence"),
            joined("uncertainty"),
            joined("members"),
            self.tokens,
            list(self.prepared.unsplit),
        )


@dataclass(frozen=True)
class Piece:
    """Texts start..end-1 of a job, scored in one round."""

    job: Job
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def tokens(self) -> int:
        return sum(self.job.lengths[self.start : self.end])


def plan_round(pending: Sequence[Sequence[int]], budget: int) -> list[int]:
    """How many of each request's next texts one round takes. pending[i]: the token counts of request i's texts
    not yet scored, requests in their turn order (Batcher: longest waiting since it was last served first). The
    request given the fewest tokens so far in the round (the earlier in turn on a tie) adds its next text while
    the round stays within `budget` tokens; a request whose next text does not fit takes no more. So every
    request gets an equal share of the round's tokens, and one that needs less than its share leaves the rest to
    the others (max-min fair to within one text). The first request in turn always gets its next text, even one
    longer than the budget. Returns n_i per request (sum(pending[i][:n_i]) tokens each)."""
    taken = [0] * len(pending)
    heap = [(0, i) for i, lengths in enumerate(pending) if lengths]
    heapq.heapify(heap)
    used = 0
    while heap:
        served, i = heapq.heappop(heap)
        length = pending[i][taken[i]]
        if used and used + length > budget:
            continue
        used += length
        taken[i] += 1
        if taken[i] < len(pending[i]):
            heapq.heappush(heap, (served + length, i))
    return taken


class QueueFull(Exception):
    """The queue holds max_queue texts already; the caller answers 503 with Retry-After."""


class ScoringFailed(Exception):
    """The model failed on a request (the server log has the traceback); the caller answers 500."""


class ServerClosing(Exception):
    """The server is shutting down and takes no new work, or could not score this job in its grace period; the
    caller answers 503 with Retry-After."""


class ScoringEngine:
    """A loaded model of any kind (rewardsmith.inference: the path `rewardsmith score` takes) and its rounds.
    prepare() runs on the server's tokenizer thread; score_round() on the worker thread.

    max_batch_tokens: the token budget of a round and of a forward pass (the Inference was built with it).
    """

    def __init__(self, inference: Inference, max_batch_tokens: int = CPU_BATCH_TOKENS):
        self.inference = inference
        self.loaded = inference.loaded
        self.model_type: str = inference.loaded.model_type
        self.bf16 = inference.bf16
        self.max_batch_tokens = max_batch_tokens

    @classmethod
    def load(
        cls,
        model_dir: str | Path,
        precision: str = "auto",
        max_batch_tokens: int | None = None,
        max_padding: float | None = None,
        max_standards: int = 1024,
        template: str = "auto",
        max_length: int | None = None,
        trust_remote_code: bool = False,
    ) -> ScoringEngine:
        """Loads any reward model (inference.load_inference) onto the first CUDA device, else the CPU. precision:
        auto (as the model was trained, as `rewardsmith score` does), bf16 or fp32; max_batch_tokens None:
        CPU_BATCH_TOKENS on a CPU, GPU_BATCH_TOKENS on a GPU; max_padding None: 0.1 on a CPU, 0.5 on a GPU;
        max_standards: the ad-hoc standards an in-context model keeps the context of."""
        bf16 = None if precision == "auto" else precision == "bf16"
        on_gpu = torch.cuda.is_available()
        tokens = (
            max_batch_tokens if max_batch_tokens is not None else (GPU_BATCH_TOKENS if on_gpu else CPU_BATCH_TOKENS)
        )
        # Rounds are capped by tokens, not by texts: no batch-size cap of its own.
        options = InferenceOptions(template, max_length, trust_remote_code, batch_size=1 << 20, bf16=bf16)
        inference = load_inference(
            model_dir,
            options,
            max_tokens=tokens,
            max_padding=max_padding if max_padding is not None else (0.5 if on_gpu else 0.1),
            max_standards=max_standards,
        )
        return cls(inference, tokens)

    @property
    def in_context(self) -> bool:
        return self.inference.in_context

    def prepare(self, texts: Sequence[TextItem]) -> Encoded:
        """The texts encoded by the model (inference.Inference.encode: long parts cut first; an ensemble's members
        each in its own template)."""
        return self.inference.encode(texts)

    def score_round(self, pieces: Sequence[Piece]) -> list[TextScores]:
        """The scores of each piece's texts, pieces in order: one call of the model per standard in the round (one
        call for a model no demonstrations steer). A piece of no texts registers its standard."""
        out: dict[int, TextScores] = {}
        groups: dict[str | None, list[int]] = {}
        for i, piece in enumerate(pieces):
            groups.setdefault(piece.job.standard.key if piece.job.standard else None, []).append(i)
        for members in groups.values():
            standard = pieces[members[0]].job.standard
            batch = Encoded.join([pieces[i].job.prepared.part(pieces[i].start, pieces[i].end) for i in members])
            if not len(batch) and standard is not None:
                self.inference.prepare_standard(standard)
            scores = self.inference.score_encoded(batch, standard)
            start = 0
            for i in members:
                out[i] = scores.part(start, start + pieces[i].size)
                start += pieces[i].size
        return [out[i] for i in range(len(pieces))]


class Batcher:
    """The queue and the worker thread that owns the engine (see the module docstring). submit(), cancel(),
    close() are thread-safe and never block on the model.

    max_batch_tokens: tokens per round; max_wait_s: the longest a round waits, after it opens, for requests to
    join it (0: it takes what is queued at once); max_queue: most texts waiting (more: QueueFull)."""

    def __init__(
        self, engine: ScoringEngine, metrics: ServeMetrics, max_batch_tokens: int, max_wait_s: float, max_queue: int
    ):
        self.engine = engine
        self.metrics = metrics
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self._cond = threading.Condition(threading.RLock())  # re-entrant: a future's callbacks run under it
        self._jobs: list[Job] = []  # jobs holding texts no round has taken yet, in arrival order
        self._fresh_tokens = 0  # tokens of the jobs no round has taken from yet
        self._fresh_jobs = 0  # and how many they are
        self._answered = 0  # requests the last round answered
        self._waiting = 0  # texts submitted and not yet answered
        self._closing = False
        self._stop_at: float | None = None
        self._seconds_per_token: deque[float] = deque(maxlen=16)  # of recent rounds
        self._thread = threading.Thread(target=self._run, name="rewardsmith-scorer", daemon=True)

    @property
    def waiting(self) -> int:
        """Texts queued or being scored."""
        return self._waiting

    @property
    def closing(self) -> bool:
        return self._closing

    def start(self) -> None:
        self._thread.start()

    def has_room(self, n: int) -> bool:
        """Whether n more texts would be taken now (not closing, queue not full)."""
        with self._cond:
            return not self._closing and self._waiting + n <= self.max_queue

    def submit(self, prepared: Encoded, standard: Standard | None = None) -> Job:
        """Queues a request's texts; its job's future gets their scores. Raises QueueFull or ServerClosing."""
        n = len(prepared.encoded)
        with self._cond:
            if self._closing:
                raise ServerClosing
            if self._waiting + n > self.max_queue:
                raise QueueFull
            job = Job(prepared, standard)
            self._waiting += n
            self.metrics.waiting.set(self._waiting)
            job.future.add_done_callback(lambda _: self._release(n))
            self._jobs.append(job)
            self._fresh_tokens += job.tokens
            self._fresh_jobs += 1
            self._cond.notify_all()
        return job

    def cancel(self, job: Job) -> bool:
        """Stops scoring a job (its client has gone, or stopped waiting): its texts not yet in a round are
        dropped and its future is cancelled. False when it already had its result."""
        with self._cond:
            if job.future.done():
                return False
            self._drop(job)
            return job.future.cancel()

    def close(self, stop_at: float | None = None) -> None:
        """Takes no new work. The worker goes on scoring what is queued; with stop_at (time.monotonic()), it starts
        no round it expects to end later, and the jobs left then fail with ServerClosing. Returns at once."""
        with self._cond:
            self._closing = True
            if stop_at is not None:
                self._stop_at = stop_at if self._stop_at is None else min(self._stop_at, stop_at)
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """Waits up to `timeout` s for the worker to stop (after close); True when it has."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _release(self, n: int) -> None:
        with self._cond:
            self._waiting -= n
            self.metrics.waiting.set(self._waiting)

    def _drop(self, job: Job) -> None:
        """Takes a job off the queue (lock held)."""
        if any(j is job for j in self._jobs):
            self._jobs = [j for j in self._jobs if j is not job]
            if not job.served:
                self._fresh_tokens -= job.tokens
                self._fresh_jobs -= 1

    # ------------------------------------------------------------------------------------------------
    # Worker thread

    def _run(self) -> None:
        while True:
            planned = self._next_round()
            if planned is None:
                return
            self._score(*planned)

    def _next_round(self) -> tuple[list[Piece], list[float]] | None:
        """The next round's pieces and the queue time of each request it serves first; None when the worker
        should stop (closed and nothing left, or the grace period over)."""
        with self._cond:
            while not self._jobs and not self._closing:
                self._cond.wait()
            if not self._jobs:
                return None
            opened = time.monotonic()
            self._gather(opened)
            pieces, first_waits = self._plan(opened)
            if self._stop_at is not None and time.monotonic() + self._expected_seconds(pieces) > self._stop_at:
                self._fail_all([p.job for p in pieces], "the server is shutting down")
                return None
            return pieces, first_waits

    def _gather(self, opened: float) -> None:
        """Holds the round open for requests to join it (lock held; see the module docstring)."""
        limit = opened + self.max_wait_s
        expected = max(1, self._answered)
        counted_from_arrival = self._fresh_jobs > 0
        while not self._closing and self._fresh_tokens < self.max_batch_tokens and self._fresh_jobs < expected:
            if not counted_from_arrival and self._fresh_jobs:
                # Opened by a request already being served (a large one): its first new request has come, the
                # rest of the clients the last round answered come back over the next few milliseconds.
                limit = max(limit, time.monotonic() + self.max_wait_s)
                counted_from_arrival = True
            remaining = limit - time.monotonic()
            if remaining <= 0:
                return
            self._cond.wait(remaining)

    def _plan(self, opened: float) -> tuple[list[Piece], list[float]]:
        """Takes the round's texts off the queue by fair share (plan_round), the requests in turn; lock held."""
        line = sorted(self._jobs, key=lambda job: job.turn)
        counts = plan_round([job.lengths[job.next :] for job in line], self.max_batch_tokens)
        pieces: list[Piece] = []
        first_waits: list[float] = []
        for job, n in zip(line, counts, strict=True):
            if n == 0 and job.size:
                continue
            pieces.append(Piece(job, job.next, job.next + n))  # a job of no texts: registering a standard
            job.next += n
            if not job.served:
                job.served = True
                self._fresh_tokens -= job.tokens
                self._fresh_jobs -= 1
                first_waits.append(opened - job.enqueued)
        self._jobs = [job for job in self._jobs if job.next < job.size]
        return pieces, first_waits

    def _expected_seconds(self, pieces: Sequence[Piece]) -> float:
        """How long a round of these pieces should take: its tokens at the slowest rate of recent rounds."""
        if not self._seconds_per_token:
            return 0.0
        return max(self._seconds_per_token) * sum(p.tokens for p in pieces)

    def _fail_all(self, also: Sequence[Job], message: str) -> None:
        """Every job queued or in `also` fails with ServerClosing (lock held)."""
        for job in [*also, *self._jobs]:
            if not job.future.done():
                job.future.set_exception(ServerClosing(message))
        self._jobs = []
        self._fresh_tokens = self._fresh_jobs = 0

    def _score(self, pieces: list[Piece], first_waits: list[float]) -> None:
        started = time.monotonic()
        results = self._results(pieces)
        seconds = time.monotonic() - started
        tokens = sum(p.tokens for p in pieces)
        if tokens:
            self._seconds_per_token.append(seconds / tokens)
        self.metrics.observe_round(len(pieces), first_waits, sum(p.size for p in pieces), tokens, seconds)
        ended = time.monotonic()
        with self._cond:
            self._answered = 0
            for piece, result in zip(pieces, results, strict=True):
                job = piece.job
                if job.future.done():  # cancelled, or failed in an earlier piece
                    continue
                if isinstance(result, Exception):
                    self._drop(job)
                    job.future.set_exception(result)
                    continue
                job.parts.append((piece.start, result))
                job.scored += piece.size
                job.turn = ended  # back in line behind the requests that arrived during this round
                if job.scored == job.size:
                    job.future.set_result(job.result())
                    self._answered += 1

    def _results(self, pieces: list[Piece]) -> list[TextScores | Exception]:
        """The engine's scores of each piece, or the ScoringFailed of a piece the model fails on."""
        try:
            return list(self.engine.score_round(pieces))
        except Exception as exc:
            # Not swallowed: a merged round is scored again one piece at a time, so only the request that breaks
            # the model fails (500, logged with its traceback; 422 for a text whose reward is not finite, named by
            # its position in the request) and every other one is answered.
            if len(pieces) == 1:
                if isinstance(exc, NonFiniteReward):
                    self.metrics.nonfinite.inc()
                    return [NonFiniteReward(pieces[0].start + exc.position, exc.value, exc.what)]
                log.exception("scoring failed")
                return [ScoringFailed(f"scoring failed: {first_line(exc, with_type=True)}")]
            out: list[TextScores | Exception] = []
            for piece in pieces:
                out += self._results([piece])
            return out


def check_in_context(engine: ScoringEngine, what: str) -> None:
    """ConfigError unless the engine's model is an in-context (ICRM) model; `what` names the request field."""
    if not engine.in_context:
        raise ConfigError(
            f"{what}: this server's model is a scalar reward model; only an in-context (ICRM) model "
            "takes demonstrations"
        )
