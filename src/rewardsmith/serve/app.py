"""The reward server: a FastAPI app over one ScoringEngine and its Batcher, run by uvicorn.

Endpoints (docs/serve.md has request and response examples):
    POST /get_reward       OpenRLHF remote reward model (`--remote_rm_url http://host:port/get_reward`)
    POST /classify         vLLM classify (verl's reward loop sends `input` with `activation: false`)
    POST /pooling          vLLM pooling: the reward as a 1-element list per text
    POST /predict          text-embeddings-inference predict
    POST /v1/score         native: single responses or pairs, rater maps, ICRM demonstrations or standards
    POST /v1/standards     register demonstrations under an id (their ICRM context is computed once)
    GET  /health, /v1/models, /metrics

Raw scores unless a request asks for the sigmoid (use_activation / activation / softmax true; TEI raw_scores
false). Every refused request gets a status code and `{"error": "<one line naming the field>"}`; bad input
never stops the server or another client's request.

A request's texts are tokenised on one tokenizer thread, in chunks (so a large request does not hold a small
one back), before they are queued; the scoring worker runs forward passes only. A request whose client closes
its connection stops being scored. Connections must send their headers within --header-timeout-s and their
body within --body-timeout-s (else 408). On SIGTERM or Ctrl-C (RewardServer.shutdown) the server stops
accepting connections, answers every request that arrives on an open connection with 503 + Retry-After +
`Connection: close`, scores what it can finish within --shutdown-timeout-s, answers the rest 503 too, closes
the idle keep-alive connections and exits within the timeout.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.message import Message as MimeHeader
from pathlib import Path
from typing import Any

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from rewardsmith.errors import ConfigError, NonFiniteReward, RewardsmithError, first_line, one_line
from rewardsmith.icrm.scoring import demo_key
from rewardsmith.inference import (
    Encoded,
    MixedReading,
    Standard,
    TextItem,
    TextScores,
    item_results,
    response_text,
    text_row,
)
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
from rewardsmith.serve.metrics import ServeMetrics, error_kind
from rewardsmith.serve.monitors import HackingMonitor, Observation, prompt_key
from rewardsmith.serve.requests import (
    GetRewardRequest,
    PredictRequest,
    RequestError,
    ScoreRequest,
    StandardRequest,
    TextsRequest,
    check_count,
    demonstrations,
    input_texts,
    invalid,
    predict_texts,
    query_texts,
    read_body,
    score_items,
)
from rewardsmith.stats import sigmoid

log = logging.getLogger("rewardsmith.serve")

ENDPOINTS = (
    "/get_reward",
    "/classify",
    "/pooling",
    "/predict",
    "/v1/score",
    "/v1/standards",
    "/health",
    "/v1/models",
    "/metrics",
    "/v1/monitors",
)
JSON_ENDPOINTS = ("/get_reward", "/classify", "/pooling", "/predict", "/v1/score", "/v1/standards")
OPEN_ENDPOINTS = ("/health",)  # answered without an API key (load balancers probe it)
LABEL = "LABEL_0"  # the label transformers gives the one class of a single-logit classifier
ENCODE_CHUNK = 16  # texts tokenised per task on the tokenizer thread: a large request lets small ones through
KIND_KEY = "rewardsmith.error_kind"  # scope key: the metrics kind of a refusal whose status does not tell it
LINGER_S = 0.5  # on shutdown, how long idle keep-alive connections stay open to answer a request already sent
EXIT_MARGIN_S = 2.0  # of the shutdown timeout (at most a quarter of it), kept for exiting once all is answered
RETRY_AFTER = {"Retry-After": "1"}


def model_name(model_dir: str | Path) -> str:
    """How responses name the model: the folder's name (a `train` run's `model/` folder: "<run>/model")."""
    path = Path(model_dir).resolve()
    return f"{path.parent.name}/{path.name}" if path.name == "model" else path.name


def read_api_key(path: str | Path) -> str:
    """The key in an API-key file (surrounding whitespace dropped). ConfigError when unreadable or empty."""
    try:
        key = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the API key file ({getattr(exc, 'strerror', None) or exc})") from None
    if not key or len(key.split()) != 1:
        raise ConfigError(f"{path}: the API key file must hold one key (no spaces)")
    return key


def closing_error() -> RequestError:
    return RequestError(503, "the server is shutting down; retry on another server", RETRY_AFTER, kind="shutting_down")


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
        if self.monitor is not None and texts:
            self.monitor.observe(
                [
                    Observation(prompt_key(t.prompt), response_text(t), float(r), e.response_truncated)
                    for t, r, e in zip(texts, scores.rewards, prepared.encoded, strict=True)
                ]
            )
        if scores.unsplit:
            endpoint = request.url.path
            self.metrics.verbatim.labels(endpoint).inc(len(scores.unsplit))
            log.warning(
                "%s: %d of %d texts scored verbatim: not read back into turns by the model's template",
                endpoint,
                len(scores.unsplit),
                len(texts),
            )
        return scores

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


# ----------------------------------------------------------------------------------------------------
# Middleware: metrics, shutdown, API key, content type, body size and body deadline, before the body is read


def _text_name(field: str, position: int, singles: list[bool] | None) -> str:
    """field[i] of the text at `position`; with the request's items (single texts or pairs), field[i].chosen /
    .rejected for a pair's (inference.text_row)."""
    if singles is None:
        return f"{field}[{position}]"
    row, side = text_row(singles, position)
    return f"{field}[{row}]" if side == "response" else f"{field}[{row}].{side}"


