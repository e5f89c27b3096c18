"""What every command shares: one-line errors with exit code 2, and options declared once."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from rewardsmith.errors import RewardsmithError


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turns a RewardsmithError into `error: <message>` on stderr and exit code 2 (no traceback)."""
    try:
        yield
    except RewardsmithError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        typer.echo("interrupted; rerun the same command to resume from the last checkpoint", err=True)
        raise typer.Exit(code=130) from None


def fail(message: str) -> None:
    """Prints a one-line error and exits with code 2."""
    typer.echo(f"error: {message}", err=True)
    sys.exit(2)


OutDir = Annotated[Path, typer.Option(
    "--out", "-o", help="run directory to write (created; resumes if it holds a checkpoint)")]
ConfigFile = Annotated[Path | None, typer.Option(
    "--config", "-c", help="YAML config filling the same fields as the flags")]
DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", help="folder with the real datasets (else $REWARDSMITH_DATA_DIR, else ../shared/data)")]
Seed = Annotated[int | None, typer.Option("--seed", help="random seed")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")]
