"""Commands for the core job: train, eval, score, demo, datasets. Each parses options into a config and calls
one job function (rewardsmith.jobs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rewardsmith.cli.common import (
    ConfigFile,
    DataDir,
    Flag,
    MaxLengthOpt,
    ModelPath,
    OutDir,
    Overwrite,
    Quiet,
    SetOption,
    TemplateOpt,
    TrustRemoteCodeOpt,
    config_options,
    flag,
    handle_errors,
    inference_flags,
    keys_epilog,
    print_result,
    shown_defaults,
)
from rewardsmith.config import (
    DatasetConfig,
    RunConfig,
    help_of,
)

if TYPE_CHECKING:
    from rewardsmith.inference import InferenceOptions

app = typer.Typer()

_D = DatasetConfig


TRAIN_OPTIONS: dict[str, str | Flag] = {
    "data.train.name": Flag(
        ("--train",),
        "training dataset: " + help_of(_D, "name"),
        shown_default="none: give --train, or name the training set in --config",
    ),
    "data.train.path": "--path",
    "data.train_pairs": "--train-pairs",
    "data.eval_pairs": "--eval-pairs",
    "data.split": "--split-by",
    "data.train.on_bad_row": "--on-bad-row",
    "model.backbone": "--backbone",
    "model.max_length": "--max-length",
    "model.template": "--template",
    "model.lora.r": "--lora-r",
    "train.epochs": "--epochs",
    "train.batch_size": "--batch-size",
    "train.lr": "--lr",
    "train.bf16": Flag(("--bf16/--fp32",)),
    "train.batches": "--batches",
    "train.max_steps": "--max-steps",
    "train.checkpoint_every": "--checkpoint-every",
    "train.checkpoint_minutes": "--checkpoint-minutes",
    "train.seed": "--seed",
    "train.debias.kind": "--debias",
    "train.report_to": "--report-to",
    "data.data_dir": Flag(("--data-dir",), convert=str),
}


@app.command(epilog=keys_epilog(RunConfig, shown=shown_defaults(TRAIN_OPTIONS)))
@config_options(RunConfig, TRAIN_OPTIONS)
def train(
    out: OutDir,
    overrides: dict[str, Any],
    config: ConfigFile = None,
    eval_sets: Annotated[
        list[str] | None,
        typer.Option(
            "--eval",
            help="another evaluation dataset (repeatable); its conversations seen in training are removed  "
            "[default: none]",
            show_default=False,
        ),
    ] = None,
    members: Annotated[
        int,
        typer.Option(
            "--members",
            min=1,
            help="train this many models, seeds --seed, --seed + 1, ..., each a run folder of its own under "
            "OUT/members/ (resumed or reused as any run), and make them an ensemble at OUT/ensemble (mean rule; "
            "`rewardsmith ensemble` makes others)",
        ),
    ] = 1,
    bootstrap: Annotated[
        bool,
        typer.Option(
            "--bootstrap",
            help="with --members: member k also trains on a resample of the pairs with replacement (seed "
            "--seed + k), under OUT/members/boot<s>",
        ),
    ] = False,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
    set_keys: SetOption = None,
) -> None:
    """Train a Bradley-Terry reward model and evaluate it on held-out pairs."""
    from rewardsmith.config import apply_overrides, load_yaml, parse_set_options
    from rewardsmith.errors import ConfigError
    from rewardsmith.jobs.train import run_train, run_train_members

    with handle_errors():
        settings = parse_set_options(set_keys)
        named = overrides["data.train.name"] is not None or bool({"data.train", "data.train.name"} & set(settings))
        if config is None and not named:
            raise ConfigError(
                "--train is required (a dataset name, `file --path FILE` or `hub --path ID`), or a "
                "--config that names one"
            )
        # A config that names no training set would train on the default (synthetic) data without a word.
        require = {} if named else {"data.train.name": "give --train, or name the training set in the file"}
        cfg = load_yaml(RunConfig, config, require) if config else RunConfig()
        if eval_sets:
            cfg.data.eval = [DatasetConfig(name=n) for n in eval_sets]
        apply_overrides(cfg, {**overrides, "train.progress": False if quiet else None, **settings})
        if bootstrap and members == 1:
            raise ConfigError("--bootstrap needs --members K (K >= 2); one resample: --set data.bootstrap=SEED")
        print_result(
            run_train(cfg, out, overwrite)
            if members == 1
            else run_train_members(cfg, out, members, overwrite, bootstrap)
        )


@app.command("eval")
@config_options(DatasetConfig, {"path": "--path", "split": "--split", "limit": "--limit", "on_bad_row": "--on-bad-row"})
@inference_flags
def eval_cmd(
    *,  # keyword-only: `options` (no default: inference_flags fills it) follows options with defaults
    model: ModelPath,
    out: OutDir,
    overrides: dict[str, Any],
    datasets: Annotated[
        list[str] | None,
        typer.Option(
            "--dataset",
            "-d",
            help="dataset to evaluate on (repeatable): " + help_of(_D, "name") + "  [default: none]",
            show_default=False,
        ),
    ] = None,
    options: InferenceOptions,
    shift_config: Annotated[
        Path | None,
        typer.Option(
            "--shift-config",
            help="stress-test under preference shift: also evaluate on the ID test split and every "
            "target of a shift config (configs/shift-*.yaml), with each target's accuracy minus "
            "the ID accuracy and its CI  [default: none]",
            show_default=False,
        ),
    ] = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """Evaluate a reward model (rewardsmith's or any other): accuracy, length rule, length-controlled accuracy,
    reward-length correlation, calibration."""
    from rewardsmith.config import apply_overrides
    from rewardsmith.jobs.train import run_eval

    with handle_errors():
        sets = [DatasetConfig(name=n) for n in datasets or []]
        for ds in sets:  # every --dataset read with the same --path / --split / --limit / --on-bad-row
            apply_overrides(ds, overrides)
        print_result(
            run_eval(
                model,
                sets,
                out,
                str(data_dir) if data_dir else None,
                options,
                progress=not quiet,
                overwrite=overwrite,
                shift_config=shift_config,
            )
        )


@app.command()
@inference_flags
def score(
    *,  # keyword-only: `options` (no default: inference_flags fills it) follows options with defaults
    model: ModelPath,
    input_file: Annotated[
        Path,
        typer.Option(
            "--input",
            "-i",
            help="JSONL rows with `prompt` and `response` "
            "(scores one text) or `prompt`, `chosen`, `rejected` (scores both); a "
            "prompt may be plain text, an HH transcript or a chat list; also JSON, Parquet or CSV by suffix, "
            "and /dev/stdin or a pipe as JSONL",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            "--output",
            help="JSONL file to write: the input rows "
            "with a `reward` (or `reward_chosen`, `reward_rejected`, `p_chosen`) field "
            "added; a file rewardsmith did not write is never replaced",
        ),
    ],
    calibration: Annotated[
        Path | None,
        typer.Option(help="per-rater maps from `rewardsmith calibrate fit`  [default: none]", show_default=False),
    ] = None,
    rater: Annotated[
        str | None,
        typer.Option(
            help="rater id whose scale --calibration maps to (an unknown rater gets the population map)  "
            "[default: none]",
            show_default=False,
        ),
    ] = None,
    demos: Annotated[
        Path | None,
        typer.Option(
            help="preference file of demonstrations (prompt, chosen, rejected) that steer an in-context (ICRM) model  "
            "[default: none]",
            show_default=False,
        ),
    ] = None,
    options: InferenceOptions,
    quiet: Quiet = False,
    overwrite: Annotated[
        bool,
        flag(
            "--overwrite",
            help="replace --out when an earlier `rewardsmith score` wrote it (any other existing file is refused)",
        ),
    ] = False,
) -> None:
    """Score responses with a saved model (optionally mapped to one rater's scale, or steered by demos)."""
    from rewardsmith.jobs.score import score_file

    with handle_errors():
        print_result(
            score_file(
                model,
                input_file,
                output,
                calibration=calibration,
                rater=rater,
                demos=demos,
                options=options,
                progress=not quiet,
                overwrite=overwrite,
            )
        )


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
def export(
    model: ModelPath,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="folder to write: AutoModelForSequenceClassification "
            "loads it with the same scores (vLLM, TRL's GRPO, "
            "OpenRLHF); a folder rewardsmith did not write is refused",
        ),
    ],
    template: TemplateOpt = "auto",
    max_length: MaxLengthOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
    overwrite: Annotated[
        bool, flag("--overwrite", help="replace --out when an earlier `rewardsmith export` wrote it, unchanged")
    ] = False,
) -> None:
    """Write a reward model as a Hugging Face *ForSequenceClassification folder, with its chat template."""
    from rewardsmith.jobs.export import run_export

    with handle_errors():
        print_result(run_export(model, out, template, max_length, trust_remote_code, overwrite))


@app.command()
def datasets() -> None:
    """List the registered dataset names."""
    import rewardsmith.data.adapters  # noqa: F401  (fills the registry)
    from rewardsmith.data.registry import DATASETS

    for name in DATASETS.names():
        typer.echo(name)
