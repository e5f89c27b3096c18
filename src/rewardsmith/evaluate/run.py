"""`rewardsmith eval` and `rewardsmith score`: a saved model applied to datasets or to a JSONL file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.config import RunConfig
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.environment import environment_info
from rewardsmith.errors import DataError
from rewardsmith.models import load_reward_model
from rewardsmith.train.checkpoint import atomic_write_json, atomic_write_text


def evaluate_saved_model(model_dir: str | Path, datasets: list[str], out_dir: str | Path,
                         data_dir: str | Path | None = None, split: str | None = None, limit: int | None = None,
                         path: str | None = None, bf16: bool = False) -> list[dict[str, Any]]:
    """Evaluates a saved model on each dataset; writes metrics.json and report.md into out_dir.
    Returns the console table rows."""
    from rewardsmith.train.run import eval_table, evaluate_sets

    model, tokenizer, meta = load_reward_model(model_dir)
    cfg = RunConfig()
    cfg.model.max_length = int(meta["model_config"]["max_length"])
    cfg.model.min_prompt_tokens = int(meta["model_config"]["min_prompt_tokens"])
    cfg.train.bf16 = bf16
    sets = {name: load_dataset(name, data_dir=data_dir, split=split, limit=limit, path=path).pairs
            for name in datasets}
    out = Path(out_dir)
    results = evaluate_sets(model, tokenizer, cfg, sets, out / "plots")
    metrics = {"model": str(model_dir), "trained_on": meta.get("trained_on"), "eval": results,
               "environment": environment_info()}
    atomic_write_json(out / "metrics.json", metrics)
    from rewardsmith.report.render import markdown_table, render_report

    rows = eval_table(results)
    render_report({"eval": results}, out, title=f"rewardsmith eval: {Path(model_dir).name}",
                  intro=markdown_table(rows))
    return rows


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise DataError("file not found", path=path)
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON ({exc.msg})", path=path, row=i) from None
        if not isinstance(row, dict):
            raise DataError("expected a JSON object", path=path, row=i)
        if "prompt" not in row or not isinstance(row["prompt"], str):
            raise DataError("missing or non-string", path=path, row=i, field="prompt")
        if "response" not in row and not ("chosen" in row and "rejected" in row):
            raise DataError("needs `response`, or `chosen` and `rejected`", path=path, row=i)
        for key in ("response", "chosen", "rejected"):
            if key in row and not isinstance(row[key], str):
                raise DataError("must be a string", path=path, row=i, field=key)
        rows.append(row)
    return rows


def score_file(model_dir: str | Path, input_file: str | Path, output: str | Path,
               calibration: str | Path | None = None, rater: str | None = None, demos: str | Path | None = None,
               bf16: bool = False) -> int:
    """Adds rewards to every row of a JSONL file and writes it to `output` atomically. Returns the row count.

    calibration + rater: rewards are mapped to that rater's scale with the fitted per-rater map.
    demos: the model is an in-context (ICRM) model steered by these demonstrations.
    """
    from rewardsmith.evaluate.scoring import score_pairs

    rows = _read_jsonl(Path(input_file))
    if (calibration is None) != (rater is None):
        raise DataError("--calibration and --rater go together")
    pairs = [PreferencePair(user_prompt(r["prompt"]), r.get("chosen", r.get("response", "")),
                            r.get("rejected", r.get("response", ""))) for r in rows]
    extra: dict[str, np.ndarray] = {}
    chosen: np.ndarray
    rejected: np.ndarray
    if demos is not None:
        from rewardsmith.icrm.scoring import score_with_demos

        steered = score_with_demos(model_dir, pairs, demos, bf16=bf16)
        chosen, rejected = steered["chosen"], steered["rejected"]
        extra = {"p_chosen": steered["mu"], "confidence_chosen": steered["confidence_chosen"],
                 "confidence_rejected": steered["confidence_rejected"]}
    else:
        model, tokenizer, meta = load_reward_model(model_dir)
        mc = meta["model_config"]
        chosen, rejected = score_pairs(model, tokenizer, pairs, int(mc["max_length"]), int(mc["min_prompt_tokens"]),
                                       bf16=bf16)
    # The preference probability comes from the model's own scale, before any per-rater map.
    p_chosen = extra["p_chosen"] if extra else 1.0 / (1.0 + np.exp(-(chosen - rejected)))
    if calibration is not None:
        from rewardsmith.calibrate import apply_calibration

        chosen = np.asarray(apply_calibration(calibration, str(rater), chosen))
        rejected = np.asarray(apply_calibration(calibration, str(rater), rejected))
    lines = []
    for i, (row, c, r) in enumerate(zip(rows, chosen, rejected, strict=True)):
        if "response" in row and "chosen" not in row:
            row["reward"] = float(c)
            if extra:
                row["confidence"] = float(extra["confidence_chosen"][i])
        else:
            row["reward_chosen"], row["reward_rejected"] = float(c), float(r)
            # an ICRM gives its Beta posterior mean; a scalar model the Bradley-Terry probability
            row["p_chosen"] = float(p_chosen[i])
        lines.append(json.dumps(row, ensure_ascii=False))
    atomic_write_text(Path(output), "\n".join(lines) + "\n")
    return len(rows)
