"""What the reward server's routes share (ServerState): its settings, the engine and its batcher, the tokenizer
thread, metrics, calibration maps, monitors and standards, and the shutdown's state; and the way a request's texts
are scored: tokenised on the tokenizer thread in chunks (so a large request does not hold a small one back),
queued, awaited, and cancelled when the client goes away, its time is up or the shutdown's deadline passes."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import Request

from rewardsmith.errors import NonFiniteReward, RewardsmithError, first_line, one_line
from rewardsmith.icrm.scoring import demo_key
from rewardsmith.inference import Encoded, MixedReading, Standard, TextItem, TextScores, response_text, text_row
from rewardsmith.serve.config import ServeConfig
from rewardsmith.serve.engine import (
    Batcher,
    Job,
    QueueFull,
    ScoringEngine,
    ScoringFailed,
    ServerClosing,
    check_in_context,
)
from rewardsmith.serve.metrics import ServeMetrics
from rewardsmith.serve.monitors import HackingMonitor, Observation, prompt_key
from rewardsmith.serve.requests import (
    RequestError,
    check_count,
    demonstrations,
    invalid,
)

log = logging.getLogger("rewardsmith.serve")

ENCODE_CHUNK = 16  # texts tokenised per task on the tokenizer thread: a large request lets small ones through
RETRY_AFTER = {"Retry-After": "1"}
CLOSING = "the server is shutting down; retry on another server"


def closing_error() -> RequestError:
    return RequestError(503, CLOSING, RETRY_AFTER, kind="shutting_down")


def client_gone_error() -> RequestError:
    return RequestError(499, "the client closed its connection before its scores were ready", kind="disconnected")


async def client_gone(request: Request) -> None:
    """Returns once the client has closed its connection: after the body has been read, the server's receive()
    answers only then (http.disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@dataclass
class ServerState:
    """What the routes share: settings, engine, batcher and tokenizer thread, metrics, calibration maps, the
    standards, and the shutdown (draining: refusing new requests; stop_at: time.monotonic() by which every
    request is answered; stopping: set when the shutdown begins)."""

    settings: ServeConfig
    engine: ScoringEngine
    batcher: Batcher
    metrics: ServeMetrics
    name: str
    model_dir: Path
    maps: Any = None
    calibration: str | None = None
    api_key: str | None = None
    monitor: HackingMonitor | None = None
    standards: dict[str, Standard] = field(default_factory=dict)
    started: int = field(default_factory=lambda: int(time.time()))
    tokenizer: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="rewardsmith-tokenizer")
    )
    draining: bool = False
    stop_at: float | None = None
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def begin_drain(self, stop_at: float) -> None:
        """The shutdown starts (on the event loop): new requests get 503, the batcher scores what it can finish
        by stop_at."""
        self.draining = True
        self.stop_at = stop_at
        self.stopping.set()
        self.batcher.close(stop_at)

    async def score(
        self,
        request: Request,
        texts: list[TextItem],
        standard: Standard | None = None,
        field: str = "input",
        singles: list[bool] | None = None,
    ) -> TextScores:
        """Scores through the batcher: tokenised on the tokenizer thread, queued, awaited. 503 when the queue is
        full or the server is shutting down, 504 after request_timeout_s, 500 when the model fails on this
        request, 499 (nobody to answer) when the client closes its connection first; 422 naming field[i] for a
        text an ensemble's members read differently, or whose reward is not finite (singles: the request's items,
        single texts or pairs, so a pair's text is named field[i].chosen / .rejected)."""
        if not texts and standard is None:
            empty = np.zeros(0)
            return TextScores(empty, empty if self.engine.in_context else None)
        if self.draining:
            raise closing_error()
        if not self.batcher.has_room(len(texts)):
            raise self._busy()
        gone = asyncio.ensure_future(client_gone(request))
        try:
            prepared = await self._prepare(texts, gone, field)
            try:
                job = self.batcher.submit(prepared, standard)
            except QueueFull:
                raise self._busy() from None
            except ServerClosing:
                raise closing_error() from None
            try:
                scores = await self._scores(job, gone)
            except NonFiniteReward as exc:  # 422 naming the text; the round's other requests were answered
                raise invalid(
                    _text_name(field, exc.position, singles),
                    f"the model's {exc.what} is {exc.value}, not a finite number",
                ) from None
        finally:
            gone.cancel()
        self._observe(request.url.path, texts, prepared, scores)
        return scores

    def _observe(self, endpoint: str, texts: list[TextItem], prepared: Encoded, scores: TextScores) -> None:
        """What a scored request tells beyond its answer: its texts to the monitors; a count and a log line of
        the texts scored verbatim (not read back into turns)."""
        if self.monitor is not None and texts:
            self.monitor.observe(
                [
                    Observation(prompt_key(t.prompt), response_text(t), float(r), e.response_truncated)
                    for t, r, e in zip(texts, scores.rewards, prepared.encoded, strict=True)
                ]
            )
        if scores.unsplit:
            self.metrics.verbatim.labels(endpoint).inc(len(scores.unsplit))
            log.warning(
                "%s: %d of %d texts scored verbatim: not read back into turns by the model's template",
                endpoint,
                len(scores.unsplit),
                len(texts),
            )

    def _busy(self) -> RequestError:
        return RequestError(
            503,
            f"the server is busy: {self.batcher.waiting} texts are waiting "
            f"(--max-queue {self.settings.max_queue}); retry later",
            RETRY_AFTER,
            kind="overloaded",
        )

    async def _prepare(self, texts: list[TextItem], gone: asyncio.Future[None], field: str) -> Encoded:
        """The texts tokenised on the tokenizer thread, ENCODE_CHUNK at a time (its queue is first come, first
        served, so a small request waits for one chunk of a large one, not all of it)."""
        loop = asyncio.get_running_loop()
        parts = []
        for start in range(0, len(texts), ENCODE_CHUNK):
            chunk = texts[start : start + ENCODE_CHUNK]
            try:
                parts.append(await loop.run_in_executor(self.tokenizer, self.engine.prepare, chunk))
            except MixedReading as exc:
                raise invalid(f"{field}[{start + exc.position}]", str(exc)) from None
            except RewardsmithError:
                raise
            except Exception as exc:
                # Not swallowed: logged, and this request fails with it (500); other requests go on.
                log.exception("encoding a request failed")
                raise RequestError(500, f"encoding failed: {first_line(exc, with_type=True)}") from None
            if gone.done():
                raise client_gone_error()
        return Encoded.join(parts)

    async def _scores(self, job: Job, gone: asyncio.Future[None]) -> TextScores:
        """The job's scores once the worker has them; the job is cancelled when its client goes, its time is up
        or the shutdown's stop_at passes first."""
        scores = asyncio.wrap_future(job.future)
        scores.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even when not awaited
        stop = asyncio.ensure_future(self._stop_reached())
        waiters: set[asyncio.Future[Any]] = {scores, gone, stop}
        try:
            done, _ = await asyncio.wait(
                waiters, timeout=self.settings.request_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()
        if scores not in done and self.batcher.cancel(job):
            if gone in done:
                raise client_gone_error()
            if stop in done:
                raise closing_error()
            raise RequestError(
                504, f"no scores within {self.settings.request_timeout_s:g} s (--request-timeout-s)", kind="timeout"
            )
        try:
            return job.future.result(0)
        except ScoringFailed as exc:
            raise RequestError(500, one_line(str(exc))) from None
        except ServerClosing:
            raise closing_error() from None

    async def _stop_reached(self) -> None:
        await self.stopping.wait()
        if self.stop_at is not None:
            await asyncio.sleep(max(0.0, self.stop_at - time.monotonic()))

    def standard_for(self, standard_id: str | None, demos: list[Any] | None) -> Standard | None:
        """The standard a native request is steered by: a registered id or ad-hoc demonstrations."""
        if standard_id is not None and demos is not None:
            raise invalid("standard", "give `standard` or `demonstrations`, not both")
        if standard_id is not None:
            check_in_context(self.engine, "standard")
            found = self.standards.get(standard_id)
            if found is None:
                raise invalid("standard", f"unknown standard {standard_id!r}; register it with POST /v1/standards")
            return found
        if not demos:
            return None
        check_in_context(self.engine, "demonstrations")
        check_count(len(demos), "demonstrations", self.settings.max_items)
        pairs = demonstrations(demos)
        key = demo_key(pairs)
        registered = any(s.key == key for s in self.standards.values())
        return Standard(key, pairs, registered)


def _text_name(field: str, position: int, singles: list[bool] | None) -> str:
    """field[i] of the text at `position`; with the request's items (single texts or pairs), field[i].chosen /
    .rejected for a pair's (inference.text_row)."""
    if singles is None:
        return f"{field}[{position}]"
    row, side = text_row(singles, position)
    return f"{field}[{row}]" if side == "response" else f"{field}[{row}].{side}"
