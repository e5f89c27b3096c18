"""The reward server: a FastAPI app over one ScoringEngine and its Batcher.

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
"""

from __future__ import annotations

import asyncio
import hmac
import math
import signal
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewardsmith.errors import ConfigError, RewardsmithError, one_line
from rewardsmith.icrm.scoring import demo_key
from rewardsmith.jobs.inference import TextScores as ItemScores
from rewardsmith.jobs.inference import item_results
from rewardsmith.serve.config import ServeConfig
from rewardsmith.serve.engine import (
    Batcher,
    QueueFull,
    ScoringEngine,
    ScoringFailed,
    ServerClosing,
    Standard,
    TextScores,
    check_in_context,
)
from rewardsmith.serve.metrics import ServeMetrics
from rewardsmith.serve.requests import (
    GetRewardRequest,
    PredictRequest,
    RequestError,
    ScoreRequest,
    StandardRequest,
    TextItem,
    TextsRequest,
    check_count,
    demonstrations,
    input_texts,
    invalid,
    predict_texts,
    query_texts,
    score_items,
)
from rewardsmith.stats import sigmoid

ENDPOINTS = ("/get_reward", "/classify", "/pooling", "/predict", "/v1/score", "/v1/standards", "/health",
             "/v1/models", "/metrics")
OPEN_ENDPOINTS = ("/health",)  # answered without an API key (load balancers probe it)
LABEL = "LABEL_0"  # the label transformers gives the one class of a single-logit classifier


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


@dataclass
class ServerState:
    """What the routes share: settings, engine and batcher, metrics, calibration maps and the standards."""

    settings: ServeConfig
    engine: ScoringEngine
    batcher: Batcher
    metrics: ServeMetrics
    name: str
    model_dir: Path
    maps: Any = None
    calibration: str | None = None
    api_key: str | None = None
    standards: dict[str, Standard] = field(default_factory=dict)
    started: int = field(default_factory=lambda: int(time.time()))

    async def score(self, texts: list[TextItem], standard: Standard | None = None) -> TextScores:
        """Scores through the batcher; 503 when the queue is full, 504 after request_timeout_s, 500 when the
        model fails on this request."""
        if not texts and standard is None:
            empty = np.zeros(0)
            return TextScores(empty, empty if self.engine.in_context else None, 0)
        try:
            future = self.batcher.submit(texts, standard)
        except QueueFull:
            raise RequestError(503, f"the server is busy: {self.batcher.waiting} texts are waiting "
                                    f"(--max-queue {self.settings.max_queue}); retry later",
                               {"Retry-After": "1"}) from None
        except ServerClosing:
            raise RequestError(503, "the server is shutting down", {"Retry-After": "1"}) from None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.settings.request_timeout_s)
        except TimeoutError:
            raise RequestError(504, f"no scores within {self.settings.request_timeout_s:g} s "
                                    "(--request-timeout-s)") from None
        except ScoringFailed as exc:
            raise RequestError(500, one_line(str(exc))) from None

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
# Middleware: metrics, API key and body size, before anything reads the body


class Gate:
    """Pure ASGI middleware: times every request and counts it by endpoint and status; answers 401 without the
    API key and 413 for a body over max_body_bytes (declared, or counted as it streams in)."""

    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        started = time.perf_counter()
        status = [500]

        async def send_counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send_counted)
            else:
                await self.app(scope, self._limited(receive), send_counted)
        finally:
            metrics = self.state.metrics
            metrics.requests.labels(endpoint, str(status[0])).inc()
            metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
            if status[0] >= 400:
                metrics.errors.labels(endpoint, error_kind(status[0])).inc()

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = self.state.api_key
        if key is not None and scope["path"] not in OPEN_ENDPOINTS:
            given = headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
                why = "missing" if not given else "wrong"
                return error_response(401, f"{why} API key: send `Authorization: Bearer <key>`",
                                      {"WWW-Authenticate": "Bearer"})
        declared = headers.get("content-length")
        limit = self.state.settings.max_body_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return error_response(413, f"request body of {int(declared)} bytes; the limit is {limit} "
                                       "(--max-body-bytes)")
        return None

    def _limited(self, receive: Receive) -> Receive:
        limit = self.state.settings.max_body_bytes
        seen = [0]

        async def receive_limited() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:  # a body sent without Content-Length (chunked)
                    raise RequestError(413, f"request body over {limit} bytes (--max-body-bytes)")
            return message

        return receive_limited


def error_kind(status: int) -> str:
    kinds = {400: "validation", 401: "auth", 404: "not_found", 405: "not_found", 413: "too_large",
             422: "validation", 503: "overloaded", 504: "timeout"}
    return kinds.get(status, "internal" if status >= 500 else "client")


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": one_line(message)}, status_code=status, headers=headers)