def is_json(content_type: str) -> bool:
    """Whether a Content-Type names JSON (application/json, application/*+json)."""
    header = MimeHeader()
    header["content-type"] = content_type
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


class Gate:
    """Pure ASGI middleware: times every request and counts it by endpoint and status (499 when its client went
    away first); while the server shuts down answers 503 with `Connection: close`; answers 401 without the API
    key, 415 for a body that is not declared JSON, 413 for a body over max_body_bytes (declared, or counted as
    it streams in) and 408 for a body not in within body_timeout_s."""

    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = self.state
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        started = time.perf_counter()
        status = [500]
        responded = [False]
        gone = [False]

        async def send_counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                responded[0] = True
                if state.draining:  # an answer during the shutdown closes its connection
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        try:
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send_counted)
            else:
                await self.app(scope, self._receive(receive, responded, gone), send_counted)
        finally:
            code = 499 if gone[0] else status[0]
            metrics = state.metrics
            metrics.requests.labels(endpoint, str(code)).inc()
            metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
            if code >= 400:
                kind = "disconnected" if gone[0] else scope.get(KIND_KEY) or error_kind(code)
                metrics.errors.labels(endpoint, kind).inc()

    def _refusal(self, scope: Scope) -> Response | None:
        state = self.state
        if state.draining:
            scope[KIND_KEY] = "shutting_down"
            return error_response(503, "the server is shutting down; retry on another server", RETRY_AFTER)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = state.api_key
        if key is not None and scope["path"] not in OPEN_ENDPOINTS:
            given = headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
                why = "missing" if not given else "wrong"
                return error_response(
                    401, f"{why} API key: send `Authorization: Bearer <key>`", {"WWW-Authenticate": "Bearer"}
                )
        content_type = headers.get("content-type")
        if scope["method"] == "POST" and scope["path"] in JSON_ENDPOINTS and content_type and not is_json(content_type):
            return error_response(
                415,
                f"Content-Type {content_type.split(';')[0].strip()!r}: the body must be JSON "
                "sent as `Content-Type: application/json`",
                {"Connection": "close"},
            )
        declared = headers.get("content-length")
        limit = state.settings.max_body_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return error_response(
                413,
                f"request body of {int(declared)} bytes; the limit is {limit} (--max-body-bytes)",
                {"Connection": "close"},
            )
        return None

    def _receive(self, receive: Receive, responded: list[bool], gone: list[bool]) -> Receive:
        """receive() with the body's size limit and deadline; marks a disconnect before the answer."""
        settings = self.state.settings
        limit = settings.max_body_bytes
        deadline = time.monotonic() + settings.body_timeout_s
        seen = [0]
        complete = [False]

        async def receive_checked() -> Message:
            if complete[0]:
                message = await receive()
            else:
                try:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    raise RequestError(
                        408,
                        f"the request body did not arrive within {settings.body_timeout_s:g} s (--body-timeout-s)",
                        {"Connection": "close"},
                    ) from None
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:  # a body sent without Content-Length (chunked)
                    raise RequestError(
                        413, f"request body over {limit} bytes (--max-body-bytes)", {"Connection": "close"}
                    )
                complete[0] = not message.get("more_body", False)
            elif message["type"] == "http.disconnect" and not responded[0]:
                gone[0] = True
            return message

        return receive_checked


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": one_line(message)}, status_code=status, headers=headers)


