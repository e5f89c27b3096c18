"""Clients of `rewardsmith serve`, light enough for any training process: httpx and the standard library only
(no torch).

    client = RewardClient("http://a:8000,http://b:8000", api_key="...")
    client.rewards(["What is 2+2?"], ["4"])                        # -> [1.73]
    client.score([{"prompt": "hi", "chosen": "hello", "rejected": "go away"}], rater="17")

Several URLs (a list, or one comma-separated string as OpenRLHF takes them) are used round robin: a call is
cut into one chunk per server (or more, of at most `max_items_per_request` items) sent concurrently, and the
results are put back in order. A connection error, a timeout or a 502 / 503 / 504 answer is retried on the
next server after a backoff (RetryPolicy: a 503's Retry-After is honoured up to `max_retry_after_s`), up to
`retries` times and while `max_retry_seconds` have not passed; any other refusal raises RewardClientError with
the server's one-line message at once. So does a reply that is not a rewardsmith server's (not JSON, a field
missing, a count that does not match the request, a reward that is null or not finite), naming the URL.

GRPOReward / AsyncGRPOReward are TRL GRPOTrainer reward functions backed by the servers:
`reward(prompts=..., completions=..., **kwargs) -> list[float]`, prompts and completions as plain text or as
{role, content} message lists (the conversational form), read by the server as `rewardsmith score` reads a
prompt and a response. Clients and reward functions pickle (TRL's asynchronous GRPO trainer sends its reward
functions to other processes): what pickles is their settings; each copy opens its own connections.

One implementation serves the synchronous and the asyncio twins: what a call sends, how an answer is judged and
read, and when it is retried live here without I/O (_Call, _Exchange, RetryPolicy, _ClientCore, _GRPOCore); the
twins only send, wait and gather.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import httpx

from rewardsmith.errors import RewardsmithError, one_line

log = logging.getLogger(__name__)

ENDPOINT_SUFFIXES = ("/get_reward", "/classify", "/pooling", "/predict", "/v1/score")
RETRY_STATUS = (502, 503, 504)
MAX_BACKOFF_S = 8.0
PAIR_FIELDS = ("reward_chosen", "reward_rejected", "p_chosen")  # what a pair's result must hold; a single: reward

T = TypeVar("T")
Answer = httpx.Response | httpx.RequestError  # what one attempt brings back: a response, or why none came


class RewardClientError(RewardsmithError):
    """A request the server refused or answered with something that is not a rewardsmith reply (status: its HTTP
    status), no server answered after every retry (status None), or a client argument or input is invalid (status
    None)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _BadReply(Exception):
    """What is wrong with a server's reply (the exchange names the URL)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_number(name: str, value: Any, least: float = 0.0, whole: bool = False, infinite: bool = False) -> Any:
    """value itself; RewardClientError in one line unless it is a number (a whole one if `whole`) >= least, finite
    unless `infinite`."""
    kind = "a whole number" if whole else "a number" if infinite else "a finite number"
    number = isinstance(value, int) and not isinstance(value, bool) if whole else _is_number(value)
    if not number or math.isnan(value) or (math.isinf(value) and not infinite) or value < least:
        raise RewardClientError(f"{name} {value!r}: must be {kind} >= {least:g}")
    return value


def _check_url(part: str, url: str) -> None:
    """RewardClientError naming `part` unless url is http(s)://host[:port][/path]."""
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018  (raises ValueError on a port that is not a number in 0..65535)
    except ValueError as exc:
        raise RewardClientError(f"server URL {part.strip()!r}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
        raise RewardClientError(
            f"server URL {part.strip()!r}: not http://host:port or https://host (no query or fragment)"
        )


def parse_urls(urls: str | Sequence[str]) -> list[str]:
    """Base URLs from a list or a comma-separated string; a trailing endpoint path (OpenRLHF's
    `.../get_reward`) and slashes are dropped. RewardClientError when there is none, or one is not
    http(s)://host[:port][/path]."""
    parts = urls.split(",") if isinstance(urls, str) else list(urls)
    out = []
    for part in parts:
        if not isinstance(part, str):
            raise RewardClientError(f"server URL {part!r}: not a string")
        url = part.strip().rstrip("/")
        for suffix in ENDPOINT_SUFFIXES:
            if url.endswith(suffix):
                url = url[: -len(suffix)]
        if url:
            _check_url(part, url)
            out.append(url)
    if not out:
        raise RewardClientError(f"no server URL in {urls!r}")
    return out


@dataclass(frozen=True)
class RetryPolicy:
    """When a failed attempt is tried again, and after how long. retries: further attempts after the first;
    backoff_s: the first wait, doubling per attempt up to MAX_BACKOFF_S; max_retry_after_s: the most a server's
    Retry-After is honoured for (a longer one is capped to it, and the cap logged); max_retry_seconds: no attempt
    starts later than this after the call's first (so a call takes at most this plus one request's timeout)."""

    retries: int = 5
    backoff_s: float = 0.25
    max_retry_after_s: float = 30.0
    max_retry_seconds: float = 300.0

    def __post_init__(self) -> None:
        _check_number("retries", self.retries, whole=True)
        _check_number("backoff_s", self.backoff_s)
        _check_number("max_retry_after_s", self.max_retry_after_s)
        _check_number("max_retry_seconds", self.max_retry_seconds, infinite=True)

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after attempt `attempt` (0 the first) failed: the server's Retry-After, capped at
        max_retry_after_s, else backoff_s * 2^attempt, capped at MAX_BACKOFF_S."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        return min(self.backoff_s * 2 ** min(attempt, 32), MAX_BACKOFF_S)

    def stop(self, attempts: int, elapsed: float, wait: float) -> str | None:
        """Why no further attempt follows `attempts` made over `elapsed` seconds when the next would wait `wait`
        seconds first; None while one is due."""
        if attempts > self.retries:
            return f"no answer after {_attempts(attempts)} in {elapsed:.1f} s"
        if elapsed + wait > self.max_retry_seconds:
            return (
                f"no answer within max_retry_seconds {self.max_retry_seconds:g} ({_attempts(attempts)} in {elapsed:.1f}"
                f" s, the next due after {wait:g} s more)"
            )
        return None


def _attempts(n: int) -> str:
    return f"{n} attempt" + "s" * (n != 1)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After header asks for (delay-seconds, or an HTTP date less `now`, Unix seconds); None when
    absent or not understood."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


@dataclass(frozen=True)
class _Call:
    """One HTTP request of a client call, without its I/O. body None: a GET. read: the decoded JSON reply ->
    the result, raising _BadReply when it is not what a rewardsmith server sends. url: this server only (else
    the next in turn, each retry on the next one). retry: whether failures are tried again."""

    path: str
    body: dict[str, Any] | None
    read: Callable[[Any], Any]
    url: str | None = None
    retry: bool = True

    @property
    def method(self) -> str:
        return "GET" if self.body is None else "POST"


class _Exchange:
    """A call's attempts, without I/O: `url` is the server the next attempt goes to; take(answer) judges what it
    brought back. The twins send and wait; this decides."""

    def __init__(self, core: _ClientCore, call: _Call):
        self.core, self.call = core, call
        self.policy = core.policy if call.retry else replace(core.policy, retries=0)
        self.attempts = 0
        self.started = time.monotonic()
        self.url = call.url or core.next_url()
        self.result: Any = None

    def take(self, answer: Answer) -> float | None:
        """None when the call is done (`result` holds the read reply); else the seconds to wait before the next
        attempt (to `url`, moved on). Raises RewardClientError for a refusal, a reply that is not rewardsmith's,
        or when no attempt is left."""
        where = self.url + self.call.path
        self.attempts += 1
        if isinstance(answer, httpx.Response) and answer.is_success:
            self.result = _read(where, answer, self.call.read)
            return None
        if isinstance(answer, httpx.Response):
            problem = f"{answer.status_code} {_error_message(answer)}"
            if answer.status_code not in RETRY_STATUS:
                raise RewardClientError(f"{where}: {problem}", answer.status_code)
            asked = retry_after_seconds(answer.headers.get("retry-after"))
        else:
            problem, asked = one_line(f"{type(answer).__name__}: {answer}"), None
        wait = self.policy.wait(self.attempts - 1, asked)
        if asked is not None and wait < asked:
            log.warning("%s: Retry-After %g s capped at max_retry_after_s %g s", where, asked, wait)
        reason = self.policy.stop(self.attempts, time.monotonic() - self.started, wait)
        if reason is not None:
            raise RewardClientError(f"{reason}; last: {where}: {problem}")
        self.url = self.call.url or self.core.next_url()
        return wait


def _read(where: str, answer: httpx.Response, read: Callable[[Any], Any]) -> Any:
    """read(the answer's JSON); RewardClientError naming `where` when it is not JSON or not what read expects."""
    try:
        reply = answer.json()
    except ValueError:
        kind = answer.headers.get("content-type", "no content type")
        raise RewardClientError(
            f"{where}: not a rewardsmith reply: not JSON ({kind}: {one_line(answer.text, 60)!r})", answer.status_code
        ) from None
    try:
        return read(reply)
    except _BadReply as bad:
        raise RewardClientError(f"{where}: not a rewardsmith reply: {bad}", answer.status_code) from None


def _error_message(response: httpx.Response) -> str:
    if response.is_redirect:
        return f"redirect to {response.headers.get('location', '?')} (give the URL it points to)"
    try:
        body = response.json()
    except ValueError:
        return one_line(response.text)
    return one_line(str(body.get("error", body)) if isinstance(body, dict) else str(body))


# ------------------------------------------------------------------------------------- reading replies


def _field(reply: Any, key: str) -> Any:
    if not isinstance(reply, dict):
        raise _BadReply(f"expected a JSON object with `{key}`, got {type(reply).__name__}")
    if key not in reply:
        raise _BadReply(f"no `{key}` field (it has: {', '.join(map(str, reply)) or 'nothing'})")
    return reply[key]


def _listed(reply: Any, key: str, n: int, what: str) -> list[Any]:
    """reply[key], a list of n entries (one per `what` sent)."""
    values = _field(reply, key)
    if not isinstance(values, list):
        raise _BadReply(f"`{key}` is a {type(values).__name__}, not a list")
    if len(values) != n:
        raise _BadReply(f"{len(values)} {key} for {n} {what}")
    return values


def _finite(value: Any, what: str) -> float:
    if not _is_number(value) or not math.isfinite(value):
        raise _BadReply(f"{what} is {value!r}, not a finite number")
    return float(value)


def read_results(reply: Any, items: Sequence[dict[str, Any]], start: int = 0) -> list[dict[str, float]]:
    """A /v1/score reply's results for `items` (the call's items start..start+len(items)-1): one object of
    finite numbers per item, holding `reward` for a {prompt, response} item and PAIR_FIELDS for a pair. Raises
    _BadReply naming the call's item index."""
    results = _listed(reply, "results", len(items), "items")
    for k, (item, result) in enumerate(zip(items, results, strict=True)):
        where = f"item {start + k}"
        if not isinstance(result, dict):
            raise _BadReply(f"{where}: result is {type(result).__name__}, not an object")
        for key in ("reward",) if "response" in item else PAIR_FIELDS:
            if key not in result:
                raise _BadReply(f"{where}: no `{key}` in its result")
        for key, value in result.items():
            _finite(value, f"{where}: {key}")
    return results


def read_rewards(reply: Any, n: int, start: int = 0) -> list[float]:
    """A /get_reward reply's n rewards (of the call's queries start..start+n-1), finite numbers; _BadReply
    naming the query index otherwise."""
    return [_finite(v, f"query {start + k}: reward") for k, v in enumerate(_listed(reply, "rewards", n, "queries"))]


def _read_standard(reply: Any) -> str:
    standard = _field(reply, "standard")
    if not isinstance(standard, str):
        raise _BadReply(f"`standard` is {standard!r}, not an id")
    return standard


def _read_object(reply: Any) -> dict[str, Any]:
    if not isinstance(reply, dict):
        raise _BadReply(f"expected a JSON object, got {type(reply).__name__}")
    return reply


def _read_any(reply: Any) -> Any:
    return reply


# ------------------------------------------------------------------------------------- what calls send


def score_body(
    items: Sequence[dict[str, Any]],
    rater: str | None,
    standard: str | None,
    demonstrations: Sequence[dict[str, Any]] | None,
) -> dict[str, Any]:
    """A /v1/score request body (options left out when not given)."""
    body: dict[str, Any] = {"items": list(items)}
    for key, value in (("rater", rater), ("standard", standard), ("demonstrations", demonstrations)):
        if value is not None:
            body[key] = list(value) if key == "demonstrations" else value
    return body


def check_penalty(sd_penalty: float) -> float:
    """sd_penalty itself; RewardClientError unless it is a finite number at least 0."""
    return float(_check_number("sd_penalty", sd_penalty))


def penalised(results: Sequence[dict[str, float]], sd_penalty: float) -> list[float]:
    """Each single-response result's reward, less sd_penalty times its reward_sd (an ensemble's uncertainty:
    reward - lambda sd). RewardClientError when sd_penalty is set and the server's model returns no reward_sd."""
    if check_penalty(sd_penalty) == 0:
        return [r["reward"] for r in results]
    if any("reward_sd" not in r for r in results):
        raise RewardClientError(
            f"sd_penalty {sd_penalty:g}: the server's model returns no reward_sd (serve an ensemble: `rewardsmith "
            "ensemble`)"
        )
    return [r["reward"] - sd_penalty * r["reward_sd"] for r in results]


def response_items(prompts: Sequence[Any], responses: Sequence[Any]) -> list[dict[str, Any]]:
    if len(prompts) != len(responses):
        raise RewardClientError(f"{len(prompts)} prompts for {len(responses)} responses")
    return [{"prompt": p, "response": r} for p, r in zip(prompts, responses, strict=True)]


def trl_text(value: Any, field: str) -> str:
    """The text of a TRL prompt or completion: a string, or a non-empty list of {role, content} messages (the
    last message's content). RewardClientError naming `field` (e.g. completions[3]) for anything else: a
    message without a role or text content would otherwise be scored as empty or refused under another index."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple) or not value:
        got = "an empty list" if isinstance(value, list | tuple) else type(value).__name__
        raise RewardClientError(f"{field}: expected text or a list of {{role, content}} messages, got {got}")
    for m, message in enumerate(value):
        if not isinstance(message, dict):
            raise RewardClientError(f"{field}: message {m} is {type(message).__name__}, not a {{role, content}} dict")
        for key in ("role", "content"):
            if not isinstance(message.get(key), str):
                got = "missing" if key not in message else f"{type(message[key]).__name__}, not text"
                raise RewardClientError(f"{field}: message {m}: `{key}` {got}")
    return str(value[-1]["content"])


class _ClientCore:
    """What both clients share: their settings (the URLs and their rotation, headers, chunking, the RetryPolicy;
    the arguments: see RewardClient) and the _Calls each method makes; the twins only send them. A pickled
    client holds its settings only (connections are made again where it is unpickled)."""

    def __init__(
        self,
        urls: str | Sequence[str],
        timeout: float = 120.0,
        retries: int = 5,
        api_key: str | None = None,
        backoff_s: float = 0.25,
        max_items_per_request: int = 256,
        max_retry_after_s: float = 30.0,
        max_retry_seconds: float = 300.0,
    ):
        self.urls = parse_urls(urls)
        self.timeout = float(_check_number("timeout", timeout, least=1e-3))
        self.policy = RetryPolicy(retries, backoff_s, max_retry_after_s, max_retry_seconds)
        self.max_items_per_request = _check_number("max_items_per_request", max_items_per_request, 1, whole=True)
        if api_key is not None and not isinstance(api_key, str):
            raise RewardClientError(f"api_key: must be a string, got {type(api_key).__name__}")
        self.api_key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._turn = itertools.count()
        self._open()

    def _open(self) -> None:
        """Sets up the twin's I/O (its HTTP client)."""

    @property
    def retries(self) -> int:
        return self.policy.retries

    @property
    def backoff_s(self) -> float:
        return self.policy.backoff_s

    def __getstate__(self) -> dict[str, Any]:
        return {
            "urls": self.urls,
            "timeout": self.timeout,
            "api_key": self.api_key,
            "max_items_per_request": self.max_items_per_request,
            **asdict(self.policy),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        _ClientCore.__init__(self, **state)

    def next_url(self) -> str:
        return self.urls[next(self._turn) % len(self.urls)]

    def chunks(self, n: int) -> list[tuple[int, int]]:
        """[start, end) ranges cutting n items into at least one chunk per server, each within the cap."""
        if n == 0:
            return []
        parts = min(n, max(len(self.urls), math.ceil(n / self.max_items_per_request)))
        size = math.ceil(n / parts)
        return [(i, min(i + size, n)) for i in range(0, n, size)]

    def score_calls(
        self,
        items: Sequence[dict[str, Any]],
        rater: str | None,
        standard: str | None,
        demonstrations: Sequence[dict[str, Any]] | None,
    ) -> list[_Call]:
        """One /v1/score call per chunk of items; each reads to its chunk's results."""
        return [
            _Call(
                "/v1/score",
                score_body(items[a:b], rater, standard, demonstrations),
                partial(read_results, items=items[a:b], start=a),
            )
            for a, b in self.chunks(len(items))
        ]

    def get_reward_calls(self, queries: Sequence[str], prompts: Sequence[str] | None) -> list[_Call]:
        """One /get_reward call per chunk of queries; each reads to its chunk's rewards."""
        if prompts is not None and len(prompts) != len(queries):
            raise RewardClientError(f"{len(prompts)} prompts for {len(queries)} queries")
        return [
            _Call(
                "/get_reward",
                {"query": list(queries[a:b]), "prompts": None if prompts is None else list(prompts[a:b])},
                partial(read_rewards, n=b - a, start=a),
            )
            for a, b in self.chunks(len(queries))
        ]

    def standard_calls(self, demonstrations: Sequence[dict[str, Any]], standard_id: str | None) -> list[_Call]:
        """One /v1/standards call per server (standards live per server); each reads to the standard's id."""
        body: dict[str, Any] = {"demonstrations": list(demonstrations)}
        if standard_id is not None:
            body["id"] = standard_id
        return [_Call("/v1/standards", body, _read_standard, url) for url in self.urls]

    def health_calls(self) -> list[_Call]:
        return [_Call("/health", None, _read_object, url, retry=False) for url in self.urls]


def _joined(parts: Sequence[list[T]]) -> list[T]:
    return [x for part in parts for x in part]


class RewardClient(_ClientCore):
    """Synchronous client. urls: a list or a comma-separated string of http(s) base URLs; timeout: seconds per
    HTTP request; retries: further attempts after the first; api_key: sent as a bearer token; backoff_s: the
    first retry's wait (doubling); max_items_per_request: items (or queries) per request at most;
    max_retry_after_s: the longest Retry-After honoured (a longer one is capped, and logged); max_retry_seconds:
    no retry starts later than this after the call's first attempt (see RetryPolicy). RewardClientError at once
    for an argument out of range or a URL that is not http(s)://host[:port]."""

    _http: httpx.Client
    _pool: ThreadPoolExecutor

    def _open(self) -> None:
        self._http = httpx.Client(timeout=self.timeout, headers=self.headers)
        self._pool = ThreadPoolExecutor(max_workers=max(4, 2 * len(self.urls)), thread_name_prefix="reward-client")

    def _send(self, url: str, call: _Call) -> Answer:
        try:
            return self._http.request(call.method, url + call.path, json=call.body)
        except httpx.RequestError as exc:
            return exc

    def _exchange(self, call: _Call) -> Any:
        exchange = _Exchange(self, call)
        while (wait := exchange.take(self._send(exchange.url, call))) is not None:
            time.sleep(wait)
        return exchange.result

    def _gather(self, calls: list[_Call]) -> list[Any]:
        """Each call's result, in order (concurrently when there are several)."""
        return [self._exchange(calls[0])] if len(calls) == 1 else list(self._pool.map(self._exchange, calls))

    def post(self, path: str, body: dict[str, Any], url: str | None = None) -> Any:
        """POSTs `body` to `path` (on `url`, else the next server in turn, each retry on the next one); the JSON
        reply."""
        return self._exchange(_Call(path, body, _read_any, url))

    def get(self, path: str, url: str) -> Any:
        """GETs `path` from one server, once; the JSON reply."""
        return self._exchange(_Call(path, None, _read_any, url, retry=False))

    def score(
        self,
        items: Sequence[dict[str, Any]],
        rater: str | None = None,
        standard: str | None = None,
        demonstrations: Sequence[dict[str, Any]] | None = None,
    ) -> list[dict[str, float]]:
        """/v1/score results of {prompt, response} or {prompt, chosen, rejected} items, in order."""
        return _joined(self._gather(self.score_calls(items, rater, standard, demonstrations)))

    def rewards(
        self,
        prompts: Sequence[Any],
        responses: Sequence[Any],
        rater: str | None = None,
        standard: str | None = None,
        sd_penalty: float = 0.0,
    ) -> list[float]:
        """The reward of each (prompt, response); with sd_penalty, less sd_penalty times its uncertainty (an
        ensemble's reward_sd)."""
        check_penalty(sd_penalty)
        return penalised(self.score(response_items(prompts, responses), rater, standard), sd_penalty)

    def get_reward(self, queries: Sequence[str], prompts: Sequence[str] | None = None) -> list[float]:
        """OpenRLHF's endpoint: rewards of full prompt + response strings."""
        return _joined(self._gather(self.get_reward_calls(queries, prompts)))

    def register_standard(self, demonstrations: Sequence[dict[str, Any]], standard_id: str | None = None) -> str:
        """Registers demonstrations on every server (standards live per server); returns the standard id."""
        return str(self._gather(self.standard_calls(demonstrations, standard_id))[0])

    def health(self) -> list[dict[str, Any]]:
        """/health of every server."""
        return self._gather(self.health_calls())

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._http.close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncRewardClient(_ClientCore):
    """The asyncio client (same arguments as RewardClient). Its httpx client is made in the event loop that
    first uses it, and made again if a later call runs in another loop."""

    _http: httpx.AsyncClient | None
    _loop: asyncio.AbstractEventLoop | None

    def _open(self) -> None:
        self._http, self._loop = None, None

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http, self._loop = httpx.AsyncClient(timeout=self.timeout, headers=self.headers), loop
        return self._http

    async def _send(self, url: str, call: _Call) -> Answer:
        try:
            return await self._client().request(call.method, url + call.path, json=call.body)
        except httpx.RequestError as exc:
            return exc

    async def _exchange(self, call: _Call) -> Any:
        exchange = _Exchange(self, call)
        while (wait := exchange.take(await self._send(exchange.url, call))) is not None:
            await asyncio.sleep(wait)
        return exchange.result

    async def _gather(self, calls: list[_Call]) -> list[Any]:
        return list(await asyncio.gather(*(self._exchange(call) for call in calls)))

    async def post(self, path: str, body: dict[str, Any], url: str | None = None) -> Any:
        """As RewardClient.post, awaiting."""
        return await self._exchange(_Call(path, body, _read_any, url))

    async def score(
        self,
        items: Sequence[dict[str, Any]],
        rater: str | None = None,
        standard: str | None = None,
        demonstrations: Sequence[dict[str, Any]] | None = None,
    ) -> list[dict[str, float]]:
        """As RewardClient.score."""
        return _joined(await self._gather(self.score_calls(items, rater, standard, demonstrations)))

    async def rewards(
        self,
        prompts: Sequence[Any],
        responses: Sequence[Any],
        rater: str | None = None,
        standard: str | None = None,
        sd_penalty: float = 0.0,
    ) -> list[float]:
        """As RewardClient.rewards."""
        check_penalty(sd_penalty)
        return penalised(await self.score(response_items(prompts, responses), rater, standard), sd_penalty)

    async def get_reward(self, queries: Sequence[str], prompts: Sequence[str] | None = None) -> list[float]:
        """As RewardClient.get_reward."""
        return _joined(await self._gather(self.get_reward_calls(queries, prompts)))

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


ClientT = TypeVar("ClientT", RewardClient, AsyncRewardClient)


class _GRPOCore(Generic[ClientT]):
    """What both GRPO reward functions share. client: a client, or its URLs (a client with default settings is
    made); rater: rewards on this rater's scale; standard: an in-context model steered by this registered
    standard; empty_reward: the reward of an empty completion, which is not sent (the server refuses empty
    texts; None: TRL reads it as NaN, a missing reward); name: how TRL labels the function's logged rewards;
    sd_penalty: each reward less this times its uncertainty (an ensemble served: reward - lambda sd)."""

    client_class: type[ClientT]

    def __init__(
        self,
        client: ClientT | str | Sequence[str],
        rater: str | None = None,
        standard: str | None = None,
        empty_reward: float | None = None,
        name: str = "rewardsmith_reward",
        sd_penalty: float = 0.0,
    ):
        if isinstance(client, _ClientCore) and not isinstance(client, self.client_class):
            raise RewardClientError(
                f"{type(self).__name__} takes a {self.client_class.__name__} or URLs, not a {type(client).__name__}"
            )
        self.client: ClientT = client if isinstance(client, _ClientCore) else self.client_class(client)
        self.rater = rater
        self.standard = standard
        self.empty_reward = empty_reward
        self.sd_penalty = check_penalty(sd_penalty)
        self.__name__ = name  # TRL names a reward function's logged columns by it

    def split(self, prompts: Sequence[Any], completions: Sequence[Any]) -> tuple[list[int], list[Any], list[Any]]:
        """Indices, prompts and completions of the non-empty completions. RewardClientError naming the index of a
        prompt or completion that is neither text nor {role, content} messages."""
        if len(prompts) != len(completions):
            raise RewardClientError(f"{len(prompts)} prompts for {len(completions)} completions")
        for i, prompt in enumerate(prompts):
            trl_text(prompt, f"prompts[{i}]")
        keep = [i for i, c in enumerate(completions) if trl_text(c, f"completions[{i}]").strip()]
        return keep, [prompts[i] for i in keep], [completions[i] for i in keep]

    def merge(self, n: int, keep: list[int], rewards: list[float]) -> list[float | None]:
        out: list[float | None] = [self.empty_reward] * n
        for i, reward in zip(keep, rewards, strict=True):
            out[i] = reward
        return out


class GRPOReward(_GRPOCore[RewardClient]):
    """A TRL GRPOTrainer reward function: each completion's reward from the servers (raw, or on `rater`'s
    scale; an in-context model steered by the registered `standard`). Arguments: see _GRPOCore."""

    client_class = RewardClient

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        keep, kept_prompts, kept_completions = self.split(prompts, completions)
        rewards = self.client.rewards(kept_prompts, kept_completions, self.rater, self.standard, self.sd_penalty)
        return self.merge(len(prompts), keep, rewards)


class AsyncGRPOReward(_GRPOCore[AsyncRewardClient]):
    """GRPOReward as a coroutine: TRL (1.x) runs async reward functions on its own event loop, concurrently
    with the other reward functions."""

    client_class = AsyncRewardClient

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        keep, kept_prompts, kept_completions = self.split(prompts, completions)
        rewards = await self.client.rewards(kept_prompts, kept_completions, self.rater, self.standard, self.sd_penalty)
        return self.merge(len(prompts), keep, rewards)