def validation_message(exc: RequestValidationError) -> tuple[int, str]:
    """(status, one line) of FastAPI's validation errors: 400 for a body that is not JSON, else 422 naming the
    first field at fault."""
    errors: list[dict[str, Any]] = [dict(e) for e in exc.errors()]
    first: dict[str, Any] = errors[0] if errors else {"type": "", "loc": (), "msg": "invalid request"}
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "decode error")
        return 400, f"the request body is not valid JSON ({reason})"
    loc = [p for p in first.get("loc", ()) if p != "body"]
    if not loc:
        return 422, ("the request body is missing (send a JSON object)" if kind == "missing"
                     else "the request body must be a JSON object")
    name = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
    message = {"missing": "required field missing", "extra_forbidden": "unknown field"}.get(kind, str(first["msg"]))
    more = {0: "", 1: " (and 1 more problem)"}.get(len(errors) - 1, f" (and {len(errors) - 1} more problems)")
    return 422, f"{name}: {message}{more}"


# ----------------------------------------------------------------------------------------------------
# The app


def build_app(model_dir: str | Path, settings: ServeConfig | None = None, calibration: str | Path | None = None,
              engine: ScoringEngine | None = None) -> FastAPI:
    """The server's FastAPI app for the model saved in `model_dir` (loaded here unless `engine` is given; one
    engine serves one app). calibration: per-rater maps from `rewardsmith calibrate fit`. The scoring worker
    starts and stops with the app's lifespan (uvicorn runs it); shutdown scores what is queued first.
    Raises CheckpointError / ConfigError / DataError on a bad model folder, setting or calibration file."""
    settings = settings if settings is not None else ServeConfig()
    settings.validate()
    api_key = read_api_key(settings.api_key_file) if settings.api_key_file else None
    maps = None
    if calibration is not None:
        from rewardsmith.calibrate.maps import load_maps

        maps = load_maps(calibration)
    if engine is None:
        engine = ScoringEngine.load(model_dir, settings.precision, settings.max_batch_tokens, settings.max_padding,
                                    settings.max_standards, settings.template, settings.max_length,
                                    settings.trust_remote_code)
    metrics = ServeMetrics()
    batcher = Batcher(engine, metrics, settings.max_batch_tokens, settings.max_wait_ms / 1000.0, settings.max_queue)
    state = ServerState(settings, engine, batcher, metrics, model_name(model_dir), Path(model_dir), maps,
                        str(calibration) if calibration is not None else None, api_key)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        yield
        await asyncio.to_thread(batcher.close, settings.shutdown_timeout_s)

    app = FastAPI(title="rewardsmith reward server", lifespan=lifespan, strict_content_type=False)
    app.state.server = state
    app.add_middleware(Gate, state=state)
    _add_error_handlers(app)
    _add_routes(app, state)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def on_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        status, message = validation_message(exc)
        return error_response(status, message)

    @app.exception_handler(HTTPException)
    async def on_http(_: Request, exc: HTTPException) -> JSONResponse:
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


def _usage(tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0, "prompt_tokens_details": None}


UNSPLIT_NOTE = ("texts {} could not be read back into turns by the model's template: each was tokenised whole "
                "and, when too long, cut from its start")


def _unsplit(scores: TextScores) -> dict[str, Any]:
    """What a response says about texts that could not be split into turns (empty when every one was)."""
    if not scores.unsplit:
        return {}
    return {"rewardsmith": {"unsplit": scores.unsplit, "note": UNSPLIT_NOTE.format(scores.unsplit)}}


