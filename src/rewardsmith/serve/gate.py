"""The reward server's gate: what every request passes before a route reads its body, and how a refusal is
answered.

Gate (pure ASGI middleware) times and counts every request by endpoint and status; while the server shuts down it
answers 503 with `Connection: close`; it answers 401 without the API key, 415 for a body not declared JSON, 413
for a body over --max-body-bytes (declared, or counted as it streams in) and 408 for a body not in within
--body-timeout-s. read_json parses a body read through those limits; add_error_handlers turns every error a route
raises into a status code and `{"error": "<one line>"}`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sys
import time
from email.message import Message as MimeHeader
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewardsmith.errors import RewardsmithError, one_line
from rewardsmith.serve.metrics import error_kind
from rewardsmith.serve.requests import RequestError
from rewardsmith.serve.state import CLOSING, RETRY_AFTER, ServerState, client_gone_error

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
KIND_KEY = "rewardsmith.error_kind"  # scope key: the metrics kind of a refusal whose status does not tell it


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
            return error_response(503, CLOSING, RETRY_AFTER)
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


def add_error_handlers(app: FastAPI) -> None:
    """Every error a route raises answered as `{"error": "<one line>"}`: a RequestError (or any HTTPException)
    with its status and headers, a RewardsmithError 422, anything else 500."""

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