async def read_json(request: Request) -> Any:
    """The request's body parsed as JSON (read through the Gate's size limit and deadline). 400 for a body that is
    not JSON (or not UTF-8), 422 for an empty one, 499 when the client goes away while sending it."""
    try:
        raw = await request.body()
    except ClientDisconnect:
        raise client_gone_error() from None
    if not raw.strip():
        raise RequestError(422, "the request body is missing (send a JSON object)")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise RequestError(400, "the request body is not valid JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise RequestError(
            400, f"the request body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise RequestError(400, "the request body is not valid JSON (nested too deeply)") from None
    except ValueError:
        # An integer longer than Python converts (sys.get_int_max_str_digits): parsed again with such integers held
        # as LongInteger, so that the field holding one is refused (422) by name like any other wrong value.
        return json.loads(raw, parse_int=_json_integer)


class LongInteger:
    """A JSON integer of more digits than Python converts to int; only its length is kept."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"an integer of {self.digits} digits"


def _json_integer(text: str) -> int | LongInteger:
    limit = sys.get_int_max_str_digits()  # 0: no limit
    return int(text) if not limit or len(text.lstrip("-")) <= limit else LongInteger(text)


# ----------------------------------------------------------------------------------------------------
# The app


def build_app(
    model_dir: str | Path,
    settings: ServeConfig | None = None,
    calibration: str | Path | None = None,
    engine: ScoringEngine | None = None,
) -> FastAPI:
    """The server's FastAPI app for the model saved in `model_dir` (loaded here unless `engine` is given; one
    engine serves one app). calibration: per-rater maps from `rewardsmith calibrate fit`. The scoring worker
    starts and stops with the app's lifespan (uvicorn runs it). Raises CheckpointError / ConfigError / DataError
    on a bad model folder, setting or calibration file."""
    settings = settings if settings is not None else ServeConfig()
    settings.validate()
    api_key = read_api_key(settings.api_key_file) if settings.api_key_file else None
    maps = None
    if calibration is not None:
        from rewardsmith.calibrate.maps import load_maps

        maps = load_maps(calibration)
    if engine is None:
        engine = ScoringEngine.load(
            model_dir,
            settings.precision,
            settings.max_batch_tokens,
            settings.max_padding,
            settings.max_standards,
            settings.template,
            settings.max_length,
            settings.trust_remote_code,
        )
    metrics = ServeMetrics()
    batcher = Batcher(engine, metrics, engine.max_batch_tokens, settings.max_wait_ms / 1000.0, settings.max_queue)
    state = ServerState(
        settings,
        engine,
        batcher,
        metrics,
        model_name(model_dir),
        Path(model_dir),
        maps,
        str(calibration) if calibration is not None else None,
        api_key,
        HackingMonitor(settings.monitor_window, metrics=metrics) if settings.monitor_window else None,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        yield
        # RewardServer.shutdown has answered every request by now; under another server, score what is queued.
        stop_at = state.stop_at if state.stop_at is not None else time.monotonic() + settings.shutdown_timeout_s
        batcher.close(stop_at)
        await asyncio.to_thread(batcher.join, max(0.0, stop_at - time.monotonic()) + EXIT_MARGIN_S / 8)
        state.tokenizer.shutdown(wait=False)

    app = FastAPI(title="rewardsmith reward server", lifespan=lifespan)
    app.state.server = state
    app.add_middleware(Gate, state=state)
    _add_error_handlers(app)
    _add_routes(app, state)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def on_http(request: Request, exc: HTTPException) -> JSONResponse:
        kind = getattr(exc, "kind", None)
        if kind is not None:
            request.scope[KIND_KEY] = kind
        return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))

    @app.exception_handler(RewardsmithError)
    async def on_user_error(_: Request, exc: RewardsmithError) -> JSONResponse:
        return error_response(422, str(exc))

    @app.exception_handler(Exception)
    async def on_bug(_: Request, exc: Exception) -> JSONResponse:
        # Starlette logs the traceback and re-raises after this answer: the client gets one line, the log the rest.
        return error_response(500, f"internal error ({type(exc).__name__}); see the server log")


def _values(scores: TextScores, activation: bool) -> list[float]:
    values = sigmoid(scores.rewards) if activation else scores.rewards
    return [float(v) for v in values]


def _vllm_list(prefix: str, model: str, data: list[dict[str, Any]], scores: Any) -> dict[str, Any]:
    """vLLM's list envelope of /classify and /pooling responses around `data`."""
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": data,
        "usage": _usage(scores.tokens),
        **_unsplit(scores),
    }


