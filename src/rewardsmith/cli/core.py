"""Commands for the core job: train, eval, score, demo, datasets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from rewardsmith.cli.common import ConfigFile, DataDir, OutDir, Quiet, Seed, handle_errors
from rewardsmith.config import DataConfig, DatasetConfig, ModelConfig, TrainConfig, help_of

app = typer.Typer()

_D, _M, _T = DatasetConfig, ModelConfig, TrainConfig


@app.command()
def train(
    out: OutDir,
    config: ConfigFile = None,
    train_set: Annotated[str | None, typer.Option("--train", help="training dataset: " + help_of(_D, "name"))] = None,
    eval_sets: Annotated[list[str] | None, typer.Option("--eval", help="extra evaluation dataset (repeatable)")] = None,
    path: Annotated[str | None, typer.Option("--path", help=help_of(_D, "path"))] = None,
    train_pairs: Annotated[int | None, typer.Option(help=help_of(DataConfig, "train_pairs"))] = None,
    eval_pairs: Annotated[int | None, typer.Option(help=help_of(DataConfig, "eval_pairs"))] = None,
    on_bad_row: Annotated[str | None, typer.Option(help=help_of(_D, "on_bad_row"))] = None,
    backbone: Annotated[str | None, typer.Option(help=help_of(_M, "backbone"))] = None,
    max_length: Annotated[int | None, typer.Option(help=help_of(_M, "max_length"))] = None,
    lora_r: Annotated[int | None, typer.Option(help="LoRA rank; 0 = full fine-tune")] = None,
    epochs: Annotated[float | None, typer.Option(help=help_of(_T, "epochs"))] = None,
    batch_size: Annotated[int | None, typer.Option(help=help_of(_T, "batch_size"))] = None,
    lr: Annotated[float | None, typer.Option(help=help_of(_T, "lr"))] = None,
    bf16: Annotated[bool | None, typer.Option("--bf16/--fp32", help=help_of(_T, "bf16"))] = None,
    max_steps: Annotated[int | None, typer.Option(help=help_of(_T, "max_steps"))] = None,
    checkpoint_every: Annotated[int | None, typer.Option(help=help_of(_T, "checkpoint_every"))] = None,
    seed: Seed = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
) -> None:
    """Train a Bradley-Terry reward model and evaluate it on held-out pairs."""
    from rewardsmith.config import RunConfig, apply_overrides, load_yaml
    from rewardsmith.train.run import run_training, summarise_for_console

    with handle_errors():
        cfg = load_yaml(RunConfig, config) if config else RunConfig()
        apply_overrides(cfg, {
            "data.train.name": train_set, "data.train.path": path, "data.train.on_bad_row": on_bad_row,
            "data.train_pairs": train_pairs, "data.eval_pairs": eval_pairs,
            "data.data_dir": str(data_dir) if data_dir else None,
            "model.backbone": backbone, "model.max_length": max_length, "model.lora.r": lora_r,
            "train.epochs": epochs, "train.batch_size": batch_size, "train.lr": lr, "train.bf16": bf16,
            "train.max_steps": max_steps, "train.checkpoint_every": checkpoint_every, "train.seed": seed,
            "train.progress": False if quiet else None,
        })
        if eval_sets:
            cfg.data.eval = [DatasetConfig(name=n) for n in eval_sets]
        metrics = run_training(cfg, out)
        _print_table(summarise_for_console(metrics), f"rewardsmith train -> {out}")


@app.command("eval")
def eval_cmd(
    model: Annotated[Path, typer.Option("--model", "-m", help="a model folder written by rewardsmith train")],
    datasets: Annotated[list[str], typer.Option("--dataset", "-d", help="dataset to evaluate on (repeatable)")],
    out: OutDir,
    split: Annotated[str | None, typer.Option(help=help_of(_D, "split"))] = None,
    limit: Annotated[int | None, typer.Option(help=help_of(_D, "limit"))] = None,
    path: Annotated[str | None, typer.Option("--path", help=help_of(_D, "path"))] = None,
    bf16: Annotated[bool, typer.Option("--bf16/--fp32", help=help_of(_T, "bf16"))] = False,
    data_dir: DataDir = None,
) -> None:
    """Evaluate a saved reward model: accuracy, length rule, length-controlled accuracy, calibration."""
    from rewardsmith.evaluate.run import evaluate_saved_model

    with handle_errors():
        rows = evaluate_saved_model(model, datasets, out, data_dir=data_dir, split=split, limit=limit, path=path,
                                    bf16=bf16)
        _print_table(rows, f"rewardsmith eval -> {out}")


@app.command()
def score(
    model: Annotated[Path, typer.Option("--model", "-m", help="a model folder written by rewardsmith train")],
    input_file: Annotated[Path, typer.Option("--input", "-i", help="JSONL rows with `prompt` and `response` "
                                             "(scores one text) or `prompt`, `chosen`, `rejected` (scores both)")],
    output: Annotated[Path, typer.Option("--output", help="JSONL written with a `reward` (or `reward_chosen`, "
                                         "`reward_rejected`, `p_chosen`) field added")],
    calibration: Annotated[Path | None, typer.Option(help="per-rater maps from `rewardsmith calibrate fit`")] = None,
    rater: Annotated[str | None, typer.Option(help="rater id whose scale --calibration maps to")] = None,
    demos: Annotated[Path | None, typer.Option(help="JSONL of demonstrations (prompt, chosen, rejected) that "
                                               "steer an in-context (ICRM) model")] = None,
    bf16: Annotated[bool, typer.Option("--bf16/--fp32", help=help_of(_T, "bf16"))] = False,
) -> None:
    """Score responses with a saved model (optionally mapped to one rater's scale, or steered by demos)."""
    from rewardsmith.evaluate.run import score_file

    with handle_errors():
        n = score_file(model, input_file, output, calibration=calibration, rater=rater, demos=demos, bf16=bf16)
        typer.echo(f"scored {n} rows -> {output}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="run directory")] = Path("runs/demo"),
    quiet: Quiet = False,
) -> None:
    """The main job on the embedded defaults, offline: weak-to-strong under preference shift on the
    built-in synthetic suite with the embedded MiniLM."""
    from rewardsmith.demo import run_demo

    with handle_errors():
        rows, title = run_demo(out, progress=not quiet)
        _print_table(rows, title)


@app.command()
def datasets() -> None:
    """List the registered dataset names."""
    import rewardsmith.data.adapters  # noqa: F401
    from rewardsmith.data.registry import DATASETS, load_dataset  # noqa: F401

    for name in DATASETS.names():
        typer.echo(name)


def _print_table(rows: Sequence[Mapping[str, Any]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = list(rows)
    if not rows:
        typer.echo(title)
        return
    table = Table(title=title)
    for col in rows[0]:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*[str(row.get(c, "")) for c in rows[0]])
    console = Console()
    if not console.is_terminal:  # piped or logged: no 80-column wrapping of the results
        console = Console(width=200)
    console.print(table)
