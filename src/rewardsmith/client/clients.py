"""The synchronous and asyncio clients and GRPO reward functions: one core (_ClientCore: the settings, and each
method once, as the plan of the Calls it sends and what their results become), the twins only sending, waiting
and gathering (rewardsmith.client.requests decides what an answer means)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import httpx

from rewardsmith.client.requests import (
    Answer,
    Call,
    Exchange,
    RetryPolicy,
    RewardClientError,
    check_number,
    check_penalty,
    parse_urls,
    penalised,
    read_any,
    read_object,
    read_results,
    read_rewards,
    read_standard,
    response_items,
    score_body,
    trl_text,
)

T = TypeVar("T")
P = ParamSpec("P")
M = TypeVar("M", bound=Callable[..., Any])


class _ClientCore:
    """What both clients share: their settings (the URLs and their rotation, headers, chunking, the RetryPolicy;
    the arguments: see RewardClient) and the Calls each method makes; the twins only send them. A pickled
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
        self.timeout = float(check_number("timeout", timeout, least=1e-3))
        self.policy = RetryPolicy(retries, backoff_s, max_retry_after_s, max_retry_seconds)
        self.max_items_per_request = check_number("max_items_per_request", max_items_per_request, 1, whole=True)
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
    ) -> list[Call]:
        """One /v1/score call per chunk of items; each reads to its chunk's results."""
        return [
            Call(
                "/v1/score",
                score_body(items[a:b], rater, standard, demonstrations),
                partial(read_results, items=items[a:b], start=a),
            )
            for a, b in self.chunks(len(items))
        ]

    def get_reward_calls(self, queries: Sequence[str], prompts: Sequence[str] | None) -> list[Call]:
        """One /get_reward call per chunk of queries; each reads to its chunk's rewards."""
        if prompts is not None and len(prompts) != len(queries):
            raise RewardClientError(f"{len(prompts)} prompts for {len(queries)} queries")
        return [
            Call(
                "/get_reward",
                {"query": list(queries[a:b]), "prompts": None if prompts is None else list(prompts[a:b])},
                partial(read_rewards, n=b - a, start=a),
            )
            for a, b in self.chunks(len(queries))
        ]

    def standard_calls(self, demonstrations: Sequence[dict[str, Any]], standard_id: str | None) -> list[Call]:
        """One /v1/standards call per server (standards live per server); each reads to the standard's id."""
        body: dict[str, Any] = {"demonstrations": list(demonstrations)}
        if standard_id is not None:
            body["id"] = standard_id
        return [Call("/v1/standards", body, read_standard, url) for url in self.urls]

    def health_calls(self) -> list[Call]:
        return [Call("/health", None, read_object, url, retry=False) for url in self.urls]

    # The methods both twins have, without their I/O: each twin sends a plan's calls and finishes their results
    # (_blocking, _awaiting), under the plan's name less "_plan", with its parameters and docstring.

    def post_plan(self, path: str, body: dict[str, Any], url: str | None = None) -> _Plan[Any]:
        """POSTs `body` to `path` (on `url`, else the next server in turn, each retry on the next one); the JSON
        reply."""
        return _Plan([Call(path, body, read_any, url)], _only)

    def score_plan(
        self,
        items: Sequence[dict[str, Any]],
        rater: str | None = None,
        standard: str | None = None,
        demonstrations: Sequence[dict[str, Any]] | None = None,
    ) -> _Plan[list[dict[str, float]]]:
        """/v1/score results of {prompt, response} or {prompt, chosen, rejected} items, in order."""
        return _Plan(self.score_calls(items, rater, standard, demonstrations), _joined)

    def rewards_plan(
        self,
        prompts: Sequence[Any],
        responses: Sequence[Any],
        rater: str | None = None,
        standard: str | None = None,
        sd_penalty: float = 0.0,
    ) -> _Plan[list[float]]:
        """The reward of each (prompt, response); with sd_penalty, less sd_penalty times its uncertainty (an
        ensemble's reward_sd)."""
        check_penalty(sd_penalty)
        calls = self.score_calls(response_items(prompts, responses), rater, standard, None)
        return _Plan(calls, lambda results: penalised(_joined(results), sd_penalty))

    def get_reward_plan(self, queries: Sequence[str], prompts: Sequence[str] | None = None) -> _Plan[list[float]]:
        """OpenRLHF's endpoint: rewards of full prompt + response strings."""
        return _Plan(self.get_reward_calls(queries, prompts), _joined)


