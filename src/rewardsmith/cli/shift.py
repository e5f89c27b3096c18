"""`rewardsmith shift`: the weak-to-strong preference-shift protocol from a YAML config."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rewardsmith.cli.common import DataDir, OutDir, Overwrite, Quiet, flag, handle_errors, print_result

app = typer.Typer()


@app.command("shift")
def shift(
    config: Annotated[Path, typer.Option("--config", "-c", help="shift config YAML (see configs/shift-*.yaml)")],
    out: OutDir,
    quick: Annotated[bool, flag("--quick", help="the config's quick sizes: a few-minute run")] = False,
    data_dir: DataDir = None,
    seeds: Annotated[str | None, typer.Option("--seeds", help="comma-separated student seeds, e.g. 0,1,2  "
                                                              "[default: the config's]", show_default=False)] = None,
    threads: Annotated[int | None, typer.Option("--threads", help="torch intra-op threads  [default: torch's]",
                                                show_default=False)] = None,
    no_train: Annotated[bool, flag("--no-train", help="evaluate the models already trained in --out; train "
                                                      "nothing")] = False,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """Weak teacher, students per method and ceiling; ID and per-target transfer metrics and a report."""
    with handle_errors():
        from rewardsmith.config import load_yaml
        from rewardsmith.errors import ConfigError
        from rewardsmith.jobs.shift import run_shift_job
        from rewardsmith.w2s.config import ShiftConfig
        from rewardsmith.w2s.pipeline import torch_threads

        cfg = load_yaml(ShiftConfig, config)
        seed_list = None
        if seeds:
            try:
                seed_list = [int(s) for s in seeds.split(",") if s.strip()]
            except ValueError:
                raise ConfigError(f"--seeds must be comma-separated integers, got {seeds!r}") from None
            if any(s < 0 for s in seed_list):
                raise ConfigError(f"--seeds must be non-negative, got {seeds!r}")
        if threads is not None and threads < 1:
            raise ConfigError(f"--threads must be at least 1, got {threads}")
        torch_threads(threads)
        print_result(run_shift_job(cfg, out, quick=quick, data_dir=data_dir, seeds=seed_list, progress=not quiet,
                                   train=not no_train, overwrite=overwrite))
