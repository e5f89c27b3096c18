"""Clients of `rewardsmith serve`, light enough for any training process: httpx and the standard library only
(no torch).

    client = RewardClient("http://a:8000,http://b:8000", api_key="...")
    client.rewards(["What is 2+2?"], ["4"])                        # -> [1.73]
    client.score([{"prompt": "hi", "chosen": "hello", "rejected": "go away"}], rater="17")

Several URLs (a list, or one comma-separated string as OpenRLHF takes them) are used round robin: a call is
cut into one chunk per server (or more, of at most `max_items_per_request` items) sent concurrently, and the
results are put back in order. A connection error, a timeout or a 502 / 503 / 504 answer is retried on the
next server after a backoff (a 503's Retry-After is honoured), up to `retries` times; any other refusal
raises RewardClientError with the server's one-line message at once.

GRPOReward / AsyncGRPOReward are TRL GRPOTrainer reward functions backed by the servers:
`reward(prompts=..., completions=..., **kwargs) -> list[float]`, prompts and completions as plain text or as
{role, content} message lists (the conversational form), read by the server as `rewardsmith score` reads a
prompt and a response. Clients and reward functions pickle (TRL's asynchronous GRPO trainer sends its reward
functions to other processes): what pickles is their settings; each copy opens its own connections.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from rewardsmith.data.schema import message_text
from rewardsmith.errors import RewardsmithError

ENDPOINT_SUFFIXES = ("/get_reward", "/classify", "/pooling", "/predict", "/v1/score")
RETRY_STATUS = (502, 503, 504)
MAX_BACKOFF_S = 8.0


class RewardClientError(RewardsmithError):
    """A request the server refused (status: its HTTP status), or no server answered after every retry
    (status None)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def parse_urls(urls: str | Sequence[str]) -> list[str]:
    """Base URLs from a list or a comma-separated string; a trailing endpoint path (OpenRLHF's
    `.../get_reward`) and slashes are dropped."""
    parts = urls.split(",") if isinstance(urls, str) else list(urls)
    out = []
    for part in parts:
        url = part.strip().rstrip("/")
        for suffix in ENDPOINT_SUFFIXES:
            if url.endswith(suffix):
                url = url[: -len(suffix)]
        if url:
            out.append(url)
    if not out:
        raise RewardClientError(f"no server URL in {urls!r}")
    return out


class _Servers:
    """What both clients share: the URLs and their rotation, headers, chunking and the retry rule. A pickled
    client holds these settings only (connections are made again where it is unpickled)."""

    def __init__(
        self,
        urls: str | Sequence[str],
        timeout: float,
        retries: int,
        api_key: str | None,
        backoff_s: float,
        max_items_per_request: int,
    ):
        self.urls = parse_urls(urls)
        self.timeout = timeout
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_items_per_request = max_items_per_request
        self.api_key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._turn = itertools.count()

    def __getstate__(self) -> dict[str, Any]:
        return {
            "urls": self.urls,
            "timeout": self.timeout,
            "retries": self.retries,
            "api_key": self.api_key,
            "backoff_s": self.backoff_s,
            "max_items_per_request": self.max_items_per_request,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def next_url(self) -> str:
        return self.urls[next(self._turn) % len(self.urls)]

    def chunks(self, n: int) -> list[tuple[int, int]]:
        """[start, end) ranges cutting n items into at least one chunk per server, each within the cap."""
        if n == 0:
            return []
        parts = min(n, max(len(self.urls), math.ceil(n / self.max_items_per_request)))
        size = math.ceil(n / parts)
        return [(i, min(i + size, n)) for i in range(0, n, size)]

    def judge(self, url: str, answer: httpx.Response | httpx.TransportError, attempt: int) -> tuple[bool, Any]:
        """(True, parsed JSON) for a success; (False, seconds to wait) for an error worth retrying. Raises
        RewardClientError for a refusal, or when the last attempt failed."""
        if isinstance(answer, httpx.Response) and answer.status_code < 400:
            return True, answer.json()
        if isinstance(answer, httpx.Response):
            message = _error_message(answer)
            if answer.status_code not in RETRY_STATUS:
                raise RewardClientError(f"{url}: {answer.status_code} {message}", answer.status_code)
            problem = f"{answer.status_code} {message}"
            retry_after = answer.headers.get("retry-after", "")
            wait = float(retry_after) if retry_after.replace(".", "", 1).isdigit() else None
        else:
            problem, wait = f"{type(answer).__name__}: {answer}", None
        if attempt >= self.retries:
            raise RewardClientError(f"no answer after {self.retries + 1} attempts; last: {url}: {problem}")
        return False, wait if wait is not None else min(self.backoff_s * 2**attempt, MAX_BACKOFF_S)


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200]
    return str(body.get("error", body)) if isinstance(body, dict) else str(body)


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
    """sd_penalty itself; RewardClientError when it is negative."""
    if sd_penalty < 0:
        raise RewardClientError(f"sd_penalty {sd_penalty:g}: must be at least 0")
    return sd_penalty


