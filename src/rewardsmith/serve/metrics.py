"""Prometheus metrics of one server, on its own CollectorRegistry (several apps in one process do not collide).

Requests by endpoint and status, latency per endpoint, errors by kind, texts scored verbatim (not read back into
turns) per endpoint, and per scoring round: requests merged, texts, tokens, time in the queue and time in the
model. A request whose client went away before its answer is counted with status 499 (as nginx logs it) and kind
`disconnected`, whatever the app would have answered."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
TOKEN_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


# The kind of a failed request by its status; `overloaded` vs `shutting_down` (both 503) is told by the request.
KIND_OF_STATUS = {
    400: "validation",
    401: "auth",
    404: "not_found",
    405: "method_not_allowed",
    408: "read_timeout",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "validation",
    499: "disconnected",
    503: "overloaded",
    504: "timeout",
}
ERROR_KINDS = (
    "validation",
    "auth",
    "not_found",
    "method_not_allowed",
    "read_timeout",
    "conflict",
    "too_large",
    "unsupported_media_type",
    "disconnected",
    "overloaded",
    "shutting_down",
    "timeout",
    "internal",
    "client",
)


def error_kind(status: int) -> str:
    """The kind /metrics counts a failed request under, from its status (5xx not listed: internal)."""
    return KIND_OF_STATUS.get(status, "internal" if status >= 500 else "client")


class ServeMetrics:
    """The metrics of one app. `render()` is the /metrics body (Prometheus text format)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "rewardsmith_requests", "HTTP requests by endpoint and status code", ["endpoint", "status"], registry=r
        )
        self.latency = Histogram(
            "rewardsmith_request_seconds",
            "time from request to response, per endpoint",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "rewardsmith_errors",
            "failed requests by kind (" + ", ".join(ERROR_KINDS) + ")",
            ["endpoint", "kind"],
            registry=r,
        )
        self.queue_seconds = Histogram(
            "rewardsmith_queue_seconds",
            "time a request waited before its scoring round started",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.round_seconds = Histogram(
            "rewardsmith_round_seconds",
            "time of one scoring round in the model (encoding and forward passes)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.round_requests = Histogram(
            "rewardsmith_batch_requests", "requests merged into one scoring round", buckets=SIZE_BUCKETS, registry=r
        )
        self.round_texts = Histogram(
            "rewardsmith_batch_texts", "texts scored in one round", buckets=SIZE_BUCKETS, registry=r
        )
        self.round_tokens = Histogram(
            "rewardsmith_batch_tokens", "tokens scored in one round", buckets=TOKEN_BUCKETS, registry=r
        )
        self.texts = Counter("rewardsmith_texts_scored", "texts scored", registry=r)
        self.verbatim = Counter(
            "rewardsmith_texts_verbatim",
            "texts scored as they came, per endpoint: one rendered string that could not be read back into turns "
            "by the model's template (the response names them)",
            ["endpoint"],
            registry=r,
        )
        self.nonfinite = Counter(
            "rewardsmith_nonfinite_rewards",
            "texts whose reward was not a finite number (NaN or infinite): their request is answered 422 naming them",
            registry=r,
        )
        self.waiting = Gauge("rewardsmith_queue_texts", "texts queued or being scored", registry=r)
        from rewardsmith.serve.monitors import RULES, STATS

        self.monitor = {
            name: Gauge(f"rewardsmith_monitor_{name}", f"reward-hacking monitor over its window: {name}", registry=r)
            for name in STATS
        }
        self.monitor_warnings = Counter(
            "rewardsmith_monitor_warnings",
            "times a reward-hacking warning started firing (" + ", ".join(RULES) + ")",
            ["rule"],
            registry=r,
        )

    def observe_round(
        self, n_requests: int, queue_seconds: list[float], n_texts: int, n_tokens: int, seconds: float
    ) -> None:
        """One scoring round: the requests it took texts from, the queue time of each request it served first,
        its texts, tokens and model time."""
        for waited in queue_seconds:
            self.queue_seconds.observe(waited)
        self.round_requests.observe(n_requests)
        self.round_texts.observe(n_texts)
        self.round_tokens.observe(n_tokens)
        self.round_seconds.observe(seconds)
        self.texts.inc(n_texts)

    def render(self) -> bytes:
        return generate_latest(self.registry)
