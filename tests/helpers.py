"""What the command-line tests share: running `rewardsmith` in-process (rk) or as a process of its own (run_cli),
the check that a command failed in one line, and a tiny saved reward model. Test files import it by name
(`from helpers import rk`): pytest puts this folder on sys.path for tests/conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from rewardsmith.cli import app

# One thread (two cores are shared by every test) and no hub: what each command runs under.
ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
# `rewardsmith train` options of a run of seconds: tiny-bert, 2 steps on 32 pairs, 16 held out.
TINY = ["--backbone", "tiny-bert", "--max-steps", "2", "--train-pairs", "32", "--eval-pairs", "16", "--quiet"]


def rk(*args: str | Path) -> Any:
    """`rewardsmith ARGS...` in this process (typer's CliRunner result: exit_code, stdout, stderr)."""
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV)


def ok(result: Any) -> None:
    """Checks that a command (a CliRunner result) succeeded, showing its output when it did not."""
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)


def run_cli(args: list[str | Path], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m rewardsmith.cli ARGS...` as a process of its own (for what a CliRunner cannot show: a kill, a
    process's environment), with ENV and `env` over this process's environment; at most 600 s."""
    return subprocess.run(
        [sys.executable, "-m", "rewardsmith.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV, **(env or {})},
        timeout=600,
    )


def one_line_error(result: Any, *needles: str) -> str:
    """The error line of a command that must have failed as a user error: exit code 2, exactly one line on stderr,
    `error: ...`, no traceback anywhere, each needle in it."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def tiny_reward_model(folder: Path, seed: int, poison: float | None = None) -> Path:
    """A tiny untrained rewardsmith reward model (tiny-bert, 48 tokens) saved in `folder`; `poison`: its head's
    weights set to this value (NaN: every reward NaN). Returns the folder."""
    import torch

    from rewardsmith.config import ModelConfig
    from rewardsmith.models.factory import build_model, save_model

    cfg = ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8)
    model, tok = build_model(cfg, seed=seed)
    if poison is not None:
        with torch.no_grad():
            model.head.weight.fill_(poison)
    return save_model(model, tok, folder, cfg)
