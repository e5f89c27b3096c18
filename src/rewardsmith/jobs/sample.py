"""`rewardsmith sample`: a policy's own completions, n per prompt, into a run folder's samples.jsonl (the shape `bon
--samples` and `label --input` read), resumable after a kill at the first prompt missing, and extended (not redone)
when rerun with a larger --n (rollouts.sampling)."""

from __future__ import annotations

from pathlib import Path

from rewardsmith.errors import ConfigError
from rewardsmith.jobs.common import JobResult, open_run, written_line
from rewardsmith.rollouts.prompts import load_prompts, prompts_jsonl
from rewardsmith.rollouts.sampling import SAMPLES_FILE, SAMPLING_FILE, SampleConfig, sample_compare, sample_into

COMMAND = "sample"
PROMPTS_FILE = "prompts.jsonl"


def run_sample(cfg: SampleConfig, out: str | Path, progress: bool = True, overwrite: bool = False) -> JobResult:
    """Samples cfg.n completions of every prompt of cfg.prompts with cfg.policy into the run folder `out`."""
    if cfg.policy is None or cfg.prompts is None:
        raise ConfigError("give --policy (what samples) and --prompts (what it answers)")
    prompts = load_prompts(cfg.prompts, cfg.data_dir, cfg.prompts_limit, cfg.seed)  # checked before anything is written
    with open_run(out, COMMAND, cfg, overwrite, compare=sample_compare) as folder:
        if not folder.owns(PROMPTS_FILE):
            folder.write_text(PROMPTS_FILE, prompts_jsonl(prompts))
        _, facts = sample_into(cfg, folder, prompts, progress)
        folder.write_json("metrics.json", {"command": COMMAND, "prompts": len(prompts), "n": cfg.n, **facts})
        folder.mark_complete()
    summary = [
        f"read {cfg.prompts}: {len(prompts)} prompts; {cfg.n} completions each by {facts['policy']}",
        f"sampled {facts['sampled_tokens']} tokens; cut at --max-new-tokens {cfg.max_new_tokens}: {facts['cut']} of "
        f"{len(prompts) * cfg.n} completions",
        written_line(folder.path, [SAMPLES_FILE, SAMPLING_FILE, PROMPTS_FILE, "metrics.json"]),
    ]
    return JobResult(
        folder.path, f"{len(prompts)} prompts x {cfg.n} samples -> {folder.path / SAMPLES_FILE}", facts, [], summary
    )
