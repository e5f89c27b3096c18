"""What an ensemble costs to score, every measured run in its own fresh process, alternating:

- member: `rewardsmith score` (jobs.score.score_file) with one saved MiniLM reward model;
- ensemble: the same command with an ensemble folder of K such members (seeded heads, different seeds), each member
  scoring every text in its own pass (jobs.ensemble);
- heads: one MiniLM with K heads on its pooled representation (the shared-backbone variant of
  experiments/ensembles.py), scored through the same scorer (evaluate.scoring.score_encoded) on the same texts.

Scoring time is score's own clock (encoding and scoring; model loads apart, and reported apart). The ratio that
matters is ensemble / (K x member): 1.0 means an ensemble costs exactly its members, and the issue's budget is 1.05.

    .venv/bin/python benchmarks/bench_ensemble.py --members 5 --texts 256 --rounds 3

Writes benchmarks/results/ensemble.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import rotated, run_worker, spread, write_results

RESULTS = Path(__file__).resolve().parent / "results" / "ensemble.json"


def measure(kind: str, model: str, rows: str, members: int) -> dict[str, Any]:
    texts = len(Path(rows).read_text().splitlines())
    if kind == "heads":
        return _heads(rows, members, texts)
    from rewardsmith.jobs.score import score_file

    t0 = time.perf_counter()
    result = score_file(model, Path(rows), Path(rows).with_name(f"scored-{kind}.jsonl"), progress=False, overwrite=True)
    total = time.perf_counter() - t0
    seconds = float(result.metrics["score_seconds"])
    return {"texts": texts, "seconds": seconds, "texts_per_s": texts / seconds, "load_seconds": total - seconds}


def _heads(rows: str, members: int, texts: int) -> dict[str, Any]:
    from torch import nn

    from rewardsmith.config import ModelConfig
    from rewardsmith.data.templates import encoder_for
    from rewardsmith.evaluate.scoring import score_encoded
    from rewardsmith.inference import read_score_rows
    from rewardsmith.models import build_reward_model

    t0 = time.perf_counter()
    cfg = ModelConfig(backbone="minilm", max_length=256, template="hh")
    model, tok = build_reward_model(cfg, seed=0)
    model.head = nn.Linear(model.hidden_size, members, bias=False)
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, pairs, _, _ = read_score_rows(Path(rows))
    encoder = encoder_for(tok, cfg)
    encoded = [encoder.encode(p.prompt, p.chosen) for p in pairs]
    rewards = score_encoded(model, encoded, int(tok.pad_token_id), 64)
    seconds = time.perf_counter() - t0
    assert rewards.shape == (texts, members)
    return {"texts": texts, "seconds": seconds, "texts_per_s": texts / seconds, "load_seconds": load}


def prepare(folder: Path, members: int, n_texts: int, data_dir: str | None) -> tuple[Path, Path, Path]:
    """K saved MiniLM reward models (seeded heads), their ensemble, and a score input of n_texts HH responses."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.jobs.ensemble import make_ensemble
    from rewardsmith.models import build_reward_model
    from rewardsmith.models.factory import save_model

    cfg = ModelConfig(backbone="minilm", max_length=256, template="hh")
    models = []
    for k in range(members):
        model, tok = build_reward_model(cfg, seed=k)
        models.append(str(save_model(model, tok, folder / f"member{k}" / "model", cfg)))
    ensemble = folder / "ensemble"
    make_ensemble(models, ensemble, progress=False)
    pairs = load_dataset("hh-rlhf/helpful-base", data_dir=data_dir).pairs[:n_texts]
    rows = folder / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"prompt": [{"role": t.role, "content": t.content} for t in p.prompt], "response": p.chosen})
            + "\n"
            for p in pairs
        )
    )
    return Path(models[0]), ensemble, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, model, rows = args.worker
        print(json.dumps(measure(kind, model, rows, args.members)))
        return
    script = str(Path(__file__).resolve())
    kinds = ["member", "ensemble", "heads"]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        member, ensemble, rows = prepare(Path(tmp), args.members, args.texts, args.data_dir)
        models = {"member": member, "ensemble": ensemble, "heads": member}
        for r in range(args.rounds):
            for kind in rotated(kinds, r):
                worker = ["--members", str(args.members), "--worker", kind, str(models[kind]), str(rows)]
                runs[kind].append(run_worker(script, worker, kind))
    k = args.members
    ensemble_ratio = [e["seconds"] / (k * m["seconds"]) for e, m in zip(runs["ensemble"], runs["member"], strict=True)]
    heads_ratio = [h["seconds"] / m["seconds"] for h, m in zip(runs["heads"], runs["member"], strict=True)]
    out = {
        "command": "python benchmarks/bench_ensemble.py " + " ".join(sys.argv[1:]),
        "settings": {"members": k, "texts": args.texts, "rounds": args.rounds, "model": "minilm, max_length 256"},
        "runs": runs,
        "ensemble_over_k_members": spread(ensemble_ratio),
        "heads_over_member": spread(heads_ratio),
    }
    rate = {kind: statistics.median(x["texts_per_s"] for x in v) for kind, v in runs.items()}
    table = "\n".join(
        [
            f"{'variant':<10} {'texts/s':>8} {'load s':>7}",
            *(
                f"{kind:<10} {rate[kind]:>8.1f} {statistics.median(x['load_seconds'] for x in runs[kind]):>7.1f}"
                for kind in kinds
            ),
            f"ensemble / ({k} x member): {out['ensemble_over_k_members']['median']:.3f} "
            f"(range {out['ensemble_over_k_members']['min']:.3f}-{out['ensemble_over_k_members']['max']:.3f})",
            f"heads / member: {out['heads_over_member']['median']:.3f} "
            f"(range {out['heads_over_member']['min']:.3f}-{out['heads_over_member']['max']:.3f})",
        ]
    )
    write_results(RESULTS, out, table)


if __name__ == "__main__":
    main()
