"""The model owner of the reward server: one worker thread that merges queued requests into scoring rounds.

A request becomes a Job: its texts (serve.requests.TextItem), the standard (demonstrations) an in-context model
is steered by, and a future for its scores. The worker takes the oldest job, waits up to `max_wait_s` after it
was queued for others to join, and stops a round once its texts hold `max_batch_tokens` tokens (a job that
would pass the budget opens the next round). A round is scored with the code `rewardsmith score` uses
(jobs.inference.Inference): scalar models through `evaluate.scoring.RewardScorer` (texts sorted by length, padded
per forward pass, each pass capped at `max_batch_tokens` padded tokens of which at most `max_padding` padding),
in-context models through `ICRMScorer.score_texts` (one call per standard in the round; set-mode contexts cached
per standard by its DemoCache). Padding never changes a
score (position ids count real tokens only, `data/collate.py: pad_texts`), so batching does not either.

A round that fails is scored again one job at a time, so a job that breaks the model fails alone and every
other request in the round is answered.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.data.collate import EncodedText
from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import ConfigError, first_line
from rewardsmith.jobs.inference import Inference
from rewardsmith.serve.metrics import ServeMetrics
from rewardsmith.serve.requests import TextItem, encode_item, resolve_item

log = logging.getLogger("rewardsmith.serve")


@dataclass(frozen=True)
class Standard:
    """Demonstrations steering an in-context model. key: demo_key of the demonstrations (the DemoCache key);
    registered: held by POST /v1/standards (never evicted), else an ad-hoc standard of one request."""

    key: str
    demos: tuple[PreferencePair, ...]
    registered: bool = False


@dataclass
class TextScores:
    """Scores of a job's M texts, in order: rewards (M,) float64 (an in-context model's utility u),
    confidence (M,) float64 for an in-context model (None for a scalar one), the tokens the texts took, and the
    positions of texts that could not be split into turns (tokenised whole, cut from their start when long)."""

    rewards: np.ndarray
    confidence: np.ndarray | None
    tokens: int
    unsplit: list[int] = field(default_factory=list)


@dataclass
class Job:
    """One request's texts (TextItem) and the standard an in-context model is steered by."""

    texts: list[TextItem]
    standard: Standard | None
    future: Future[TextScores] = field(default_factory=Future)
    enqueued: float = field(default_factory=time.perf_counter)
    encoded: list[EncodedText] = field(default_factory=list)
    items: list[tuple[Any, str]] = field(default_factory=list)
    unsplit: list[int] = field(default_factory=list)
    tokens: int = 0


class QueueFull(Exception):
    """The queue holds max_queue texts already; the caller answers 503 with Retry-After."""


class ScoringFailed(Exception):
    """The model failed on a request (the server log has the traceback); the caller answers 500."""


class ServerClosing(Exception):
    """The server is shutting down and takes no new work."""