def _add_routes(app: FastAPI, state: ServerState) -> None:
    max_items = state.settings.max_items

    @app.post("/get_reward")
    async def get_reward(body: GetRewardRequest) -> JSONResponse:
        """OpenRLHF: {"query": [...], "prompts": [...], "labels": [...]} -> rewards (raw), scores (the same
        values, as OpenRLHF's own serve_rm answers), extra_logs."""
        check_count(len(body.query), "query", max_items)
        scores = await state.score(query_texts(body.query, body.prompts))
        rewards = _values(scores, False)
        logs = {"unsplit_texts": [len(scores.unsplit)] * len(rewards)} if scores.unsplit else {}
        return JSONResponse({"rewards": rewards, "scores": rewards, "extra_logs": logs, **_unsplit(scores)})

    @app.post("/classify")
    async def classify(body: TextsRequest) -> JSONResponse:
        """vLLM classify: one entry per text, probs = [reward] (num_classes 1)."""
        texts = input_texts(body)
        check_count(len(texts), "input", max_items)
        scores = await state.score(texts)
        data = [{"index": i, "label": LABEL, "probs": [v], "num_classes": 1}
                for i, v in enumerate(_values(scores, body.wants_activation()))]
        return JSONResponse({"id": f"classify-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()),
                             "model": state.name, "data": data, "usage": _usage(scores.tokens), **_unsplit(scores)})

    @app.post("/pooling")
    async def pooling(body: TextsRequest) -> JSONResponse:
        """vLLM pooling: the pooled output of a reward model is its reward, as a 1-element list per text."""
        texts = input_texts(body)
        check_count(len(texts), "input", max_items)
        scores = await state.score(texts)
        data = [{"index": i, "object": "pooling", "data": [v]}
                for i, v in enumerate(_values(scores, body.wants_activation()))]
        return JSONResponse({"id": f"pool-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()),
                             "model": state.name, "data": data, "usage": _usage(scores.tokens), **_unsplit(scores)})

    @app.post("/predict")
    async def predict(body: PredictRequest) -> JSONResponse:
        """TEI predict: [{score, label}] for one sequence, a list of those for a batch."""
        texts, batched = predict_texts(body.inputs)
        check_count(len(texts), "inputs", max_items)
        scores = await state.score(texts)
        values = _values(scores, body.raw_scores is False)
        predictions = [[{"score": v, "label": LABEL}] for v in values]
        headers = {"X-Rewardsmith-Note": UNSPLIT_NOTE.format(scores.unsplit)} if scores.unsplit else None
        return JSONResponse(predictions if batched else predictions[0], headers=headers)

    @app.post("/v1/score")
    async def score(body: ScoreRequest) -> JSONResponse:
        """Native scoring; see ScoreRequest and docs/serve.md."""
        check_count(len(body.items), "items", max_items)
        if not body.items:
            raise invalid("items", "empty list")
        if body.rater is not None and state.maps is None:
            raise invalid("rater", "this server has no rater maps (start it with --calibration)")
        texts, singles = score_items(body.items)
        standard = state.standard_for(body.standard, body.demonstrations)
        scores = await state.score(texts, standard)
        return JSONResponse(_native_response(state, body, scores, singles, standard))

    @app.post("/v1/standards")
    async def register_standard(body: StandardRequest) -> JSONResponse:
        """Registers demonstrations under an id; their ICRM context is computed now and cached."""
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
            raise RequestError(422, f"id: {len(state.standards)} standards are registered "
                                    f"(--max-standards {state.settings.max_standards})")
        standard = Standard(key, pairs, registered=True)
        await state.score([], standard)
        state.standards[standard_id] = standard
        return JSONResponse({"standard": standard_id, "n_demonstrations": len(pairs)})

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok", "model": state.name, "model_type": state.engine.model_type,
                             "waiting_texts": state.batcher.waiting})

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        loaded = state.engine.loaded
        cfg = loaded.model_config
        card = {"id": state.name, "object": "model", "created": state.started, "owned_by": "rewardsmith",
                "root": str(state.model_dir), "model_type": state.engine.model_type, "model_kind": loaded.kind,
                "kind": loaded.meta.get("kind"), "backbone": cfg.backbone if cfg is not None else None,
                "template": loaded.template, "max_length": loaded.max_length,
                "precision": "bf16" if state.engine.bf16 else "fp32", "calibration": state.calibration,
                "standards": sorted(state.standards)}
        return JSONResponse({"object": "list", "data": [card]})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _native_response(state: ServerState, body: ScoreRequest, scores: TextScores, singles: list[bool],
                     standard: Standard | None) -> dict[str, Any]:
    """results[i] as `rewardsmith score` writes them (jobs.inference.item_results): {reward} (+ confidence) for a
    single response; {reward_chosen, reward_rejected, p_chosen} (+ confidences) for a pair, p_chosen on the model's
    own scale before any rater map."""
    rater, note = None, None
    if body.rater is not None:
        known = state.maps.apply(body.rater, scores.rewards[:1])[1]
        rater = {"id": body.rater, "known": known, "map": "rater" if known else "population"}
        if not known:
            note = f"rater {body.rater!r} is not in {state.calibration}: the population map was used"
    results = item_results(singles, ItemScores(scores.rewards, scores.confidence),
                           state.maps if body.rater is not None else None, body.rater)
    out: dict[str, Any] = {"model": state.name, "results": results, "rater": rater,
                           "standard": _standard_name(state, standard), **_unsplit(scores)}
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
    """SIGTERM arrived: uvicorn has drained the requests in flight; leave quietly."""


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


def run_server(model_dir: str | Path, settings: ServeConfig | None = None, calibration: str | Path | None = None,
               on_ready: Callable[[str], None] | None = None) -> None:
    """Loads the model, listens on settings.host:port and serves until SIGTERM or Ctrl-C, which stop accepting
    connections, finish the requests in flight (up to shutdown_timeout_s) and return. on_ready(url) is called
    once the socket is bound (the URL holds the real port when port is 0)."""
    import uvicorn

    settings = settings if settings is not None else ServeConfig()
    app = build_app(model_dir, settings, calibration)
    sock = bind_socket(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout_s))
    server = uvicorn.Server(config)
    if on_ready is not None:
        shown = f"[{host}]" if ":" in host else host
        on_ready(f"http://{shown}:{port}")
    in_main = threading.current_thread() is threading.main_thread()

    def stop(_signum: int, _frame: Any) -> None:
        raise _Stop

    # uvicorn re-raises the signal it stopped on once it has drained; this handler turns that into a return.
    previous = signal.signal(signal.SIGTERM, stop) if in_main else None
    try:
        server.run(sockets=[sock])
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        sock.close()
        if in_main:
            signal.signal(signal.SIGTERM, previous)

