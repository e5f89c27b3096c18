"""`rewardsmith icrm ...`: train an in-context steerable reward model (or its BT baseline) and run its
evaluation protocols. Each command parses options into ICRMRunConfig and calls one job function."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rewardsmith.cli.common import (
    ConfigFile,
    Flag,
    OutDir,
    Overwrite,
    Quiet,
    SetOption,
    config_options,
    flag,
    handle_errors,
    keys_epilog,
    print_result,
    set_option,
)
from rewardsmith.config import help_of
from rewardsmith.icrm.config import EpisodeConfig, ICRMRunConfig

app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, help="In-context steerable reward models (Beta posterior, ELBO)."
)

TRAIN_OPTIONS: dict[str, str | Flag] = {
    "model.backbone": "--backbone",
    "model.mode": "--mode",
    "model.template": "--template",
    "episodes.sources": Flag(("--source",), "episode source (repeatable): " + help_of(EpisodeConfig, "sources")),
    "episodes.max_demos": "--max-demos",
    "train.max_steps": Flag(("--steps",), "optimiser steps"),
    "train.batch_size": Flag(("--batch-size",), "episodes per step"),
    "train.head_lr": Flag(("--head-lr",), "peak learning rate of the context encoder and heads"),
    "elbo.kl_schedule": "--kl-schedule",
    "train.bf16": Flag(("--bf16/--fp32",)),
    "train.seed": "--seed",
    "train.report_to": "--report-to",
    "data_dir": "--data-dir",
}
EVAL_OPTIONS: dict[str, str | Flag] = {
    "eval.bt_model": "--bt-model",
    "eval.max_test_pairs": "--max-test-pairs",
    "eval.seed": "--seed",
    "data_dir": "--data-dir",
}


def _config(config: Path | None, overrides: dict[str, object], set_keys: list[str] | None) -> ICRMRunConfig:
    from rewardsmith.config import apply_overrides, load_yaml, parse_set_options

    cfg = load_yaml(ICRMRunConfig, config) if config else ICRMRunConfig()
    apply_overrides(cfg, {**overrides, **parse_set_options(set_keys)})
    return cfg


@app.command(epilog=keys_epilog(ICRMRunConfig))
@config_options(ICRMRunConfig, TRAIN_OPTIONS)
def train(
    out: OutDir,
    overrides: dict[str, Any],
    config: ConfigFile = None,
    bt: Annotated[
        bool,
        flag("--bt", help="train the Bradley-Terry baseline of the same backbone on the same training pairs instead"),
    ] = False,
    bt_pairs: Annotated[int, typer.Option(help="--bt: at most this many training pairs", min=1)] = 2400,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
    set_keys: SetOption = None,
) -> None:
    """Train an ICRM on episodes (or, with --bt, its BT baseline). Rerun the same command to resume."""
    from rewardsmith.jobs.icrm import run_bt_baseline, run_icrm_train

    with handle_errors():
        cfg = _config(config, {**overrides, "train.progress": False if quiet else None}, set_keys)
        if bt:
            print_result(run_bt_baseline(cfg, out, max_pairs=bt_pairs, overwrite=overwrite))
        else:
            print_result(run_icrm_train(cfg, out, overwrite))


# What `icrm eval` reads of ICRMRunConfig: the episode split comes from the training run's config.yaml.
EVAL_SECTIONS = ("eval", "embed_batch_size", "data_dir")


@app.command(
    "eval",
    epilog=keys_epilog(
        ICRMRunConfig,
        EVAL_SECTIONS,
        "  (the episode split, episodes.*, is the training run's: its config.yaml beside the model folder)",
    ),
)
@config_options(ICRMRunConfig, EVAL_OPTIONS)
def eval_cmd(
    protocol: Annotated[
        str, typer.Option("--protocol", "-p", help="steerability | calibration | rmbench | pareto | math500 | all")
    ],
    model: Annotated[Path, typer.Option("--model", "-m", help="an ICRM model folder (rewardsmith icrm train)")],
    out: OutDir,
    overrides: dict[str, Any],
    config: ConfigFile = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
    set_keys: set_option("eval.n_values=0,8") = None,  # type: ignore[valid-type]
) -> None:
    """Run an evaluation protocol: writes <out>/<protocol>/metrics.json, report.md/html and plots."""
    from rewardsmith.jobs.icrm import run_icrm_eval

    with handle_errors():
        cfg = _config(config, {**overrides, "train.progress": False if quiet else None}, set_keys)
        print_result(run_icrm_eval(protocol, model, out, cfg, overwrite))