class ScoringEngine:
    """A loaded model and what scores with it (jobs.inference.Inference: the path `rewardsmith score` takes).
    Every method but the constructor runs on the worker thread.

    max_batch_tokens: padded tokens per forward pass; max_padding: share of a forward pass's tokens that may be
    padding (None: 0.1 on a CPU, 0.5 on a GPU); max_standards: contexts kept by the ICRM's DemoCache
    (registered standards and the most recent ad-hoc ones).
    """

    def __init__(self, inference: Inference, max_standards: int = 1024):
        self.inference = inference
        self.loaded = inference.loaded
        self.model = inference.loaded.model
        self.model_type: str = inference.loaded.model_type
        self.bf16 = inference.bf16
        self.max_standards = max_standards
        self.encoder = inference.encoder
        self.scorer: Any = inference.scorer
        self._adhoc: OrderedDict[str, None] = OrderedDict()

    @classmethod
    def load(cls, model_dir: str | Path, precision: str = "auto", max_batch_tokens: int = 8192,
             max_padding: float | None = None, max_standards: int = 1024, template: str = "auto",
             max_length: int | None = None, trust_remote_code: bool = False) -> ScoringEngine:
        """Loads any reward model (models.loading) onto the first CUDA device, else the CPU. precision: auto (as
        the model was trained, as `rewardsmith score` does), bf16 or fp32."""
        bf16 = None if precision == "auto" else precision == "bf16"
        on_gpu = torch.cuda.is_available()
        inference = Inference.load(model_dir, template, max_length, trust_remote_code, batch_size=1 << 20, bf16=bf16,
                                   max_tokens=max_batch_tokens,
                                   max_padding=max_padding if max_padding is not None else (0.5 if on_gpu else 0.1))
        return cls(inference, max_standards)

    @property
    def in_context(self) -> bool:
        return self.model_type == "icrm"

    def encode(self, job: Job) -> int:
        """Tokenises the job's texts (kept on the job) and returns their token count, which the round's budget
        counts. For an in-context model the texts are resolved into (prompt, response) items, encoded again with
        the demonstrations (concat mode) or embedded (set mode)."""
        job.encoded = [encode_item(self.encoder, item) for item in job.texts]
        job.unsplit = [k for k, e in enumerate(job.encoded) if e.unsplit]
        if self.in_context:
            job.items = [resolve_item(self.encoder, item) or ((), item.text) for item in job.texts]
        job.tokens = sum(len(e.input_ids) for e in job.encoded)
        return job.tokens

    def score_round(self, jobs: Sequence[Job]) -> list[TextScores]:
        """Scores of each job of one round, in order."""
        if not self.in_context:
            texts = [e for job in jobs for e in job.encoded]
            rewards = self.inference.score_encoded(texts).rewards
            return [TextScores(part, None, job.tokens, job.unsplit)
                    for job, part in zip(jobs, _split(rewards, jobs), strict=True)]
        out: dict[int, TextScores] = {}
        groups: dict[str | None, list[int]] = {}
        for i, job in enumerate(jobs):
            groups.setdefault(job.standard.key if job.standard else None, []).append(i)
        for members in groups.values():
            standard = jobs[members[0]].standard
            demos = standard.demos if standard else ()
            items = [t for i in members for t in jobs[i].items]
            if items:
                u, s = self.scorer.score_texts(items, demos)
            else:  # registering a standard: compute and cache its context only
                if self.model.mode == "set":
                    self.scorer.context(demos)
                u, s = np.zeros(0), np.zeros(0)
            member_jobs = [jobs[i] for i in members]
            for i, job, part_u, part_s in zip(members, member_jobs, _split(u, member_jobs), _split(s, member_jobs),
                                              strict=True):
                out[i] = TextScores(part_u, part_s, job.tokens, job.unsplit)
            if standard is not None:
                self._remember(standard)
        return [out[i] for i in range(len(jobs))]

    def _remember(self, standard: Standard) -> None:
        """Keeps the DemoCache within max_standards: the least recently used ad-hoc standard goes first."""
        if standard.registered:
            self._adhoc.pop(standard.key, None)
            return
        self._adhoc[standard.key] = None
        self._adhoc.move_to_end(standard.key)
        while len(self.scorer.cache.contexts) > self.max_standards and self._adhoc:
            oldest, _ = self._adhoc.popitem(last=False)
            self.scorer.cache.discard(oldest)


def _split(values: np.ndarray, jobs: Sequence[Job]) -> list[np.ndarray]:
    """values (sum of the jobs' text counts,) cut into one array per job."""
    bounds = np.cumsum([len(job.texts) for job in jobs])[:-1]
    return np.split(values, bounds) if len(jobs) else []


_STOP = object()