def penalised(results: Sequence[dict[str, float]], sd_penalty: float) -> list[float]:
    """Each single-response result's reward, less sd_penalty times its reward_sd (an ensemble's uncertainty:
    reward - lambda sd). RewardClientError when sd_penalty is set and the server's model returns no reward_sd."""
    if check_penalty(sd_penalty) == 0:
        return [r["reward"] for r in results]
    if results and "reward_sd" not in results[0]:
        raise RewardClientError(
            f"sd_penalty {sd_penalty:g}: the server's model returns no reward_sd (serve an ensemble: `rewardsmith "
            "ensemble`)"
        )
    return [r["reward"] - sd_penalty * r["reward_sd"] for r in results]


def response_items(prompts: Sequence[Any], responses: Sequence[Any]) -> list[dict[str, Any]]:
    if len(prompts) != len(responses):
        raise RewardClientError(f"{len(prompts)} prompts for {len(responses)} responses")
    return [{"prompt": p, "response": r} for p, r in zip(prompts, responses, strict=True)]


class RewardClient(_Servers):
    """Synchronous client. timeout: seconds per HTTP request; retries: further attempts after the first."""

    def __init__(
        self,
        urls: str | Sequence[str],
        timeout: float = 120.0,
        retries: int = 5,
        api_key: str | None = None,
        backoff_s: float = 0.25,
        max_items_per_request: int = 256,
    ):
        super().__init__(urls, timeout, retries, api_key, backoff_s, max_items_per_request)
        self._http = httpx.Client(timeout=timeout, headers=self.headers)
        self._pool = ThreadPoolExecutor(max_workers=max(4, 2 * len(self.urls)), thread_name_prefix="reward-client")

    def post(self, path: str, body: dict[str, Any], url: str | None = None) -> Any:
        """POSTs `body` to `path` (on `url`, else the next server in turn, each retry on the next one)."""
        for attempt in range(self.retries + 1):
            target = url or self.next_url()
            answer: httpx.Response | httpx.TransportError
            try:
                answer = self._http.post(target + path, json=body)
            except httpx.TransportError as exc:
                answer = exc
            done, value = self.judge(target, answer, attempt)
            if done:
                return value
            time.sleep(value)
        raise AssertionError("unreachable: judge raises on the last attempt")

    def get(self, path: str, url: str) -> Any:
        """GETs `path` from one server, once."""
        try:
            response = self._http.get(url + path)
        except httpx.TransportError as exc:
            raise RewardClientError(f"{url}: {type(exc).__name__}: {exc}") from None
        return self.judge(url, response, self.retries)[1]

    def _sharded(self, path: str, n: int, body_of: Any, results_of: Any) -> list[Any]:
        """Sends body_of(start, end) for every chunk concurrently; concatenates results_of(answer)."""
        chunks = self.chunks(n)
        if len(chunks) == 1:
            return list(results_of(self.post(path, body_of(*chunks[0]))))
        futures = [self._pool.submit(self.post, path, body_of(a, b)) for a, b in chunks]
        return [x for future in futures for x in results_of(future.result())]

    def score(
        self,
        items: Sequence[dict[str, Any]],
        rater: str | None = None,
        standard: str | None = None,
        demonstrations: Sequence[dict[str, Any]] | None = None,
    ) -> list[dict[str, float]]:
        """/v1/score results of {prompt, response} or {prompt, chosen, rejected} items, in order."""
        return self._sharded(
            "/v1/score",
            len(items),
            lambda a, b: score_body(items[a:b], rater, standard, demonstrations),
            lambda answer: answer["results"],
        )

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
        return penalised(self.score(response_items(prompts, responses), rater, standard), sd_penalty)

    def get_reward(self, queries: Sequence[str], prompts: Sequence[str] | None = None) -> list[float]:
        """OpenRLHF's endpoint: rewards of full prompt + response strings."""
        return self._sharded(
            "/get_reward",
            len(queries),
            lambda a, b: {"query": list(queries[a:b]), "prompts": None if prompts is None else list(prompts[a:b])},
            lambda answer: answer["rewards"],
        )

    def register_standard(self, demonstrations: Sequence[dict[str, Any]], standard_id: str | None = None) -> str:
        """Registers demonstrations on every server (standards live per server); returns the standard id."""
        body: dict[str, Any] = {"demonstrations": list(demonstrations)}
        if standard_id is not None:
            body["id"] = standard_id
        ids = {self.post("/v1/standards", body, url)["standard"] for url in self.urls}
        return ids.pop()

    def health(self) -> list[dict[str, Any]]:
        """/health of every server."""
        return [self.get("/health", url) for url in self.urls]

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._http.close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncRewardClient(_Servers):
    """The asyncio client (same arguments as RewardClient). Its httpx client is made in the event loop that
    first uses it, and made again if a later call runs in another loop."""

    def __init__(
        self,
        urls: str | Sequence[str],
        timeout: float = 120.0,
        retries: int = 5,
        api_key: str | None = None,
        backoff_s: float = 0.25,
        max_items_per_request: int = 256,
    ):
        super().__init__(urls, timeout, retries, api_key, backoff_s, max_items_per_request)
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http, self._loop = httpx.AsyncClient(timeout=self.timeout, headers=self.headers), loop
        return self._http

    async def post(self, path: str, body: dict[str, Any], url: str | None = None) -> Any:
        """As RewardClient.post, awaiting."""
        http = self._client()
        for attempt in range(self.retries + 1):
            target = url or self.next_url()
            answer: httpx.Response | httpx.TransportError
            try:
                answer = await http.post(target + path, json=body)
            except httpx.TransportError as exc:
                answer = exc
            done, value = self.judge(target, answer, attempt)
            if done:
                return value
            await asyncio.sleep(value)
        raise AssertionError("unreachable: judge raises on the last attempt")

    async def _sharded(self, path: str, n: int, body_of: Any, results_of: Any) -> list[Any]:
        answers = await asyncio.gather(*(self.post(path, body_of(a, b)) for a, b in self.chunks(n)))
        return [x for answer in answers for x in results_of(answer)]

    async def score(
        self,
        items: Sequence[dict[str, Any]],
        rater: str | None = None,
        standard: str | None = None,
        demonstrations: Sequence[dict[str, Any]] | None = None,
    ) -> list[dict[str, float]]:
        """As RewardClient.score."""
        return await self._sharded(
            "/v1/score",
            len(items),
            lambda a, b: score_body(items[a:b], rater, standard, demonstrations),
            lambda answer: answer["results"],
        )

    async def rewards(
        self,
        prompts: Sequence[Any],
        responses: Sequence[Any],
        rater: str | None = None,
        standard: str | None = None,
        sd_penalty: float = 0.0,
    ) -> list[float]:
        """As RewardClient.rewards."""
        return penalised(await self.score(response_items(prompts, responses), rater, standard), sd_penalty)

    async def get_reward(self, queries: Sequence[str], prompts: Sequence[str] | None = None) -> list[float]:
        """As RewardClient.get_reward."""
        return await self._sharded(
            "/get_reward",
            len(queries),
            lambda a, b: {"query": list(queries[a:b]), "prompts": None if prompts is None else list(prompts[a:b])},
            lambda answer: answer["rewards"],
        )

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


