"""The `rewardsmith` command line: thin commands, each calling one job function (rewardsmith.jobs).

Sub-apps live in their own modules (core.py, shift.py, icrm.py, calibrate.py, serve.py) and are mounted
here. Help is plain text (it reads the same in a terminal and in a log) and shows every default. Every user
error, a mistyped option included, ends as one line `error: ...` on stderr with exit code 2.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer._click import exceptions as click_errors  # typer bundles its own click
from typer._click.termui import echo
from typer.core import TyperGroup

from rewardsmith.cli import bench, bon, calibrate, core, ensemble, icrm, label, rl, sample, serve, shift
from rewardsmith.cli.common import readable_metavars


class OneLineErrors(TyperGroup):
    """Click reports a bad option with its usage text over several lines; this prints one line instead. Every
    command's options show readable metavars (common.readable_metavars: TEXT, INTEGER, ...)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            readable_metavars(command, ctx)
        return command

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"], standalone = False, kwargs.get("standalone_mode", True)
        if not standalone:
            return super().main(*args, **kwargs)
        try:
            result = super().main(*args, **kwargs)
        except click_errors.NoArgsIsHelpError as exc:  # a bare group: its help, and the exit code of misuse
            echo(exc.ctx.get_help() if exc.ctx else str(exc))
            sys.exit(2)
        except click_errors.UsageError as exc:
            path = exc.ctx.command_path if exc.ctx else ""
            command = f" {path.split(' ', 1)[1]}" if " " in path else ""
            echo(f"error: {exc.format_message()} (see `rewardsmith{command} --help`)", err=True)
            sys.exit(2)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        except typer.Abort:
            echo("interrupted", err=True)
            sys.exit(130)
        except click_errors.ClickException as exc:
            echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    name="rewardsmith",
    cls=OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Train, stress-test, steer, calibrate and serve reward models for RLHF.",
)


def _version(value: bool) -> None:
    if value:
        from rewardsmith import __version__

        echo(f"rewardsmith {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="print the version and exit", is_eager=True, callback=_version, metavar=""
    ),
) -> None:
    """Train, stress-test, steer, calibrate and serve reward models for RLHF."""
    from rewardsmith.io.processes import deepspeed_log_to_stderr

    deepspeed_log_to_stderr()  # stdout holds only rewardsmith's own output


for _module in (core, shift, bench, sample, label, bon, rl, ensemble, serve):
    for _command in _module.app.registered_commands:
        app.registered_commands.append(_command)
app.add_typer(calibrate.app, name="calibrate")
app.add_typer(icrm.app, name="icrm")


def main() -> None:
    app()