def _usage(tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0, "prompt_tokens_details": None}


UNSPLIT_NOTE = (
    "texts {} were scored verbatim: rendering the turns read off each with the model's template does not give the "
    "text, so each was tokenised whole (cut from its start when too long) and its reward can differ from "
    "`rewardsmith score` on the same conversation"
)


def _unsplit(scores: TextScores) -> dict[str, Any]:
    """What a response says about texts that could not be split into turns (empty when every one was)."""
    if not scores.unsplit:
        return {}
    return {"rewardsmith": {"unsplit": scores.unsplit, "note": UNSPLIT_NOTE.format(scores.unsplit)}}


def _add_routes(app: FastAPI, state: ServerState) -> None:
    max_items = state.settings.max_items

    @app.post("/get_reward")
    async def get_reward(request: Request) -> JSONResponse:
        """OpenRLHF: {"query": [...], "prompts": [...], "labels": [...]} -> rewards (raw), scores (the same
        values, as OpenRLHF's own serve_rm answers), extra_logs; an ensemble adds uncertainties (the sd of its
        standardised members per query)."""
        body = read_body(GetRewardRequest, await read_json(request))
        check_count(len(body.query), "query", max_items)
        scores = await state.score(request, query_texts(body.query, body.prompts), field="query")
        rewards = _values(scores, False)
        logs = {"unsplit_texts": [len(scores.unsplit)] * len(rewards)} if scores.unsplit else {}
        spread = {} if scores.uncertainty is None else {"uncertainties": [float(u) for u in scores.uncertainty]}
        return JSONResponse({"rewards": rewards, "scores": rewards, **spread, "extra_logs": logs, **_unsplit(scores)})

    @app.post("/classify")
    async def classify(request: Request) -> JSONResponse:
        """vLLM classify: one entry per text, probs = [reward] (num_classes 1)."""
        body = read_body(TextsRequest, await read_json(request))
        texts = input_texts(body)
        check_count(len(texts), "input", max_items)
        scores = await state.score(request, texts)
        data = [
            {"index": i, "label": LABEL, "probs": [v], "num_classes": 1}
            for i, v in enumerate(_values(scores, body.wants_activation()))
        ]
        return JSONResponse(_vllm_list("classify", state.name, data, scores))

    @app.post("/pooling")
    async def pooling(request: Request) -> JSONResponse:
        """vLLM pooling: the pooled output of a reward model is its reward, as a 1-element list per text."""
        body = read_body(TextsRequest, await read_json(request))
        texts = input_texts(body)
        check_count(len(texts), "input", max_items)
        scores = await state.score(request, texts)
        data = [
            {"index": i, "object": "pooling", "data": [v]}
            for i, v in enumerate(_values(scores, body.wants_activation()))
        ]
        return JSONResponse(_vllm_list("pool", state.name, data, scores))

    @app.post("/predict")
    async def predict(request: Request) -> JSONResponse:
        """TEI predict: [{score, label}] for one sequence, a list of those for a batch."""
        body = read_body(PredictRequest, await read_json(request))
        texts, batched = predict_texts(body.inputs)
        check_count(len(texts), "inputs", max_items)
        scores = await state.score(request, texts, field="inputs")
        values = _values(scores, body.raw_scores is False)
        predictions = [[{"score": v, "label": LABEL}] for v in values]
        headers = {"X-Rewardsmith-Note": UNSPLIT_NOTE.format(scores.unsplit)} if scores.unsplit else None
        return JSONResponse(predictions if batched else predictions[0], headers=headers)

    @app.post("/v1/score")
    async def score(request: Request) -> JSONResponse:
        """Native scoring; see ScoreRequest and docs/serve.md."""
        body = read_body(ScoreRequest, await read_json(request))
        check_count(len(body.items), "items", max_items)
        if not body.items:
            raise invalid("items", "empty list")
        if body.rater is not None and state.maps is None:
            raise invalid("rater", "this server has no rater maps (start it with --calibration)")
        texts, singles = score_items(body.items)
        standard = state.standard_for(body.standard, body.demonstrations)
        scores = await state.score(request, texts, standard, field="items", singles=singles)
        return JSONResponse(_native_response(state, body, scores, singles, standard))

    @app.post("/v1/standards")
    async def register_standard(request: Request) -> JSONResponse:
        """Registers demonstrations under an id; their ICRM context is computed now and cached."""
        body = read_body(StandardRequest, await read_json(request))
        check_in_context(state.engine, "demonstrations")
        if not body.demonstrations:
            raise invalid("demonstrations", "empty list")
        check_count(len(body.demonstrations), "demonstrations", max_items)
        if body.id is not None and not (0 < len(body.id) <= 128 and body.id.strip() == body.id):
            raise invalid("id", "1 to 128 characters, no surrounding spaces")
        pairs = demonstrations(body.demonstrations)
        key = demo_key(pairs)
        standard_id = body.id or key[:16]
        known = state.standards.get(standard_id)
        if known is not None and known.key != key:
            raise RequestError(409, f"id: standard {standard_id!r} is registered with other demonstrations")
        if known is None and len(state.standards) >= state.settings.max_standards:
            raise RequestError(
                422,
                f"id: {len(state.standards)} standards are registered (--max-standards {state.settings.max_standards})",
            )
        standard = Standard(key, pairs, registered=True)
        await state.score(request, [], standard)
        state.standards[standard_id] = standard
        return JSONResponse({"standard": standard_id, "n_demonstrations": len(pairs)})

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "model": state.name,
                "model_type": state.engine.model_type,
                "waiting_texts": state.batcher.waiting,
            }
        )

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        loaded = state.engine.loaded
        cfg = loaded.model_config
        card = {
            "id": state.name,
            "object": "model",
            "created": state.started,
            "owned_by": "rewardsmith",
            "root": str(state.model_dir),
            "model_type": state.engine.model_type,
            "model_kind": loaded.kind,
            "kind": loaded.meta.get("kind"),
            "backbone": cfg.backbone if cfg is not None else None,
            "template": loaded.template,
            "max_length": loaded.max_length,
            "precision": "bf16" if state.engine.bf16 else "fp32",
            "max_batch_tokens": state.engine.max_batch_tokens,
            "calibration": state.calibration,
            "standards": sorted(state.standards),
        }
        return JSONResponse({"object": "list", "data": [card]})

    @app.get("/metrics")
    async def metrics() -> Response:
        if state.monitor is not None:
            state.monitor.snapshot()  # the monitor gauges, as of now
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/monitors")
    async def monitors() -> JSONResponse:
        """The reward-hacking monitors over the window (serve/monitors.py): statistics, rules firing, counts."""
        if state.monitor is None:
            raise RequestError(404, "the monitors are off (--monitor-window 0)")
        return JSONResponse(state.monitor.snapshot())