class _GRPOItems:
    """The (prompt, completion) items of a GRPO reward call; an empty completion is not sent (the server
    refuses empty texts) and gets `empty_reward` (None: TRL reads it as NaN, a missing reward). name: how TRL
    labels the function's logged rewards; sd_penalty: each reward less this times its uncertainty (an ensemble
    served: reward - lambda sd)."""

    def __init__(
        self, rater: str | None, standard: str | None, empty_reward: float | None, name: str, sd_penalty: float
    ):
        self.rater = rater
        self.standard = standard
        self.empty_reward = empty_reward
        self.sd_penalty = check_penalty(sd_penalty)
        self.__name__ = name  # TRL names a reward function's logged columns by it

    def split(self, prompts: Sequence[Any], completions: Sequence[Any]) -> tuple[list[int], list[Any], list[Any]]:
        """Indices, prompts and completions of the non-empty completions."""
        if len(prompts) != len(completions):
            raise RewardClientError(f"{len(prompts)} prompts for {len(completions)} completions")
        keep = [i for i, c in enumerate(completions) if message_text(c).strip()]
        return keep, [prompts[i] for i in keep], [completions[i] for i in keep]

    def merge(self, n: int, keep: list[int], rewards: list[float]) -> list[float | None]:
        out: list[float | None] = [self.empty_reward] * n
        for i, reward in zip(keep, rewards, strict=True):
            out[i] = reward
        return out