class Batcher:
    """The queue and the worker thread that owns the engine. submit() is thread-safe and never blocks."""

    def __init__(self, engine: ScoringEngine, metrics: ServeMetrics, max_batch_tokens: int, max_wait_s: float,
                 max_queue: int):
        self.engine = engine
        self.metrics = metrics
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0  # texts submitted and not yet answered
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="rewardsmith-scorer", daemon=True)

    @property
    def waiting(self) -> int:
        """Texts queued or being scored."""
        return self._waiting

    def start(self) -> None:
        self._thread.start()

    def submit(self, texts: list[TextItem], standard: Standard | None = None) -> Future[TextScores]:
        """Queues the texts; returns the future of their scores. Raises QueueFull or ServerClosing."""
        n = len(texts)
        with self._lock:
            if self._closing:
                raise ServerClosing
            if self._waiting + n > self.max_queue:
                raise QueueFull
            self._waiting += n
            self.metrics.waiting.set(self._waiting)
        job = Job(texts, standard)
        job.future.add_done_callback(lambda _: self._release(n))
        self._queue.put(job)
        return job.future

    def _release(self, n: int) -> None:
        with self._lock:
            self._waiting -= n
            self.metrics.waiting.set(self._waiting)

    def close(self, timeout: float | None = None) -> None:
        """Takes no new work, scores everything queued, then stops the worker (waits up to `timeout` s)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self._queue.put(_STOP)
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ------------------------------------------------------------------------------------------------
    # Worker thread

    def _take(self, deadline: float | None) -> Any:
        """The next job not cancelled, claimed and encoded; _STOP; or None when `deadline` passes first
        (deadline None: wait as long as it takes)."""
        while True:
            try:
                if deadline is None:
                    item = self._queue.get()
                else:
                    remaining = deadline - time.perf_counter()
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                return None
            if item is _STOP:
                return item
            if not item.future.set_running_or_notify_cancel():
                continue  # its client gave up (timeout) before the round began
            try:
                self.engine.encode(item)
            except Exception as exc:
                # Not swallowed: logged, and the request it belongs to fails with it (500); others go on.
                log.exception("encoding a request failed")
                item.future.set_exception(ScoringFailed(f"encoding failed: {first_line(exc, with_type=True)}"))
                continue
            return item

    def _run(self) -> None:
        carry: Job | None = None
        stopping = False
        while not stopping:
            first = carry if carry is not None else self._take(None)
            carry = None
            if first is _STOP:
                break
            jobs, tokens = [first], first.tokens
            deadline = first.enqueued + self.max_wait_s
            while tokens < self.max_batch_tokens:
                job = self._take(deadline)
                if job is None:
                    break
                if job is _STOP:
                    stopping = True
                    break
                if tokens + job.tokens > self.max_batch_tokens:
                    carry = job
                    break
                jobs.append(job)
                tokens += job.tokens
            self._score(jobs)

    def _score(self, jobs: list[Job]) -> None:
        started = time.perf_counter()
        try:
            results = self.engine.score_round(jobs)
        except Exception as exc:
            # Not swallowed: a merged round is scored again one job at a time, so only the request that breaks
            # the model fails (500, logged with its traceback) and every other one is answered.
            if len(jobs) == 1:
                log.exception("scoring failed")
                jobs[0].future.set_exception(ScoringFailed(f"scoring failed: {first_line(exc, with_type=True)}"))
                return
            for job in jobs:
                self._score([job])
            return
        self.metrics.observe_round([started - job.enqueued for job in jobs], sum(len(j.texts) for j in jobs),
                                   sum(j.tokens for j in jobs), time.perf_counter() - started)
        for job, result in zip(jobs, results, strict=True):
            job.future.set_result(result)


def check_in_context(engine: ScoringEngine, what: str) -> None:
    """ConfigError unless the engine's model is an in-context (ICRM) model; `what` names the request field."""
    if not engine.in_context:
        raise ConfigError(f"{what}: this server's model is a scalar reward model; only an in-context (ICRM) model "
                          "takes demonstrations")
