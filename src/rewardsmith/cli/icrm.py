"""`rewardsmith icrm ...`: train an in-context steerable reward model (or its BT baseline) and run its
evaluation protocols. Each command parses options into ICRMRunConfig and calls one job function."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rewardsmith.cli.common import (
    ConfigFile,
    DataDir,
    OutDir,
    Overwrite,
    Quiet,
    SetOption,
    config_option,
    flag,
    handle_errors,
    keys_epilog,
    print_result,
)
from rewardsmith.config import ICRMModelConfig, help_of
from rewardsmith.icrm.config import ElboConfig, EpisodeConfig, ICRMEvalConfig, ICRMRunConfig, icrm_train_defaults

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                  help="In-context steerable reward models (Beta posterior, ELBO).")

_M, _E, _V, _T = ICRMModelConfig, EpisodeConfig, ICRMEvalConfig, icrm_train_defaults()


def _config(config: Path | None, overrides: dict[str, object], set_keys: list[str] | None) -> ICRMRunConfig:
    from rewardsmith.config import apply_overrides, load_yaml, parse_set_options

    cfg = load_yaml(ICRMRunConfig, config) if config else ICRMRunConfig()
    apply_overrides(cfg, {**overrides, **parse_set_options(set_keys)})
    return cfg


@app.command(epilog=keys_epilog(ICRMRunConfig))
def train(
    out: OutDir,
    config: ConfigFile = None,
    backbone: Annotated[str | None, config_option(_M, "backbone", "--backbone")] = None,
    mode: Annotated[str | None, config_option(_M, "mode", "--mode")] = None,
    sources: Annotated[list[str] | None, config_option(_E, "sources", "--source", help="episode source "
                                                       "(repeatable): " + help_of(_E, "sources"))] = None,
    max_demos: Annotated[int | None, config_option(_E, "max_demos", "--max-demos")] = None,
    steps: Annotated[int | None, config_option(_T, "max_steps", "--steps", help="optimiser steps")] = None,
    batch_size: Annotated[int | None, config_option(_T, "batch_size", "--batch-size", help="episodes per step")] = None,
    head_lr: Annotated[float | None, config_option(
        _T, "head_lr", "--head-lr", help="peak learning rate of the context encoder and heads")] = None,
    kl_schedule: Annotated[str | None, config_option(ElboConfig, "kl_schedule", "--kl-schedule")] = None,
    bf16: Annotated[bool | None, config_option(_T, "bf16", "--bf16/--fp32")] = None,
    bt: Annotated[bool, flag("--bt", help="train the Bradley-Terry baseline of the same backbone on the same "
                                          "training pairs instead")] = False,
    bt_pairs: Annotated[int, typer.Option(help="--bt: at most this many training pairs", min=1)] = 2400,
    seed: Annotated[int | None, config_option(_T, "seed", "--seed")] = None,
    report_to: Annotated[str | None, config_option(_T, "report_to", "--report-to")] = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
    set_keys: SetOption = None,
) -> None:
    """Train an ICRM on episodes (or, with --bt, its BT baseline). Rerun the same command to resume."""
    from rewardsmith.jobs.icrm import run_bt_baseline, run_icrm_train

    with handle_errors():
        cfg = _config(config, {
            "model.backbone": backbone, "model.mode": mode, "episodes.max_demos": max_demos,
            "episodes.sources": list(sources) if sources else None, "train.max_steps": steps,
            "train.batch_size": batch_size, "train.head_lr": head_lr, "elbo.kl_schedule": kl_schedule,
            "train.bf16": bf16, "train.seed": seed, "train.progress": False if quiet else None,
            "train.report_to": report_to,
            "data_dir": str(data_dir) if data_dir else None,
        }, set_keys)
        if bt:
            print_result(run_bt_baseline(cfg, out, max_pairs=bt_pairs, overwrite=overwrite))
        else:
            print_result(run_icrm_train(cfg, out, overwrite))


@app.command("eval", epilog=keys_epilog(ICRMRunConfig))
def eval_cmd(
    protocol: Annotated[str, typer.Option("--protocol", "-p", help="steerability | calibration | rmbench | pareto "
                                                                   "| math500 | all")],
    model: Annotated[Path, typer.Option("--model", "-m", help="an ICRM model folder (rewardsmith icrm train)")],
    out: OutDir,
    config: ConfigFile = None,
    bt_model: Annotated[Path | None, config_option(_V, "bt_model", "--bt-model")] = None,
    max_test_pairs: Annotated[int | None, config_option(_V, "max_test_pairs", "--max-test-pairs")] = None,
    seed: Annotated[int | None, config_option(_V, "seed", "--seed")] = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
    set_keys: SetOption = None,
) -> None:
    """Run an evaluation protocol: writes <out>/<protocol>/metrics.json, report.md/html and plots."""
    from rewardsmith.jobs.icrm import run_icrm_eval

    with handle_errors():
        cfg = _config(config, {"eval.bt_model": str(bt_model) if bt_model else None,
                               "eval.max_test_pairs": max_test_pairs, "eval.seed": seed,
                               "train.progress": False if quiet else None,
                               "data_dir": str(data_dir) if data_dir else None}, set_keys)
        print_result(run_icrm_eval(protocol, model, out, cfg, overwrite))
