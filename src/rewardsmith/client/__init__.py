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

One implementation serves the synchronous and the asyncio twins: how a request is judged, read and retried lives
in client/requests.py without I/O (Call, Exchange, RetryPolicy, the readers of replies); what each method sends
in client/clients.py (_ClientCore, _GRPOCore); the twins only send, wait and gather.
"""

from rewardsmith.client.clients import AsyncGRPOReward, AsyncRewardClient, ClientT, GRPOReward, RewardClient
from rewardsmith.client.requests import (
    ENDPOINT_SUFFIXES,
    MAX_BACKOFF_S,
    PAIR_FIELDS,
    RETRY_STATUS,
    RetryPolicy,
    RewardClientError,
    check_penalty,
    parse_urls,
    penalised,
    read_results,
    read_rewards,
    response_items,
    retry_after_seconds,
    score_body,
    trl_text,
)

__all__ = [
    "ENDPOINT_SUFFIXES",
    "MAX_BACKOFF_S",
    "PAIR_FIELDS",
    "RETRY_STATUS",
    "AsyncGRPOReward",
    "AsyncRewardClient",
    "ClientT",
    "GRPOReward",
    "RetryPolicy",
    "RewardClient",
    "RewardClientError",
    "check_penalty",
    "parse_urls",
    "penalised",
    "read_results",
    "read_rewards",
    "response_items",
    "retry_after_seconds",
    "score_body",
    "trl_text",
]
