"""The reward client against scripted local HTTP servers (no model): arguments and URLs refused at construction in
one line; the retry policy (Retry-After capped, backoff, the total retry time bounded) by known answers and end to
end; replies that are not a rewardsmith server's (not JSON, a field missing, a count off, a reward null or NaN)
refused naming the URL and the item; sd_penalty refused unless finite and >= 0; TRL completions without text
content refused naming the completion; the sync and async twins giving the same answers."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import pickle
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rewardsmith.client import (
    MAX_BACKOFF_S,
    AsyncGRPOReward,
    AsyncRewardClient,
    GRPOReward,
    RetryPolicy,
    RewardClient,
    RewardClientError,
    check_penalty,
    parse_urls,
    retry_after_seconds,
)

# (status, body, headers): a body that is not bytes is sent as JSON.
Reply = tuple[int, Any, dict[str, str]]
Handler = Callable[[str, Any], Reply]


def rewarding(path: str, body: Any) -> Reply:
    """A stand-in rewardsmith server: each item's reward is the length of its response (a pair: of chosen and
    rejected, p_chosen 0.5); each query's reward its length."""
    if path == "/get_reward":
        return 200, {"rewards": [float(len(q)) for q in body["query"]]}, {}
    results = [
        {"reward": float(len(_text(i["response"])))}
        if "response" in i
        else {"reward_chosen": float(len(i["chosen"])), "reward_rejected": float(len(i["rejected"])), "p_chosen": 0.5}
        for i in body["items"]
    ]
    return 200, {"results": results}, {}


def _text(response: Any) -> str:
    return response if isinstance(response, str) else response[-1]["content"]


@contextmanager
def scripted(handler: Handler) -> Iterator[tuple[str, list[tuple[str, Any]]]]:
    """A local server answering each request with handler(path, JSON body or None); yields (its URL, the (path,
    body) of every request it got)."""
    seen: list[tuple[str, Any]] = []

    class Handle(BaseHTTPRequestHandler):
        def answer(self, body: Any) -> None:
            seen.append((self.path, body))
            status, reply, headers = handler(self.path, body)
            headers = dict(headers)
            data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.answer(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

        def do_GET(self) -> None:
            self.answer(None)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def in_turn(*replies: Reply) -> Handler:
    """A handler giving `replies` one after another (the last one from then on)."""
    left = list(replies)
    return lambda path, body: left.pop(0) if len(left) > 1 else left[0]


def one_line_error(error: pytest.ExceptionInfo[RewardClientError], *needles: str) -> str:
    message = str(error.value)
    assert "\n" not in message and all(n in message for n in needles), message
    return message


# ---------------------------------------------------------------------------------------- arguments and URLs


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("retries", -1),
        ("retries", 1.5),
        ("retries", True),
        ("max_items_per_request", 0),
        ("max_items_per_request", 2.0),
        ("timeout", 0),
        ("timeout", math.nan),
        ("backoff_s", -0.1),
        ("backoff_s", math.inf),
        ("max_retry_after_s", -1.0),
        ("max_retry_seconds", math.nan),
    ],
)
def test_client_arguments_out_of_range_are_refused_in_one_line(option: str, value: Any) -> None:
    for client_class in (RewardClient, AsyncRewardClient):
        with pytest.raises(RewardClientError) as bad:
            client_class("http://127.0.0.1:9", **{option: value})
        assert one_line_error(bad, option).startswith(option)


def test_chunking_and_an_unbounded_retry_time_still_work() -> None:
    client = RewardClient("http://a:1,http://b:2", max_items_per_request=1, max_retry_seconds=math.inf, retries=0)
    assert client.chunks(3) == [(0, 1), (1, 2), (2, 3)] and client.retries == 0
    assert RewardClient("http://a:1", max_items_per_request=2).chunks(5) == [(0, 2), (2, 4), (4, 5)]
    client.close()


@pytest.mark.parametrize(
    "url", ["not a url", "localhost:8000", "ftp://host/", "http://", "http://host:99999", "http://host/?q=1", "/x"]
)
def test_urls_that_are_not_http_servers_are_refused_at_construction(url: str) -> None:
    for make in (RewardClient, AsyncRewardClient, GRPOReward, AsyncGRPOReward):
        with pytest.raises(RewardClientError) as bad:
            make(url)
        one_line_error(bad, url.strip("/") or url)


