"""What a client call's HTTP requests are, without I/O: server URLs, what each request sends (Call), how an
answer is judged, read and retried (Exchange, RetryPolicy), and the readers of a rewardsmith server's replies. The
clients (rewardsmith.client.clients) only send, wait and gather."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from rewardsmith.errors import RewardsmithError, one_line

log = logging.getLogger(__name__)

ENDPOINT_SUFFIXES = ("/get_reward", "/classify", "/pooling", "/predict", "/v1/score")
RETRY_STATUS = (502, 503, 504)
MAX_BACKOFF_S = 8.0
PAIR_FIELDS = ("reward_chosen", "reward_rejected", "p_chosen")  # what a pair's result must hold; a single: reward

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


def check_number(name: str, value: Any, least: float = 0.0, whole: bool = False, infinite: bool = False) -> Any:
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
        check_number("retries", self.retries, whole=True)
        check_number("backoff_s", self.backoff_s)
        check_number("max_retry_after_s", self.max_retry_after_s)
        check_number("max_retry_seconds", self.max_retry_seconds, infinite=True)

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
class Call:
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


class Exchange:
    """A call's attempts, without I/O: `url` is the server the next attempt goes to (call.url, else next_url()'s,
    each retry on the next one); take(answer) judges what it brought back. The twins send and wait; this decides."""

    def __init__(self, call: Call, policy: RetryPolicy, next_url: Callable[[], str]):
        self.call, self.next_url = call, next_url
        self.policy = policy if call.retry else replace(policy, retries=0)
        self.attempts = 0
        self.started = time.monotonic()
        self.url = call.url or next_url()
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
        self.url = self.call.url or self.next_url()
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


def read_standard(reply: Any) -> str:
    standard = _field(reply, "standard")
    if not isinstance(standard, str):
        raise _BadReply(f"`standard` is {standard!r}, not an id")
    return standard


def read_object(reply: Any) -> dict[str, Any]:
    if not isinstance(reply, dict):
        raise _BadReply(f"expected a JSON object, got {type(reply).__name__}")
    return reply


def read_any(reply: Any) -> Any:
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
    return float(check_number("sd_penalty", sd_penalty))


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
