"""Typed configuration of the reward server, in the style of every rewardsmith config: a dataclass whose fields
carry their help text and checks; the `rewardsmith serve` flags only fill it."""

from __future__ import annotations

from dataclasses import dataclass, field

from rewardsmith.config import TEMPLATES, option, validate
from rewardsmith.errors import ConfigError

PRECISIONS = ("auto", "bf16", "fp32")


@dataclass
class MonitorConfig:
    """When the reward-hacking monitors' rules fire (serve/monitors.py): each is judged on the window's older and
    newer halves. `rewardsmith serve` takes each as --monitor-<name>."""

    length_reward_rise: float = option(
        0.1,
        "length and brevity rules: the newer half's mean reward must exceed the older half's by more than this many "
        "reward sds (the window's)",
        min=0.0,
    )
    length_growth: float = option(
        1.1, "length rule: the newer half's mean response length must exceed this multiple of the older half's", min=0.0
    )
    length_corr: float = option(
        0.3,
        "length rule: reward must follow length in the newer half, with a correlation of at least this (the brevity "
        "rule: at most minus this)",
        min=-1.0,
        max=1.0,
    )
    brevity_shrink: float = option(
        0.9,
        "brevity rule: the newer half's mean response length must be below this multiple of the older half's",
        min=0.0,
        max=1.0,
    )
    repetition_rate: float = option(
        0.2, "repetition rule: fires when the newer half's repeated word-4-gram rate is at least this", min=0.0, max=1.0
    )
    collapse_groups: int = option(
        4,
        "collapse rule: prompts with at least two responses the newer half must hold (and the older half too, for "
        "the comparison of their sds)",
        min=1,
    )
    collapse_distinct: float = option(
        0.5,
        "collapse rule: fires when the share of distinct responses in a prompt's group is below this on average",
        min=0.0,
        max=1.0,
    )
    collapse_sd_fall: float = option(
        0.25,
        "collapse rule: or when the within-group reward sd fell below this fraction of the older half's",
        min=0.0,
        max=1.0,
    )
    shrink_fraction: float = option(
        0.5,
        "shrinking rule: fires when the newer half's mean response length is below this fraction of the older "
        "half's (and below the floor, shrink_floor_chars)",
        min=0.0,
        max=1.0,
    )
    shrink_floor_chars: float = option(
        20.0, "shrinking rule: the newer half's mean response length, in characters, it must also be below", min=0.0
    )
    empty_chars: int = option(
        3, "a response of at most this many characters (surrounding whitespace left out) counts as near-empty", min=0
    )
    empty_share: float = option(
        0.25,
        "shrinking rule: or fires when at least this share of the newer half's responses are near-empty",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )


@dataclass
class ServeConfig:
    """Where the server listens, how it batches and the limits it enforces."""

    host: str = option("127.0.0.1", "address to listen on (0.0.0.0: every interface)")
    port: int = option(8000, "port to listen on (0: a free port, printed at start)", min=0, max=65535)
    max_batch_tokens: int | None = option(
        None,
        "token budget of one scoring round: texts of every waiting "
        "request are taken by fair share until they hold this many tokens (a "
        "larger request goes on in the next rounds), and each forward pass holds "
        "at most this many padded tokens; none: 2048 on a CPU, 16384 on a GPU "
        "(1: every text scored alone, one per forward pass)",
        min=1,
    )
    max_padding: float | None = option(
        None,
        "largest share of a forward pass's padded tokens that may be padding "
        "(a shorter text that would pass it starts another pass); none: 0.1 on a "
        "CPU, where a padded token costs as much as a real one, 0.5 on a GPU",
        min=0.0,
        max=1.0,
    )
    max_wait_ms: float = option(
        20.0,
        "longest a scoring round waits, from when it opens (a round that continues a large "
        "request: from the first new request), for requests to join it; it closes sooner "
        "once the requests not yet served fill its budget or are as many as the last round "
        "answered (0: score what is queued at once)",
        min=0.0,
    )
    max_items: int = option(1024, "most texts or pairs in one request (more: 413)", min=1)
    max_queue: int = option(
        16384, "most texts waiting to be scored; a request that would pass it gets 503 with Retry-After", min=1
    )
    max_body_bytes: int = option(8 * 1024 * 1024, "largest request body in bytes (larger: 413)", min=1024)
    request_timeout_s: float = option(
        120.0, "seconds a request may wait for its scores (then 504)", min=0.0, min_exclusive=True
    )
    header_timeout_s: float = option(
        10.0,
        "seconds a connection has to send a request's headers, from when it "
        "opens or its first byte after an idle keep-alive (then 408 and closed)",
        min=0.0,
        min_exclusive=True,
    )
    body_timeout_s: float = option(
        30.0,
        "seconds a request has to send its body once its headers are in (then 408 and closed)",
        min=0.0,
        min_exclusive=True,
    )
    shutdown_timeout_s: float = option(
        30.0,
        "on SIGTERM / Ctrl-C: the server stops accepting, scores what it can "
        "finish within this many seconds, answers the rest 503 with Retry-After, "
        "and exits within them",
        min=0.0,
    )
    precision: str = option(
        "auto",
        "auto: as the model was trained (as `rewardsmith score` does); bf16: bf16 autocast of the backbone; fp32",
        choices=PRECISIONS,
    )
    api_key_file: str | None = option(
        None, "file holding an API key: every endpoint but /health then needs `Authorization: Bearer <key>` (else 401)"
    )
    max_standards: int = option(
        1024,
        "most ICRM standards kept (registered ones and ad-hoc demonstrations; the "
        "oldest ad-hoc one is forgotten first)",
        min=1,
    )
    template: str = option(
        "auto",
        "how texts become tokens: auto (what the model was trained with when its folder "
        "says so, else chat when its tokenizer has a chat template, else plain) | chat | plain | "
        "hh",
        choices=TEMPLATES,
    )
    max_length: int | None = option(
        None,
        "tokens per text (default: the model's own, or 1024 capped at its positions for a model from elsewhere)",
        min=16,
    )
    trust_remote_code: bool = option(
        False, "run a model's own code (auto_map in its config); only for models you trust"
    )
    monitor_window: int = option(
        1024,
        "texts the reward-hacking monitors look back over (reward on length, cut and repeated responses, "
        "collapsed groups, shrinking responses: /v1/monitors, /metrics); 0 = no monitors",
        min=0,
    )
    monitor: MonitorConfig = field(default_factory=MonitorConfig)

    def validate(self) -> None:
        """Types and ranges as on load, then the cross-field rule. Raises ConfigError."""
        validate(self)
        if 2 * self.max_items > self.max_queue:
            raise ConfigError(
                f"max_queue ({self.max_queue}) must hold at least one full request of pairs "
                f"(2 x max_items = {2 * self.max_items} texts)"
            )