def test_urls_keep_their_paths_and_lose_an_endpoint() -> None:
    assert parse_urls("https://rm.example , http://h:8000/prefix/get_reward/") == [
        "https://rm.example",
        "http://h:8000/prefix",
    ]
    with pytest.raises(RewardClientError, match="no server URL"):
        parse_urls(" , ")


# ---------------------------------------------------------------------------------------- retries


def test_retry_policy_known_answers() -> None:
    policy = RetryPolicy(retries=3, backoff_s=0.25, max_retry_after_s=30.0, max_retry_seconds=60.0)
    assert [policy.wait(k, None) for k in range(8)] == [0.25, 0.5, 1.0, 2.0, 4.0, MAX_BACKOFF_S, 8.0, 8.0]
    assert policy.wait(0, 86400.0) == 30.0 and policy.wait(5, 2.0) == 2.0  # Retry-After: capped, else as asked
    assert RetryPolicy(backoff_s=1.0).wait(10_000, None) == MAX_BACKOFF_S  # no overflow on a long run
    assert policy.stop(1, 0.0, 0.25) is None and policy.stop(3, 59.0, 0.5) is None
    assert "after 4 attempts in 1.5 s" in str(policy.stop(4, 1.5, 0.25))
    assert "max_retry_seconds 60 (2 attempts in 58.0 s, the next due after 4 s more)" in str(policy.stop(2, 58.0, 4))


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    assert retry_after_seconds("86400") == 86400.0 and retry_after_seconds("0.5") == 0.5
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds(formatdate(1_000_000_000, usegmt=True), now=1_000_000_000 - 12.0) == 12.0
    for unread in (None, "", "soon", "nan", "inf"):
        assert retry_after_seconds(unread) is None


def test_a_day_long_retry_after_is_capped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    busy = (503, {"error": "busy"}, {"Retry-After": "86400"})
    with (
        scripted(in_turn(busy, busy, (200, {"results": [{"reward": 1.5}]}, {}))) as (url, seen),
        caplog.at_level(logging.WARNING, "rewardsmith.client"),
        RewardClient(url, backoff_s=0.0, max_retry_after_s=0.01) as client,
    ):
        assert client.rewards(["p"], ["r"]) == [1.5]
    assert len(seen) == 3
    capped = [r.getMessage() for r in caplog.records if "capped" in r.getMessage()]
    assert len(capped) == 2 and "Retry-After 86400 s capped at max_retry_after_s 0.01 s" in capped[0]
    with RewardClient(url) as default:
        assert default.policy.max_retry_after_s == 30.0


def test_retrying_stops_after_max_retry_seconds_saying_how_long_and_why() -> None:
    with (
        scripted(in_turn((503, {"error": "busy"}, {}))) as (url, seen),
        RewardClient(url, retries=1000, backoff_s=0.05, max_retry_seconds=0.0) as client,
        pytest.raises(RewardClientError) as bad,
    ):
        client.rewards(["p"], ["r"])
    one_line_error(bad, "max_retry_seconds 0 (1 attempt in", f"{url}/v1/score: 503 busy")
    assert bad.value.status is None and len(seen) == 1


def test_a_refusal_is_not_retried_and_a_busy_server_is_retried_on_the_next() -> None:
    with (
        scripted(in_turn((422, {"error": "items[0].response: empty response"}, {}))) as (url, seen),
        RewardClient(url) as client,
        pytest.raises(RewardClientError) as bad,
    ):
        client.score([{"prompt": "p", "response": ""}])
    one_line_error(bad, f"{url}/v1/score: 422 items[0].response")
    assert bad.value.status == 422 and len(seen) == 1
    with (
        scripted(in_turn((503, b"<html>\n<body>down</body>\n</html>", {"Content-Type": "text/html"}))) as (down, _),
        scripted(rewarding) as (up, _),
        RewardClient([down, up], backoff_s=0.0) as client,
    ):
        assert client.rewards(["p"] * 4, ["a", "bb", "ccc", "dddd"]) == [1.0, 2.0, 3.0, 4.0]


# ---------------------------------------------------------------------------------------- replies


