"""`rewardsmith shift`: the weak-to-strong preference-shift protocol from a YAML config."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rewardsmith.cli.common import (
    DataDir,
    OutDir,
    Overwrite,
    Quiet,
    config_options,
    flag,
    handle_errors,
    int_list,
    keys_epilog,
    print_result,
    set_option,
)
from rewardsmith.config import MAX_SEED
from rewardsmith.w2s.config import ShiftConfig

app = typer.Typer()


@app.command("shift", epilog=keys_epilog(ShiftConfig))
@config_options(ShiftConfig, {"threads": "--threads"})
def shift(
    config: Annotated[Path, typer.Option("--config", "-c", help="shift config YAML (see configs/shift-*.yaml)")],
    out: OutDir,
    overrides: dict[str, Any],
    quick: Annotated[bool, flag("--quick", help="the config's quick sizes: a few-minute run")] = False,
    data_dir: DataDir = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            "--seeds", help="comma-separated student seeds, e.g. 0,1,2  [default: the config's]", show_default=False
        ),
    ] = None,
    no_train: Annotated[
        bool, flag("--no-train", help="evaluate the models already trained in --out; train nothing")
    ] = False,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
    set_keys: set_option("teacher.train.grad_accum=4") = None,  # type: ignore[valid-type]
) -> None:
    """Weak teacher, students per method and ceiling; ID and per-target transfer metrics and a report."""
    with handle_errors():
        from rewardsmith.config import apply_overrides, load_yaml, parse_set_options
        from rewardsmith.jobs.shift import run_shift_job

        cfg = load_yaml(ShiftConfig, config)
        apply_overrides(cfg, {**overrides, **parse_set_options(set_keys)})
        seed_list = int_list(seeds, "--seeds", 0, MAX_SEED)
        print_result(
            run_shift_job(
                cfg,
                out,
                quick=quick,
                data_dir=data_dir,
                seeds=seed_list,
                progress=not quiet,
                train=not no_train,
                overwrite=overwrite,
            )
        )
