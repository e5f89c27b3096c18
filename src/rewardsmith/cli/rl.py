"""`rewardsmith rl`: GRPO on a served proxy, the gold tracked, the monitors read; resumable."""

from __future__ import annotations

import typer

from rewardsmith.cli.common import Flag, OutDir, Overwrite, Quiet, config_command, handle_errors, print_result
from rewardsmith.cli.sample import POLICY_FLAGS
from rewardsmith.rl.config import RLConfig

app = typer.Typer()

FLAGS: dict[str, str | Flag] = {
    **POLICY_FLAGS,
    "heldout": "--heldout",
    "max_prompt_tokens": "--max-prompt-tokens",
    "proxy": Flag(("--proxy",), metavar="MODEL"),
    "server": Flag(("--server",), metavar="URL"),
    "calibration": Flag(("--calibration",), metavar="FILE"),
    "rater": "--rater",
    "demos": Flag(("--demos",), metavar="FILE"),
    "negate": "--negate/--no-negate",
    "golds": Flag(
        ("--gold",), metavar="GOLD", help="what the tracker judges by: ifeval | math | a reward model; repeatable"
    ),
    "grpo.steps": "--steps",
    "grpo.prompts_per_step": "--prompts-per-step",
    "grpo.generations": "--generations",
    "grpo.max_new_tokens": "--max-new-tokens",
    "grpo.lr": "--lr",
    "grpo.beta": "--beta",
    "grpo.scale_rewards": "--scale-rewards",
    "grpo.temperature": "--temperature",
    "grpo.lora_r": "--lora-r",
    "grpo.seed": "--seed",
    "grpo.use_vllm": "--vllm/--no-vllm",
    "grpo.bf16": "--bf16/--no-bf16",
    "tracker.every": "--track-every",
    "tracker.samples": "--track-samples",
    "tracker.max_new_tokens": "--track-max-new-tokens",
    "tracker.n_boot": "--bootstrap",
    "save_every": "--save-every",
    "data_dir": "--data-dir",
}


@app.command("rl")
@config_command(RLConfig, FLAGS)
def rl(out: OutDir, cfg: RLConfig, quiet: Quiet = False, overwrite: Overwrite = False) -> None:
    """GRPO of a policy on a served proxy's rewards (TRL's GRPOTrainer, the client's reward function), the gold
    tracked on held-out prompts against KL and the server's reward-hacking monitors read every step; a killed run
    resumes from its last checkpoint."""
    from rewardsmith.jobs.rl import run_rl

    with handle_errors():
        print_result(run_rl(cfg, out, progress=not quiet, overwrite=overwrite))