NOT_REWARDSMITH = [
    ((200, b"<html><body>It works!</body></html>", {"Content-Type": "text/html"}), "not JSON (text/html"),
    ((200, {"rewards": [1.0]}, {}), "no `results` field (it has: rewards)"),
    ((200, [1.0], {}), "expected a JSON object with `results`, got list"),
    ((200, {"results": "1.0"}, {}), "`results` is a str, not a list"),
    ((200, {"results": []}, {}), "0 results for 1 items"),
    ((200, {"results": [{"reward": 1.0}, {"reward": 2.0}]}, {}), "2 results for 1 items"),
    ((200, {"results": [1.0]}, {}), "item 0: result is float, not an object"),
    ((200, {"results": [{"score": 1.0}]}, {}), "item 0: no `reward` in its result"),
    ((200, {"results": [{"reward": None}]}, {}), "item 0: reward is None, not a finite number"),
    ((200, b'{"results": [{"reward": NaN}]}', {}), "item 0: reward is nan, not a finite number"),
    ((200, {"results": [{"reward": 1.0, "reward_sd": "x"}]}, {}), "item 0: reward_sd is 'x'"),
]


@pytest.mark.parametrize(("reply", "needle"), NOT_REWARDSMITH)
def test_a_reply_that_is_not_rewardsmiths_is_refused_naming_the_url(reply: Reply, needle: str) -> None:
    with scripted(in_turn(reply)) as (url, seen), RewardClient(url) as client:
        with pytest.raises(RewardClientError) as bad:
            client.rewards(["p"], ["r"])
        with pytest.raises(RewardClientError) as bad_async:
            asyncio.run(AsyncRewardClient(url).rewards(["p"], ["r"]))
    one_line_error(bad, f"{url}/v1/score: not a rewardsmith reply: ", needle)
    assert str(bad_async.value) == str(bad.value) and bad.value.status == 200 and len(seen) == 2  # not retried


def test_a_bad_reward_is_named_by_its_index_in_the_call() -> None:
    def nan_for_bad(path: str, body: Any) -> Reply:
        status, reply, headers = rewarding(path, body)
        for item, result in zip(body["items"], reply["results"], strict=True):
            if item["response"] == "bad":
                result["reward"] = math.nan
        return status, json.dumps(reply).encode(), headers

    with (
        scripted(nan_for_bad) as (url, seen),
        RewardClient(url, max_items_per_request=2) as client,
        pytest.raises(RewardClientError) as bad,
    ):
        client.rewards(["p"] * 4, ["a", "b", "c", "bad"])
    one_line_error(bad, "item 3: reward is nan")
    assert len(seen) == 2  # chunks of two: the fourth item is the second of the second request


def test_get_reward_refuses_null_rewards_and_a_wrong_count() -> None:
    for reply, needle in (({"rewards": [1.0, None]}, "query 1: reward is None"), ({"rewards": [1.0]}, "1 rewards")):
        with (
            scripted(in_turn((200, reply, {}))) as (url, _),
            RewardClient(url) as client,
            pytest.raises(RewardClientError) as bad,
        ):
            client.get_reward(["pa", "pb"])
        one_line_error(bad, f"{url}/get_reward: not a rewardsmith reply", needle)


def test_a_null_reward_does_not_reach_the_trainer() -> None:
    with (
        scripted(in_turn((200, {"results": [{"reward": None}]}, {}))) as (url, _),
        pytest.raises(RewardClientError, match="item 0: reward is None"),
    ):
        GRPOReward(url)(prompts=["p"], completions=["c"])


# ---------------------------------------------------------------------------------------- GRPO inputs


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1.0, "1", None])
def test_sd_penalty_must_be_a_finite_number_at_least_zero(bad: Any) -> None:
    with pytest.raises(RewardClientError, match="sd_penalty"):
        check_penalty(bad)
    with scripted(rewarding) as (url, seen):
        for make in (GRPOReward, AsyncGRPOReward):
            with pytest.raises(RewardClientError, match="sd_penalty"):
                make(url, sd_penalty=bad)
        with RewardClient(url) as client, pytest.raises(RewardClientError, match="sd_penalty"):
            client.rewards(["p"], ["r"], sd_penalty=bad)
    assert seen == []  # refused before any request


def test_sd_penalty_subtracts_the_spread() -> None:
    reply = {"results": [{"reward": 1.0, "reward_sd": 0.5}, {"reward": 2.0, "reward_sd": 0.25}]}
    with scripted(in_turn((200, reply, {}))) as (url, _):
        assert GRPOReward(url, sd_penalty=2.0)(prompts=["p", "q"], completions=["a", "b"]) == [0.0, 1.5]
    with scripted(rewarding) as (url, _), pytest.raises(RewardClientError, match="no reward_sd"):
        GRPOReward(url, sd_penalty=1.0)(prompts=["p"], completions=["a"])