def _native_response(
    state: ServerState, body: ScoreRequest, scores: TextScores, singles: list[bool], standard: Standard | None
) -> dict[str, Any]:
    """results[i] as `rewardsmith score` writes them (inference.item_results): {reward} (+ confidence) for a
    single response; {reward_chosen, reward_rejected, p_chosen} (+ confidences) for a pair, p_chosen on the model's
    own scale before any rater map. Under a standard, n_demonstrations: how many demonstrations steered the scores
    (icrm.scoring.steering_demos)."""
    rater, note = None, None
    if body.rater is not None:
        known = state.maps.apply(body.rater, scores.rewards[:1])[1]
        rater = {"id": body.rater, "known": known, "map": "rater" if known else "population"}
        if not known:
            note = f"rater {body.rater!r} is not in {state.calibration}: the population map was used"
    results = item_results(singles, scores, state.maps if body.rater is not None else None, body.rater)
    out: dict[str, Any] = {
        "model": state.name,
        "results": results,
        "rater": rater,
        "standard": _standard_name(state, standard),
        **({"n_demonstrations": len(standard.demos)} if standard is not None else {}),
        **_unsplit(scores),
    }
    if note:
        out["note"] = note
    return out


def _standard_name(state: ServerState, standard: Standard | None) -> str | None:
    if standard is None:
        return None
    for name, known in state.standards.items():
        if known.key == standard.key:
            return name
    return f"ad-hoc:{standard.key[:16]}"


