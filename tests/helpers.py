"""What tests share: running `rewardsmith` in-process (rk) or as a process of its own (run_cli, and a run killed
then resumed), the check that a command failed in one line, a tiny saved reward model, easy preference pairs a tiny
model learns, and the marker a GGUF read leaves on a model. Test files import it by name (`from helpers import rk`):
pytest puts this folder on sys.path for tests/conftest.py (a script a test runs puts it there itself). Importing it
loads neither torch nor the CLI."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rewardsmith.data.schema import PreferencePair

# Words of a good and of a bad response (easy_pairs).
GOOD = ["helpful", "clear", "accurate", "kind", "detailed", "careful", "honest"]
BAD = ["rude", "wrong", "vague", "lazy", "useless", "sloppy", "false"]
# One thread (two cores are shared by every test) and no hub: what each command runs under.
ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
# `rewardsmith train` options of a run of seconds: tiny-bert, 2 steps on 32 pairs, 16 held out.
TINY = ["--backbone", "tiny-bert", "--max-steps", "2", "--train-pairs", "32", "--eval-pairs", "16", "--quiet"]
# `rewardsmith calibrate` options of a run of seconds: one seed, 20 bootstrap replicates, no fit sizes, two methods.
QUICK_CALIBRATE = ["--seeds", "1", "--bootstrap", "20", "--fit-sizes", "", "--methods", "pooled,pebs"]


def rk(*args: str | Path) -> Any:
    """`rewardsmith ARGS...` in this process (typer's CliRunner result: exit_code, stdout, stderr)."""
    from typer.testing import CliRunner

    from rewardsmith.cli import app

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


def clean_killed_resumed(
    args: list[str | Path], root: Path, kill: dict[str, str], after_kill: Callable[[Path], object] | None = None
) -> tuple[Path, Path]:
    """`rewardsmith ARGS` three times (run_cli): whole into root/clean; into root/killed with the fault `kill` set
    (its environment variable: a SIGKILL, exit -9), then after_kill(root/killed); and into root/killed again, which
    resumes. Checks each exit code; returns (root/clean, root/killed)."""
    clean, killed = root / "clean", root / "killed"
    whole = run_cli([*args, "--out", clean])
    assert whole.returncode == 0, whole.stderr
    first = run_cli([*args, "--out", killed], kill)
    assert first.returncode == -9, first.stderr[-2000:]
    if after_kill is not None:
        after_kill(killed)
    resumed = run_cli([*args, "--out", killed])
    assert resumed.returncode == 0, resumed.stderr
    return clean, killed


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


def easy_pairs(n: int, seed: int = 0) -> list[PreferencePair]:
    """n pairs a tiny model learns in a few steps: the chosen response 2-8 GOOD words, the rejected 2-8 BAD ones,
    the prompt "question <i> about <a word of either>"; the same for the same (n, seed)."""
    from rewardsmith.data.schema import PreferencePair, user_prompt

    rng = random.Random(seed)
    return [
        PreferencePair(
            user_prompt(f"question {i} about {rng.choice(GOOD + BAD)}"),
            " ".join(rng.choices(GOOD, k=rng.randint(2, 8))),
            " ".join(rng.choices(BAD, k=rng.randint(2, 8))),
            pair_id=str(i),
        )
        for i in range(n)
    ]


def marked_as_gguf(model: Any, quantized: bool = False) -> None:
    """What transformers leaves on a model it read from a GGUF file and de-quantised: its GgufHfQuantizer and a
    `quantization_config: {quant_method: gguf, gguf_file: ...}` on its config (`quantized`: and is_quantized, as a
    causal LM so read carries it)."""
    from transformers import GgufConfig
    from transformers.quantizers.quantizer_gguf import GgufHfQuantizer

    gguf_file = "SmolLM2-135M-Instruct.Q4_1.gguf"
    model.config.quantization_config = GgufConfig(gguf_file=gguf_file)
    model.hf_quantizer = GgufHfQuantizer(GgufConfig(gguf_file=gguf_file))
    if quantized:
        model.is_quantized = True