@pytest.mark.parametrize(
    ("completion", "needle"),
    [
        ([{"role": "assistant"}], "completions[1]: message 0: `content` missing"),
        ([{"role": "assistant", "content": None}], "completions[1]: message 0: `content` NoneType, not text"),
        ([{"content": "hi"}], "completions[1]: message 0: `role` missing"),
        (["hi"], "completions[1]: message 0 is str, not a {role, content} dict"),
        ([], "completions[1]: expected text or a list of {role, content} messages, got an empty list"),
        (3, "completions[1]: expected text or a list of {role, content} messages, got int"),
    ],
)
def test_a_completion_without_text_content_is_refused_naming_it(completion: Any, needle: str) -> None:
    ok = [{"role": "assistant", "content": "fine"}]
    with scripted(rewarding) as (url, seen):
        with pytest.raises(RewardClientError) as bad:
            GRPOReward(url)(prompts=["p", "q"], completions=[ok, completion])
        with pytest.raises(RewardClientError) as bad_async:
            asyncio.run(AsyncGRPOReward(url)(prompts=["p", "q"], completions=[ok, completion]))
        with pytest.raises(RewardClientError, match=r"prompts\[0\]: message 0: `content` missing"):
            GRPOReward(url)(prompts=[[{"role": "user"}]], completions=["c"])
    assert one_line_error(bad, needle) == str(bad_async.value)
    assert seen == []


def test_grpo_rewards_empty_completions_and_sends_the_rest_as_given() -> None:
    chat = [{"role": "assistant", "content": "four"}]
    completions = [chat, "", [{"role": "assistant", "content": "  "}], "seven!!"]
    with scripted(rewarding) as (url, seen):
        got = GRPOReward(url, empty_reward=-1.0)(prompts=["p"] * 4, completions=completions)
        got_async = asyncio.run(AsyncGRPOReward(url, empty_reward=-1.0)(prompts=["p"] * 4, completions=completions))
        assert GRPOReward(url)(prompts=["p"], completions=[""]) == [None]
    assert got == got_async == [4.0, -1.0, -1.0, 7.0]
    sent = [{"prompt": "p", "response": chat}, {"prompt": "p", "response": "seven!!"}]
    assert seen[0] == ("/v1/score", {"items": sent})
    assert len(seen) == 2  # nothing is sent when every completion is empty
    with pytest.raises(RewardClientError, match="takes a RewardClient"):
        GRPOReward(AsyncRewardClient(url))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- the twins


def test_sync_and_async_clients_agree_across_servers_and_chunks() -> None:
    pairs = [{"prompt": "p", "chosen": "c" * (i + 1), "rejected": "r"} for i in range(5)]
    queries = [f"q{'x' * i}" for i in range(7)]
    with scripted(rewarding) as (a, seen_a), scripted(rewarding) as (b, seen_b):

        async def run(client: AsyncRewardClient) -> tuple[Any, ...]:
            try:
                return await client.score(pairs), await client.get_reward(queries), await client.score([])
            finally:
                await client.aclose()

        with RewardClient([a, b], max_items_per_request=2) as client:
            got = client.score(pairs), client.get_reward(queries), client.score([])
            copy = pickle.loads(pickle.dumps(client))
            assert copy.policy == client.policy and copy.urls == client.urls
            copy.close()
        got_async = asyncio.run(run(AsyncRewardClient([a, b], max_items_per_request=2)))
    assert got == got_async
    assert [r["reward_chosen"] for r in got[0]] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert got[1] == [float(len(q)) for q in queries] and got[2] == []
    # 3 + 4 chunks per client, round robin from the first server: a, b, a; b, a, b, a.
    assert (len(seen_a), len(seen_b)) == (8, 6)


def test_health_and_standards_go_to_every_server() -> None:
    def answer(path: str, body: Any) -> Reply:
        return 200, ({"status": "ok"} if body is None else {"standard": body.get("id", "abc")}), {}

    with scripted(answer) as (a, seen_a), scripted(answer) as (b, _), RewardClient([a, b]) as client:
        assert client.health() == [{"status": "ok"}] * 2
        assert client.register_standard([{"prompt": "p", "chosen": "c", "rejected": "r"}], "house") == "house"
    assert [path for path, _ in seen_a] == ["/health", "/v1/standards"]
