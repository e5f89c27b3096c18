"""How the reward server runs: the listening socket, uvicorn's h11 protocol with a deadline for a request's
headers, the app's lifespan (the scoring worker starts and stops with it) and the graceful shutdown.

On SIGTERM or Ctrl-C (RewardServer.shutdown) the server stops accepting connections, answers every request that
arrives on an open connection with 503 + Retry-After + `Connection: close`, scores what it can finish within
--shutdown-timeout-s, answers the rest 503 too, closes the idle keep-alive connections and exits within the
timeout.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from rewardsmith.errors import ConfigError
from rewardsmith.serve.state import ServerState

LINGER_S = 0.5  # on shutdown, how long idle keep-alive connections stay open to answer a request already sent
EXIT_MARGIN_S = 2.0  # of the shutdown timeout (at most a quarter of it), kept for exiting once all is answered


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


def lifespan(state: ServerState) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the scoring worker starts with it; at its end the queue is scored until the shutdown's
    stop_at (under another server than RewardServer: settings.shutdown_timeout_s from now), the worker joined and
    the tokenizer thread let go."""

    @asynccontextmanager
    async def span(_: FastAPI) -> AsyncIterator[None]:
        batcher = state.batcher
        batcher.start()
        yield
        # RewardServer.shutdown has answered every request by now; under another server, score what is queued.
        stop_at = state.stop_at if state.stop_at is not None else time.monotonic() + state.settings.shutdown_timeout_s
        batcher.close(stop_at)
        await asyncio.to_thread(batcher.join, max(0.0, stop_at - time.monotonic()) + EXIT_MARGIN_S / 8)
        state.tokenizer.shutdown(wait=False)

    return span


def serve_until_stopped(
    app: FastAPI,
    sock: socket.socket,
    on_ready: Callable[[str], None] | None = None,
    on_stop: Callable[[], None] | None = None,
) -> None:
    """Serves a build_app app on a listening socket until SIGTERM or Ctrl-C (RewardServer.shutdown), then returns.
    on_ready(url) is called just before the server answers; on_stop() once the shutdown begins."""
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
