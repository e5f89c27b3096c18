"""Scores fixed texts through every batched path of the one scoring loop (evaluate.scoring.batched_forward):
RewardScorer.score_pairs (score, eval, the W2S teacher's labels), embed_encoded (ICRM set-mode embeddings),
ICRMScorer.score_pairs in set mode and in concat mode (a (B, 2) forward). Run by test_sharded_scoring.py as a
plain script (one process) and under `accelerate launch --multi_gpu --num_processes 2` on CPU (two processes,
gloo). The main process writes every result to outputs.safetensors; each process writes the text indices its
own backbone passes ran to seen-<process>.json (the rows of each pass, to show how the work was split).

`make-models` writes the two model folders and the input files the CLI tests score (one process)."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch
from safetensors.torch import save_file

from rewardsmith.config import ICRMModelConfig, ModelConfig
from rewardsmith.data.schema import PreferencePair, user_prompt

WORDS = [
    "helpful",
    "clear",
    "accurate",
    "kind",
    "rude",
    "wrong",
    "vague",
    "lazy",
    "the",
    "a",
    "of",
    "to",
    "answer",
    "question",
    "detail",
]
SCALAR = ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8)
IN_CONTEXT = ICRMModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8, context_dim=8, hidden_dim=16)
CONCAT = ICRMModelConfig(
    backbone="tiny-bert",
    max_length=96,
    min_prompt_tokens=8,
    context_dim=8,
    hidden_dim=16,
    template="hh",
    mode="concat",
    freeze_backbone=False,
)


def words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(low, high)))


def pairs(n: int, seed: int = 0) -> list[PreferencePair]:
    """Pairs of responses of 1 to 30 words (many lengths: many batches of different shapes)."""
    rng = random.Random(seed)
    return [
        PreferencePair(user_prompt(words(rng, 2, 12)), words(rng, 1, 30), words(rng, 1, 30), pair_id=str(i))
        for i in range(n)
    ]


def score_rows(n: int) -> list[dict]:
    """`rewardsmith score` rows: every third a single response, the others pairs."""
    rng = random.Random(1)
    rows: list[dict] = []
    for i in range(n):
        if i % 3 == 0:
            rows.append({"prompt": words(rng, 2, 12), "response": words(rng, 1, 30), "id": i})
        else:
            rows.append(
                {"prompt": words(rng, 2, 12), "chosen": words(rng, 1, 30), "rejected": words(rng, 1, 30), "id": i}
            )
    return rows


def make_models(out: Path) -> None:
    from rewardsmith.models.factory import build_model, save_model

    for name, cfg in (("reward", SCALAR), ("icrm", IN_CONTEXT)):
        model, tokenizer = build_model(cfg, seed=0)
        save_model(model, tokenizer, out / name, cfg)
    lines = "".join(json.dumps(row) + "\n" for row in score_rows(45))
    (out / "rows.jsonl").write_text(lines)
    demos = [{"prompt": p.prompt[0].content, "chosen": p.chosen, "rejected": p.rejected} for p in pairs(4, seed=7)]
    (out / "demos.jsonl").write_text("".join(json.dumps(d) + "\n" for d in demos))
    held = [{"prompt": p.prompt[0].content, "chosen": p.chosen, "rejected": p.rejected} for p in pairs(37, seed=3)]
    (out / "pairs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in held))


def score_everything(out: Path) -> None:
    from accelerate.state import PartialState

    from rewardsmith.data.templates import encoder_for
    from rewardsmith.evaluate.scoring import RewardScorer, embed_encoded, encode_pair_texts
    from rewardsmith.icrm.scoring import ICRMScorer
    from rewardsmith.io.processes import processes
    from rewardsmith.models.factory import build_model

    torch.set_num_threads(1)
    procs = processes()
    seen: dict[str, list[int]] = {}

    def watched(name: str, model: torch.nn.Module) -> None:
        """Records the rows of each backbone pass this process runs (a hook; the scores are untouched)."""

        def hook(_module: torch.nn.Module, args: tuple, kwargs: dict, _out: object) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            seen.setdefault(name, []).append(int(ids.shape[0]))

        model.backbone.register_forward_hook(hook, with_kwargs=True)

    held = pairs(37)
    model, tokenizer = build_model(SCALAR, seed=0)
    watched("reward", model)
    scorer = RewardScorer.for_model(model, tokenizer, SCALAR, batch_size=4)
    chosen, rejected = scorer.score_pairs(held)
    encoded = encode_pair_texts(encoder_for(tokenizer, SCALAR), held)
    embeddings = embed_encoded(model, encoded, int(tokenizer.pad_token_id), batch_size=5)
    demos = pairs(4, seed=7)
    icrm, icrm_tokenizer = build_model(IN_CONTEXT, seed=0)
    watched("set", icrm)
    set_scores = ICRMScorer(icrm, encoder_for(icrm_tokenizer, IN_CONTEXT), batch_size=4).score_pairs(held, demos)
    concat, concat_tokenizer = build_model(CONCAT, seed=0)
    watched("concat", concat)
    concat_scores = ICRMScorer(concat, encoder_for(concat_tokenizer, CONCAT), batch_size=3).score_pairs(held, demos)
    results = {
        "chosen": torch.from_numpy(chosen),
        "rejected": torch.from_numpy(rejected),
        "embeddings": embeddings,
        **{f"set_{k}": torch.from_numpy(getattr(set_scores, k)) for k in ("u_chosen", "s_chosen", "mu")},
        **{f"concat_{k}": torch.from_numpy(getattr(concat_scores, k)) for k in ("u_chosen", "s_rejected", "mu")},
    }
    (out / f"seen-{procs.index}.json").write_text(json.dumps({"count": procs.count, "batches": seen}))
    if PartialState().is_main_process:
        save_file({k: v.contiguous() for k, v in results.items()}, str(out / "outputs.safetensors"))


def score_different_texts(out: Path) -> None:
    """Each process holds other texts (process p: 10 + p pairs): every process must refuse, none may hang."""
    from rewardsmith.evaluate.scoring import RewardScorer
    from rewardsmith.io.processes import processes
    from rewardsmith.models.factory import build_model

    procs = processes()
    model, tokenizer = build_model(SCALAR, seed=0)
    try:
        RewardScorer.for_model(model, tokenizer, SCALAR, batch_size=4).score_pairs(pairs(10 + procs.index))
    except RuntimeError as exc:
        (out / f"refused-{procs.index}.txt").write_text(str(exc))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("make-models", "score", "different-texts"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    {"make-models": make_models, "score": score_everything, "different-texts": score_different_texts}[args.what](
        args.out
    )


if __name__ == "__main__":
    main()
