"""Commands for the core job: train, eval, score, demo, datasets. Each parses options into a config and calls
one job function (rewardsmith.jobs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rewardsmith.cli.common import (
    BatchSize,
    ConfigFile,
    DataDir,
    InferenceBf16,
    MaxLengthOpt,
    ModelPath,
    OutDir,
    Overwrite,
    Quiet,
    SetOption,
    TemplateOpt,
    TrustRemoteCodeOpt,
    config_option,
    flag,
    handle_errors,
    keys_epilog,
    print_result,
)
from rewardsmith.config import (
    DataConfig,
    DatasetConfig,
    DebiasSettings,
    ModelConfig,
    RunConfig,
    TrainConfig,
    help_of,
)

app = typer.Typer()

_D, _M, _T = DatasetConfig, ModelConfig, TrainConfig
OnBadRow = Annotated[str | None, config_option(_D, "on_bad_row", "--on-bad-row")]
Bf16 = Annotated[bool | None, config_option(_T, "bf16", "--bf16/--fp32")]


@app.command(epilog=keys_epilog(RunConfig))
def train(
    out: OutDir,
    config: ConfigFile = None,
    train_set: Annotated[str | None, typer.Option(
        "--train", help="training dataset: " + help_of(_D, "name") + "  [required unless --config gives it]",
        show_default=False)] = None,
    eval_sets: Annotated[list[str] | None, typer.Option(
        "--eval", help="another evaluation dataset (repeatable); its conversations seen in training are removed  "
                       "[default: none]", show_default=False)] = None,
    path: Annotated[str | None, config_option(_D, "path", "--path")] = None,
    train_pairs: Annotated[int | None, config_option(DataConfig, "train_pairs", "--train-pairs")] = None,
    eval_pairs: Annotated[int | None, config_option(DataConfig, "eval_pairs", "--eval-pairs")] = None,
    on_bad_row: OnBadRow = None,
    backbone: Annotated[str | None, config_option(_M, "backbone", "--backbone")] = None,
    max_length: Annotated[int | None, config_option(_M, "max_length", "--max-length")] = None,
    template: Annotated[str | None, config_option(_M, "template", "--template")] = None,
    lora_r: Annotated[int | None, typer.Option("--lora-r", help="LoRA rank; 0 = full fine-tune  [default: 0]",
                                               show_default=False)] = None,
    epochs: Annotated[float | None, config_option(_T, "epochs", "--epochs")] = None,
    batch_size: Annotated[int | None, config_option(_T, "batch_size", "--batch-size")] = None,
    lr: Annotated[float | None, config_option(_T, "lr", "--lr")] = None,
    bf16: Bf16 = None,
    max_steps: Annotated[int | None, config_option(_T, "max_steps", "--max-steps")] = None,
    checkpoint_every: Annotated[int | None, config_option(_T, "checkpoint_every", "--checkpoint-every")] = None,
    seed: Annotated[int | None, config_option(_T, "seed", "--seed")] = None,
    debias: Annotated[str | None, config_option(DebiasSettings, "kind", "--debias")] = None,
    report_to: Annotated[str | None, config_option(_T, "report_to", "--report-to")] = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
    set_keys: SetOption = None,
) -> None:
    """Train a Bradley-Terry reward model and evaluate it on held-out pairs."""
    from rewardsmith.config import apply_overrides, load_yaml, parse_set_options
    from rewardsmith.errors import ConfigError
    from rewardsmith.jobs.train import run_train

    with handle_errors():
        if config is None and train_set is None:
            raise ConfigError("--train is required (a dataset name, `file --path FILE` or `hub --path ID`), or a "
                              "--config that names one")
        cfg = load_yaml(RunConfig, config) if config else RunConfig()
        if eval_sets:
            cfg.data.eval = [DatasetConfig(name=n) for n in eval_sets]
        apply_overrides(cfg, {
            "data.train.name": train_set, "data.train.path": path, "data.train.on_bad_row": on_bad_row,
            "data.train_pairs": train_pairs, "data.eval_pairs": eval_pairs,
            "data.data_dir": str(data_dir) if data_dir else None,
            "model.backbone": backbone, "model.max_length": max_length, "model.template": template,
            "model.lora.r": lora_r,
            "train.epochs": epochs, "train.batch_size": batch_size, "train.lr": lr, "train.bf16": bf16,
            "train.max_steps": max_steps, "train.checkpoint_every": checkpoint_every, "train.seed": seed,
            "train.debias.kind": debias, "train.progress": False if quiet else None, "train.report_to": report_to,
            **parse_set_options(set_keys),
        })
        print_result(run_train(cfg, out, overwrite))


@app.command("eval")
def eval_cmd(
    model: ModelPath,
    datasets: Annotated[list[str], typer.Option("--dataset", "-d", help="dataset to evaluate on (repeatable): "
                                                + help_of(_D, "name"))],
    out: OutDir,
    path: Annotated[str | None, config_option(_D, "path", "--path")] = None,
    split: Annotated[str | None, config_option(_D, "split", "--split")] = None,
    limit: Annotated[int | None, config_option(_D, "limit", "--limit")] = None,
    on_bad_row: OnBadRow = None,
    bf16: InferenceBf16 = None,
    batch_size: BatchSize = 64,
    template: TemplateOpt = "auto",
    max_length: MaxLengthOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
    data_dir: DataDir = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """Evaluate a reward model (rewardsmith's or any other): accuracy, length rule, length-controlled accuracy,
    reward-length correlation, calibration."""
    from rewardsmith.config import validate
    from rewardsmith.jobs.train import run_eval

    with handle_errors():
        sets = [DatasetConfig(name=n, split=split, limit=limit, path=path, on_bad_row=on_bad_row or "error")
                for n in datasets]
        for ds in sets:
            validate(ds)
        print_result(run_eval(model, sets, out, str(data_dir) if data_dir else None, bf16, batch_size,
                              progress=not quiet, overwrite=overwrite, template=template, max_length=max_length,
                              trust_remote_code=trust_remote_code))


@app.command()
def score(
    model: ModelPath,
    input_file: Annotated[Path, typer.Option("--input", "-i", help="JSONL rows with `prompt` and `response` "
                                             "(scores one text) or `prompt`, `chosen`, `rejected` (scores both); a "
                                             "prompt may be plain text, an HH transcript or a chat list")],
    output: Annotated[Path, typer.Option("--out", "-o", "--output", help="JSONL file to write: the input rows "
                                         "with a `reward` (or `reward_chosen`, `reward_rejected`, `p_chosen`) field "
                                         "added; a file rewardsmith did not write is never replaced")],
    calibration: Annotated[Path | None, typer.Option(
        help="per-rater maps from `rewardsmith calibrate fit`  [default: none]", show_default=False)] = None,
    rater: Annotated[str | None, typer.Option(
        help="rater id whose scale --calibration maps to (an unknown rater gets the population map)  "
             "[default: none]", show_default=False)] = None,
    demos: Annotated[Path | None, typer.Option(
        help="preference file of demonstrations (prompt, chosen, rejected) that steer an in-context (ICRM) model  "
             "[default: none]", show_default=False)] = None,
    bf16: InferenceBf16 = None,
    batch_size: BatchSize = 64,
    template: TemplateOpt = "auto",
    max_length: MaxLengthOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
    quiet: Quiet = False,
    overwrite: Annotated[bool, flag("--overwrite", help="replace --out when an earlier `rewardsmith score` wrote "
                                                        "it (any other existing file is refused)")] = False,
) -> None:
    """Score responses with a saved model (optionally mapped to one rater's scale, or steered by demos)."""
    from rewardsmith.jobs.score import score_file

    with handle_errors():
        print_result(score_file(model, input_file, output, calibration=calibration, rater=rater, demos=demos,
                                bf16=bf16, batch_size=batch_size, progress=not quiet, overwrite=overwrite,
                                template=template, max_length=max_length, trust_remote_code=trust_remote_code))


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="run folder (resumed when interrupted)")] = Path("runs/demo"),
    quick: Annotated[bool, flag("--quick", help="small sizes: a run of about a minute (a smoke test)")] = False,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """The main job on the embedded defaults, offline."""
    from rewardsmith.jobs.demo import run_demo

    with handle_errors():
        print_result(run_demo(out, progress=not quiet, overwrite=overwrite, quick=quick))


@app.command()
def examples(
    out: Annotated[Path, typer.Option("--out", "-o", help="folder to write the example files into")] = Path("examples"),
    overwrite: Overwrite = False,
) -> None:
    """Write small real files to try the commands on: pairs, held-out pairs, responses, demonstrations, ratings."""
    from rewardsmith.jobs.examples import write_examples

    with handle_errors():
        print_result(write_examples(out, overwrite))


@app.command()
def datasets() -> None:
    """List the registered dataset names."""
    import rewardsmith.data.adapters  # noqa: F401  (fills the registry)
    from rewardsmith.data.registry import DATASETS

    for name in DATASETS.names():
        typer.echo(name)

