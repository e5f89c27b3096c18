"""The reward server: a FastAPI app over one ScoringEngine and its Batcher, run by uvicorn.

Endpoints (docs/serve.md has request and response examples):
    POST /get_reward       OpenRLHF remote reward model (`--remote_rm_url http://host:port/get_reward`)
    POST /classify         vLLM classify (verl's reward loop sends `input` with `activation: false`)
    POST /pooling          vLLM pooling: the reward as a 1-element list per text
    POST /predict          text-embeddings-inference predict
    POST /v1/score         native: single responses or pairs, rater maps, ICRM demonstrations or standards
    POST /v1/standards     register demonstrations under an id (their ICRM context is computed once)
    GET  /health, /v1/models, /metrics, /v1/monitors

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

The pieces: state.py (ServerState: what the routes share, and how a request is scored), gate.py (the middleware
every request passes before its body is read, and the one-line errors), routes.py (the endpoints and their
responses), lifecycle.py (socket, protocol, lifespan, shutdown). This module assembles them (build_app) and runs
the result (run_server).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI

from rewardsmith.errors import ConfigError
from rewardsmith.serve.config import ServeConfig
from rewardsmith.serve.engine import Batcher, ScoringEngine
from rewardsmith.serve.gate import Gate, add_error_handlers
from rewardsmith.serve.lifecycle import bind_socket, lifespan, make_server, serve_until_stopped
from rewardsmith.serve.metrics import ServeMetrics
from rewardsmith.serve.monitors import HackingMonitor
from rewardsmith.serve.routes import add_routes
from rewardsmith.serve.state import ServerState

__all__ = ["bind_socket", "build_app", "make_server", "model_name", "read_api_key", "run_server"]


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
        engine = _load_engine(model_dir, settings)
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
        HackingMonitor(settings.monitor_window, metrics=metrics, rules=settings.monitor)
        if settings.monitor_window
        else None,
    )
    app = FastAPI(title="rewardsmith reward server", lifespan=lifespan(state))
    app.state.server = state
    app.add_middleware(Gate, state=state)
    add_error_handlers(app)
    add_routes(app, state)
    return app


def _load_engine(model_dir: str | Path, settings: ServeConfig) -> ScoringEngine:
    return ScoringEngine.load(
        model_dir,
        settings.precision,
        settings.max_batch_tokens,
        settings.max_padding,
        settings.max_standards,
        settings.template,
        settings.max_length,
        settings.trust_remote_code,
    )


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
        serve_until_stopped(build_app(model_dir, settings, calibration), sock, on_ready, on_stop)
    finally:
        sock.close()
