"""`rewardsmith sample`: a policy's completions, n per prompt, resumable."""

from __future__ import annotations

import typer

from rewardsmith.cli.common import Flag, OutDir, Overwrite, Quiet, config_command, handle_errors, print_result
from rewardsmith.rollouts.sampling import SampleConfig

app = typer.Typer()

# The policy and the prompts it answers: the same keys in the configs of `sample`, `bon` and `rl`.
POLICY_FLAGS: dict[str, str | Flag] = {"policy": "--policy", "prompts": "--prompts", "prompts_limit": "--prompts-limit"}
# The sampling flags, shared with `bon` (cli/bon.py adds its own).
SAMPLE_FLAGS: dict[str, str | Flag] = {
    **POLICY_FLAGS,
    "n": "--n",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_new_tokens": "--max-new-tokens",
    "seed": "--seed",
    "sample_batch_size": "--sample-batch-size",
    "data_dir": "--data-dir",
}


@app.command("sample")
@config_command(SampleConfig, SAMPLE_FLAGS)
def sample(out: OutDir, cfg: SampleConfig, quiet: Quiet = False, overwrite: Overwrite = False) -> None:
    """A policy's own completions: n per prompt, each seeded by (seed, prompt, index), into OUT/samples.jsonl in the
    shape `bon --samples` and `label --input` read; a killed run resumes at the first prompt missing."""
    from rewardsmith.jobs.sample import run_sample

    with handle_errors():
        print_result(run_sample(cfg, out, progress=not quiet, overwrite=overwrite))