# ----------------------------------------------------------------------------------------------------
# Running


class _Stop(Exception):
    """SIGTERM arrived: the server has answered the requests in flight; leave quietly."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one). ConfigError naming the address otherwise."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY only on such sockets, and without it Nagle's algorithm
    # holds a response's body behind its headers until the client's delayed ACK (about 40 ms a request).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    sock.set_inheritable(True)
    return sock


def timed_protocol(state: ServerState) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline for a request's headers: a connection that opens and sends nothing,
    or starts a request (its first byte, also after an idle keep-alive) and does not complete its headers, within
    header_timeout_s is closed (a partly sent request with a 408 answer). Counted under endpoint `other`."""
    timeout = state.settings.header_timeout_s
    metrics = state.metrics
    body = json.dumps({"error": f"the request headers did not arrive within {timeout:g} s (--header-timeout-s)"})
    answer = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body.encode())
    )

    class HeaderTimedProtocol(H11Protocol):
        header_timer: asyncio.TimerHandle | None = None
        partial = False  # bytes of a request whose headers are not complete yet

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self.header_timer = self.loop.call_later(timeout, self.headers_late)

        def connection_lost(self, exc: Exception | None) -> None:
            self.disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            between = self.cycle is None or self.cycle.response_complete
            if between and self.header_timer is None:
                self.header_timer = self.loop.call_later(timeout, self.headers_late)
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle:  # the headers are in: a request began
                self.disarm()
                self.partial = False
            elif between:
                self.partial = True

        def disarm(self) -> None:
            if self.header_timer is not None:
                self.header_timer.cancel()
                self.header_timer = None

        def headers_late(self) -> None:
            self.header_timer = None
            if self.transport.is_closing() or not (self.cycle is None or self.cycle.response_complete):
                return
            if self.partial:
                self.transport.write(answer)
                metrics.requests.labels("other", "408").inc()
                metrics.errors.labels("other", "read_timeout").inc()
            self.transport.close()

    return HeaderTimedProtocol


