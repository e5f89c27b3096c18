"""What every command shares: one-line errors with exit code 2, options declared once, `--help` texts that
show each default (read from the config dataclasses, so they are written once), and the printing of a job's
result (its table, then what was read, dropped, truncated and written)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from rewardsmith.config import default_of, help_of
from rewardsmith.errors import RewardsmithError


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turns a RewardsmithError (or an operating-system error such as a read-only folder or a full disk) into
    `error: <message>` on stderr and exit code 2, without a traceback."""
    try:
        yield
    except RewardsmithError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"error: {where}{exc.strerror or exc}", err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        typer.echo("interrupted; run the same command again to resume from the last checkpoint", err=True)
        raise typer.Exit(code=130) from None


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return str(value)


def config_option(owner: Any, name: str, *flags: str, help: str | None = None, **kwargs: Any) -> Any:
    """A typer option that overrides config field `name` of `owner` (a config class or an instance holding
    the defaults): its help is the field's help plus the default the config gives it."""
    if dataclasses.is_dataclass(owner) and not isinstance(owner, type):
        default = getattr(owner, name)
        text = help or help_of(type(owner), name)
    else:
        default = default_of(owner, name)
        text = help or help_of(owner, name)
    return typer.Option(*flags, help=f"{text}  [default: {_shown(default)}]", show_default=False, **kwargs)


def flag(*names: str, help: str) -> Any:
    """A boolean flag (no value, no metavar in --help)."""
    return typer.Option(*names, help=help, metavar="")


OutDir = Annotated[Path, typer.Option(
    "--out", "-o", help="run folder to write: created when missing; an interrupted run in it resumes when the "
                        "settings match; a folder holding other files is refused")]
ConfigFile = Annotated[Path | None, typer.Option(
    "--config", "-c", help="YAML config filling the same fields as the flags (flags win)  [default: none]",
    show_default=False)]
DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", help="folder with the real datasets  [default: $REWARDSMITH_DATA_DIR, else ../shared/data]")]
Quiet = Annotated[bool, flag("--quiet", "-q", help="no progress output")]
Overwrite = Annotated[bool, flag("--overwrite", help="start the run in --out again (deleting only the files an "
                                                     "earlier rewardsmith run wrote there), or write beside "
                                                     "foreign files, which are never replaced")]


def print_table(rows: Sequence[Mapping[str, Any]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = list(rows)
    console = Console()
    if not console.is_terminal:  # piped or logged: no 80-column wrapping of the results
        console = Console(width=200)
    if not rows:
        console.print(title, highlight=False)
        return
    columns = list(dict.fromkeys(k for row in rows for k in row))
    table = Table(title=title)
    for col in columns:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*[str(row.get(c, "")) for c in columns])
    console.print(table)


def print_result(result: Any) -> None:
    """A job's results table (or title), then its summary lines."""
    print_table(result.rows, result.title)
    for line in result.summary:
        typer.echo(line)
