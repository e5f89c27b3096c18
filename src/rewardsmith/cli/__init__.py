"""The `rewardsmith` command line: thin commands, each calling one library function.

Sub-apps live in their own modules (calibrate.py, shift.py, icrm.py) and are mounted here.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(name="rewardsmith", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Train, stress-test, steer and calibrate reward models for RLHF.")

# (module, sub-app name or None for commands registered on `app` directly)
_MODULES: list[tuple[str, str | None]] = [
    ("rewardsmith.cli.core", None),
    ("rewardsmith.cli.calibrate", "calibrate"),
    ("rewardsmith.cli.shift", None),
    ("rewardsmith.cli.icrm", "icrm"),
]


def _mount() -> None:
    for module_name, sub in _MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # that capability is not installed in this tree
                continue
            raise
        if sub is not None:
            app.add_typer(module.app, name=sub)
        else:
            for command in module.app.registered_commands:
                app.registered_commands.append(command)


_mount()


def main() -> None:
    app()