class RewardServer(uvicorn.Server):
    """uvicorn's server with the reward server's shutdown (see the module docstring): on SIGTERM / Ctrl-C (or
    should_exit), within settings.shutdown_timeout_s of it, stop accepting; answer new requests 503 with
    `Connection: close`; let the batcher score what it can finish by stop_at (EXIT_MARGIN_S before the end) and
    answer the rest 503; keep idle keep-alive connections open LINGER_S for requests already on their way, then
    close them; stop the worker; return."""

    def __init__(self, config: uvicorn.Config, state: ServerState):
        super().__init__(config)
        self.state = state
        self.exit_requested_at: float | None = None
        self.on_stop: Callable[[], None] | None = None  # called once, when the shutdown begins

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.stop_requested()
        super().handle_exit(sig, frame)

    def stop_requested(self) -> None:
        """Marks when the shutdown began (its deadline counts from then) and calls on_stop, both once."""
        if self.exit_requested_at is None:
            self.exit_requested_at = time.monotonic()
            if self.on_stop is not None:
                self.on_stop()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        grace = self.state.settings.shutdown_timeout_s
        began = self.exit_requested_at if self.exit_requested_at is not None else time.monotonic()
        margin = min(EXIT_MARGIN_S, grace / 4)
        stop_at = began + grace - margin
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        self.state.begin_drain(stop_at)
        connections = self.server_state.connections
        for connection in list(connections):  # a request in flight: its answer closes the connection
            cycle = getattr(connection, "cycle", None)
            if cycle is not None and not cycle.response_complete:
                cycle.keep_alive = False
        linger_until = min(stop_at, time.monotonic() + LINGER_S)
        while (
            not self.force_exit
            and time.monotonic() < stop_at
            and (self.server_state.tasks or time.monotonic() < linger_until)
        ):
            await asyncio.sleep(0.02)
        for connection in list(connections):
            connection.shutdown()  # idle: closed now; one still in a request: closed after its answer
        if self.server_state.tasks:  # still reading a body at stop_at: its connection goes, and the request ends
            for connection in list(connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.close()
            while self.server_state.tasks and time.monotonic() < stop_at + margin / 4:
                await asyncio.sleep(0.02)
        if not self.force_exit:
            await self.lifespan.shutdown()


def make_server(app: FastAPI) -> RewardServer:
    """The uvicorn server that runs a build_app app: its protocol with header deadlines and its shutdown."""
    state: ServerState = app.state.server
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", http=timed_protocol(state))
    return RewardServer(config, state)


def run_server(
    model_dir: str | Path,
    settings: ServeConfig | None = None,
    calibration: str | Path | None = None,
    on_ready: Callable[[str], None] | None = None,
    on_stop: Callable[[], None] | None = None,
) -> None:
    """Claims settings.host:port (so a port in use fails at once, before the model loads), loads the model and
    serves until SIGTERM or Ctrl-C (RewardServer.shutdown), then returns. on_ready(url) is called once the model
    is loaded and the server about to answer (the URL holds the real port when port is 0); on_stop() once the
    shutdown begins (it may take up to settings.shutdown_timeout_s)."""
    settings = settings if settings is not None else ServeConfig()
    settings.validate()
    sock = bind_socket(settings.host, settings.port)
    try:
        sock.listen(2048)  # connections made while the model loads wait for it
        app = build_app(model_dir, settings, calibration)
        server = make_server(app)
        server.on_stop = on_stop
        host, port = sock.getsockname()[:2]
        in_main = threading.current_thread() is threading.main_thread()

        def stop(_signum: int, _frame: Any) -> None:
            raise _Stop

        # uvicorn re-raises the signal it stopped on once it has shut down; this handler turns that into a return.
        # Installed before on_ready says the server is up, so that a SIGTERM at once is a clean stop too.
        previous = signal.signal(signal.SIGTERM, stop) if in_main else None
        try:
            if on_ready is not None:
                shown = f"[{host}]" if ":" in host else host
                on_ready(f"http://{shown}:{port}")
            server.run(sockets=[sock])
        except (KeyboardInterrupt, _Stop):
            server.stop_requested()  # a signal before uvicorn took the signals over is said all the same
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, previous)
    finally:
        sock.close()
