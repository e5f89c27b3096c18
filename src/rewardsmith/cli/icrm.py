"""`rewardsmith icrm ...`: train an in-context steerable reward model (or its BT baseline) and run its
evaluation protocols. Each command parses options into ICRMRunConfig and calls one library function."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rewardsmith.cli.common import ConfigFile, DataDir, OutDir, Quiet, Seed, handle_errors
from rewardsmith.config import help_of
from rewardsmith.icrm.config import (
    EpisodeConfig,
    ICRMEvalConfig,
    ICRMModelConfig,
    ICRMRunConfig,
    ICRMTrainConfig,
)

app = typer.Typer(no_args_is_help=True, help="In-context steerable reward models (Beta posterior, ELBO).")

_M, _E, _T, _V = ICRMModelConfig, EpisodeConfig, ICRMTrainConfig, ICRMEvalConfig


def _config(config: Path | None, overrides: dict[str, object]) -> ICRMRunConfig:
    from rewardsmith.config import apply_overrides, load_yaml

    cfg = load_yaml(ICRMRunConfig, config) if config else ICRMRunConfig()
    apply_overrides(cfg, overrides)
    return cfg


@app.command()
def train(
    out: OutDir,
    config: ConfigFile = None,
    backbone: Annotated[str | None, typer.Option(help=help_of(_M, "backbone"))] = None,
    mode: Annotated[str | None, typer.Option(help=help_of(_M, "mode"))] = None,
    sources: Annotated[
        list[str] | None,
        typer.Option("--source", help="episode source (repeatable): " + help_of(_E, "sources")),
    ] = None,
    max_demos: Annotated[int | None, typer.Option(help=help_of(_E, "max_demos"))] = None,
    steps: Annotated[int | None, typer.Option(help=help_of(_T, "steps"))] = None,
    lr: Annotated[float | None, typer.Option(help=help_of(_T, "lr"))] = None,
    kl_schedule: Annotated[str | None, typer.Option(help=help_of(_T, "kl_schedule"))] = None,
    bt: Annotated[
        bool,
        typer.Option(
            "--bt",
            help="train the Bradley-Terry baseline of the same backbone on "
            "the same training pairs instead (rewardsmith's Trainer)",
        ),
    ] = False,
    bt_pairs: Annotated[int, typer.Option(help="--bt: at most this many training pairs")] = 2400,
    seed: Seed = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
) -> None:
    """Train an ICRM on episodes (or, with --bt, its BT baseline). Rerun the same command to resume."""
    with handle_errors():
        cfg = _config(
            config,
            {
                "model.backbone": backbone,
                "model.mode": mode,
                "episodes.max_demos": max_demos,
                "train.steps": steps,
                "train.lr": lr,
                "train.kl_schedule": kl_schedule,
                "train.seed": seed,
                "train.progress": False if quiet else None,
                "data_dir": str(data_dir) if data_dir else None,
            },
        )
        if sources:
            cfg.episodes.sources = list(sources)
        if bt:
            from rewardsmith.icrm.baseline import train_bt_baseline

            typer.echo(f"BT baseline model -> {train_bt_baseline(cfg, out, max_pairs=bt_pairs)}")
            return
        from rewardsmith.icrm.train import train_icrm

        result = train_icrm(cfg, out)
        typer.echo(
            f"ICRM model -> {result.model_dir} ({result.steps} steps, {result.seconds:.0f} s, "
            f"final {json.dumps(result.final_terms)})"
        )


@app.command("eval")
def eval_cmd(
    protocol: Annotated[
        str,
        typer.Option(
            "--protocol", "-p", help="steerability | calibration | rmbench | pareto | math500 | all"
        ),
    ],
    model: Annotated[Path, typer.Option("--model", "-m", help="an ICRM model folder (rewardsmith icrm train)")],
    out: OutDir,
    config: ConfigFile = None,
    bt_model: Annotated[Path | None, typer.Option("--bt-model", help=help_of(_V, "bt_model"))] = None,
    max_test_pairs: Annotated[int | None, typer.Option(help=help_of(_V, "max_test_pairs"))] = None,
    seed: Seed = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
) -> None:
    """Run an evaluation protocol: writes <out>/<protocol>/metrics.json, report.md and plots."""
    from rewardsmith.icrm.protocols import run_protocols

    with handle_errors():
        cfg = _config(
            config,
            {
                "eval.bt_model": str(bt_model) if bt_model else None,
                "eval.max_test_pairs": max_test_pairs,
                "eval.seed": seed,
                "train.progress": False if quiet else None,
                "data_dir": str(data_dir) if data_dir else None,
            },
        )
        for name, path in run_protocols(protocol, model, out, cfg).items():
            typer.echo(f"{name}: {path}")