class GRPOReward(_GRPOItems):
    """A TRL GRPOTrainer reward function: each completion's reward from the servers (raw, or on `rater`'s
    scale; an in-context model steered by the registered `standard`)."""

    def __init__(
        self,
        client: RewardClient | str | Sequence[str],
        rater: str | None = None,
        standard: str | None = None,
        empty_reward: float | None = None,
        name: str = "rewardsmith_reward",
        sd_penalty: float = 0.0,
    ):
        super().__init__(rater, standard, empty_reward, name, sd_penalty)
        self.client = client if isinstance(client, RewardClient) else RewardClient(client)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        keep, kept_prompts, kept_completions = self.split(prompts, completions)
        rewards = (
            self.client.rewards(kept_prompts, kept_completions, self.rater, self.standard, self.sd_penalty)
            if keep
            else []
        )
        return self.merge(len(prompts), keep, rewards)


class AsyncGRPOReward(_GRPOItems):
    """GRPOReward as a coroutine: TRL (1.x) runs async reward functions on its own event loop, concurrently
    with the other reward functions."""

    def __init__(
        self,
        client: AsyncRewardClient | str | Sequence[str],
        rater: str | None = None,
        standard: str | None = None,
        empty_reward: float | None = None,
        name: str = "rewardsmith_reward",
        sd_penalty: float = 0.0,
    ):
        super().__init__(rater, standard, empty_reward, name, sd_penalty)
        self.client = client if isinstance(client, AsyncRewardClient) else AsyncRewardClient(client)

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        keep, kept_prompts, kept_completions = self.split(prompts, completions)
        rewards = (
            await self.client.rewards(kept_prompts, kept_completions, self.rater, self.standard, self.sd_penalty)
            if keep
            else []
        )
        return self.merge(len(prompts), keep, rewards)
