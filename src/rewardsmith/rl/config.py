"""The settings of `rewardsmith rl` (typed; the command-line flags are generated from these fields)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rewardsmith.config import option
from rewardsmith.rl.recipe import GRPOSettings
from rewardsmith.rl.tracker import TrackerSettings


@dataclass
class RLConfig:
    policy: str = option(
        "smollm2",
        "the policy trained: `smollm2` (SmolLM2-135M-Instruct, embedded: a Q4_1 GGUF dequantised to fp32, saved once "
        "as a plain folder in the run so TRL can load its reference) or a local causal LM folder",
    )
    prompts: str | None = option(
        None,
        "what the policy answers: math-500 | ifeval/<dataset> | a dataset name | a JSONL file of {prompt, "
        "instructions?, answer?} (as `bon --prompts`)",
    )
    prompts_limit: int | None = option(None, "use at most this many prompts (a stable hash picks them)", min=1)
    heldout: int = option(
        16, "prompts the gold is tracked on (the first by a stable hash of their id); the others train", min=1
    )
    max_prompt_tokens: int | None = option(
        192, "leave out prompts whose chat prompt is longer than this many policy tokens (counted)", min=1
    )
    proxy: str | None = option(
        None,
        "the reward model the policy is trained on, served by a `rewardsmith serve` this command starts on loopback "
        "and stops when it ends",
    )
    server: str | None = option(
        None, "instead: the URL of a running `rewardsmith serve` (its model is the proxy; give --proxy to record it)"
    )
    calibration: str | None = option(None, "per-rater maps (`calibrate fit`) the started server applies; with --rater")
    rater: str | None = option(None, "the rater whose scale the reward is on (with --calibration)")
    demos: str | None = option(None, "demonstrations steering an in-context proxy (registered as a standard)")
    negate: bool = option(False, "train on the negated reward (a harm scale: lower is better)")
    golds: list[str] = option(
        [], "what the tracker judges the policy by: ifeval | math | a reward model the proxy is not"
    )
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    tracker: TrackerSettings = field(default_factory=TrackerSettings)
    save_every: int = option(
        10, "steps between checkpoints (TRL's, inside the run folder): a killed run resumes at the last one", min=1
    )
    data_dir: str | None = option(
        None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)", volatile=True
    )