@dataclass(frozen=True)
class _Plan(Generic[T]):
    """A client method without its I/O: the calls it sends, and what their results (in call order) become."""

    calls: list[Call]
    finish: Callable[[list[Any]], T]


def _joined(parts: Sequence[list[T]]) -> list[T]:
    return [x for part in parts for x in part]


def _only(results: list[T]) -> T:
    return results[0]


def _as_method(method: M, plan: Callable[..., Any]) -> M:
    """`method` named, documented and (for help() and inspect) with the parameters of the client method `plan`
    describes: score_plan -> score."""
    method.__name__ = method.__qualname__ = plan.__name__.removesuffix("_plan")
    method.__doc__ = plan.__doc__
    signature = inspect.signature(plan).replace(return_annotation=inspect.Signature.empty)
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method


def _blocking(plan: Callable[Concatenate[_ClientCore, P], _Plan[T]]) -> Callable[Concatenate[RewardClient, P], T]:
    """RewardClient's method of `plan`: its calls sent (concurrently when there are several), their results
    finished."""

    def method(self: RewardClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        planned = plan(self, *args, **kwargs)
        return planned.finish(self._gather(planned.calls))

    return _as_method(method, plan)


def _awaiting(
    plan: Callable[Concatenate[_ClientCore, P], _Plan[T]],
) -> Callable[Concatenate[AsyncRewardClient, P], Coroutine[Any, Any, T]]:
    """AsyncRewardClient's method of `plan`, as _blocking's, awaited."""

    async def method(self: AsyncRewardClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        planned = plan(self, *args, **kwargs)
        return planned.finish(await self._gather(planned.calls))

    return _as_method(method, plan)


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

    def _send(self, url: str, call: Call) -> Answer:
        try:
            return self._http.request(call.method, url + call.path, json=call.body)
        except httpx.RequestError as exc:
            return exc

    def _exchange(self, call: Call) -> Any:
        exchange = Exchange(call, self.policy, self.next_url)
        while (wait := exchange.take(self._send(exchange.url, call))) is not None:
            time.sleep(wait)
        return exchange.result

    def _gather(self, calls: list[Call]) -> list[Any]:
        """Each call's result, in order (concurrently when there are several)."""
        return [self._exchange(calls[0])] if len(calls) == 1 else list(self._pool.map(self._exchange, calls))

    post = _blocking(_ClientCore.post_plan)
    score = _blocking(_ClientCore.score_plan)
    rewards = _blocking(_ClientCore.rewards_plan)
    get_reward = _blocking(_ClientCore.get_reward_plan)

    def get(self, path: str, url: str) -> Any:
        """GETs `path` from one server, once; the JSON reply."""
        return self._exchange(Call(path, None, read_any, url, retry=False))

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

    async def _send(self, url: str, call: Call) -> Answer:
        try:
            return await self._client().request(call.method, url + call.path, json=call.body)
        except httpx.RequestError as exc:
            return exc

    async def _exchange(self, call: Call) -> Any:
        exchange = Exchange(call, self.policy, self.next_url)
        while (wait := exchange.take(await self._send(exchange.url, call))) is not None:
            await asyncio.sleep(wait)
        return exchange.result

    async def _gather(self, calls: list[Call]) -> list[Any]:
        return list(await asyncio.gather(*(self._exchange(call) for call in calls)))

    post = _awaiting(_ClientCore.post_plan)
    score = _awaiting(_ClientCore.score_plan)
    rewards = _awaiting(_ClientCore.rewards_plan)
    get_reward = _awaiting(_ClientCore.get_reward_plan)

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
