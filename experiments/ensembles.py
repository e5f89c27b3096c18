"""Is an ensemble of reward models worth its cost? Five MiniLM members trained on the README's helpful data (seeds,
and seeds with bootstrap resamples of the pairs), five heads on one shared backbone, their rules (mean, worst case,
uncertainty-weighted), on the held-out and shift sets and in the best-of-n probe against the gold of
experiments/bon.py (docs/ensembles.md; the questions of rewardsmith.ensembles.claims, committed before this script).

    .venv/bin/python experiments/ensembles.py run          # every step below; a finished step is reused
    .venv/bin/python experiments/ensembles.py summarise    # docs/results/ensembles.json

`run`, in order (commands written to runs/ens/commands.txt as they run, with their time):

    rewardsmith train --config configs/train-helpful.yaml --members 5 --out runs/ens/seeds        # seeds 0-4
    rewardsmith train --config configs/train-helpful.yaml --members 5 --bootstrap --out runs/ens/boot
    (in process) five heads on one MiniLM, each head's pairs a Poisson(1) bootstrap, trained as one model on the same
        pairs and settings -> runs/ens/heads: their rewards on every evaluation set, the reference texts and the
        best-of-n samples (this variant is measured here and not a model kind: see docs/ensembles.md)
    (in process, rewardsmith.jobs.ensemble.make_ensemble) runs/ens/rules/{seeds,boot}-{mean,min,uwo}
    rewardsmith bon --samples runs/ens/samples.jsonl (the 100 x 16 samples of runs/bon/run) --proxy (the six
        ensembles and the best-validation member of each kind) --gold ifeval --gold runs/bon/gold/model
        --n 16 --out runs/ens/bon

The held-out and shift comparisons use every member's own evaluation scores (its run folder's scores.json) put
through the ensemble's rule and scales (rewardsmith.models.ensemble.combine, what `score` runs on an ensemble; a test
checks the two agree within 1e-6). The best single member is the one with the highest accuracy on the validation
split; uwo's lambda is 1, fixed here (chosen by no data).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.stats import Interval

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bon import command  # one rewardsmith command, recorded with its time

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "ens"
BON_RUN = ROOT / "runs" / "bon" / "run"
GOLD = ROOT / "runs" / "bon" / "gold" / "model"
RESULTS = ROOT / "docs" / "results"
CONFIG = "configs/train-helpful.yaml"
K = 5
KINDS = {"seeds": [], "boot": ["--bootstrap"]}
RULES = ("mean", "min", "uwo")
LAMBDA = 1.0
VALIDATION = "hh-rlhf/helpful-base (validation)"
N_BOOT = 1000


def members(kind: str) -> list[Path]:
    """The run folders of a kind's members, in seed order."""
    prefix = "boot" if kind == "boot" else "seed"
    return [RUNS / kind / "members" / f"{prefix}{s}" for s in range(K)]


# ----------------------------------------------------------------------------------------------- shared backbone


class HeadsObjective:
    """Bradley-Terry on each of K heads (rewards (2B, K)), each pair weighted per head by a Poisson(1) draw: every
    head sees its own bootstrap of the pairs (an online bootstrap), the backbone the sum of their gradients."""

    def __init__(self, heads: int, seed: int):
        import torch

        self.heads = heads
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, model: Any, batch: dict[str, Any], info: Any) -> Any:
        import torch
        import torch.nn.functional as F

        from rewardsmith.losses.base import LossResult
        from rewardsmith.train.objectives import split_rewards, with_total

        chosen, rejected = split_rewards(model(batch).rewards)
        margin = (chosen - rejected).float()
        weights = torch.poisson(torch.ones(margin.shape), generator=self.generator).to(margin.device)
        loss = -(weights * F.logsigmoid(margin)).sum() / weights.sum().clamp(min=1.0)
        accuracy = float((margin > 0).float().mean())
        return with_total(LossResult(loss, {"bt": float(loss.detach()), "accuracy": accuracy}))


def train_heads(out: Path, samples: list[tuple[Any, str]]) -> None:
    """Five heads on one MiniLM (HeadsObjective), as configs/train-helpful.yaml trains one; writes their rewards
    (sets, reference texts, best-of-n samples) and the time taken to out/heads.json."""
    import torch
    from torch import nn

    from rewardsmith.config import RunConfig, load_yaml
    from rewardsmith.data.prepare import train_data
    from rewardsmith.data.templates import encoder_for
    from rewardsmith.evaluate.scoring import score_encoded
    from rewardsmith.inference.making import reference_items
    from rewardsmith.io.atomic import atomic_write_text
    from rewardsmith.models.factory import build_reward_model
    from rewardsmith.train.trainer import train_pairs

    result = out / "heads.json"
    if result.exists():
        print(f"{result}: done", flush=True)
        return
    cfg = load_yaml(RunConfig, ROOT / CONFIG)
    data = train_data(cfg.data)
    model, tokenizer = build_reward_model(cfg.model, seed=cfg.train.seed)
    torch.manual_seed(cfg.train.seed)
    model.head = nn.Linear(model.hidden_size, K, bias=False)
    nn.init.normal_(model.head.weight, std=1.0 / model.hidden_size**0.5)
    model.head.float()
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    trainer = train_pairs(
        model, tokenizer, data.train, cfg.train, cfg.model, out, objective=HeadsObjective(K, cfg.train.seed)
    )
    seconds = time.perf_counter() - start
    model = trainer.model
    encoder = encoder_for(tokenizer, cfg.model)
    pad = int(tokenizer.pad_token_id)

    def rewards(items: list[tuple[Any, str]], what: str) -> list[list[float]]:
        texts = [encoder.encode(prompt, response) for prompt, response in items]
        scores = score_encoded(model, texts, pad, 64, cfg.train.bf16, progress=what)
        return [[round(float(x), 6) for x in row] for row in scores]

    sets = {}
    for name, pairs in data.eval_sets.items():
        items = [t for p in pairs for t in ((p.prompt, p.chosen), (p.prompt, p.rejected))]
        scored = rewards(items, f"heads: {name}")
        sets[name] = {"pair_id": [p.pair_id for p in pairs], "chosen": scored[0::2], "rejected": scored[1::2]}
    _, reference = reference_items(None)
    record = {
        "heads": K,
        "train_seconds": round(seconds, 1),
        "sets": sets,
        "reference": rewards(reference, "heads: reference"),
        "samples": rewards(samples, "heads: best-of-n samples"),
    }
    atomic_write_text(result, json.dumps(record) + "\n")


# ---------------------------------------------------------------------------------------------------------- run


def write_samples() -> Path:
    """runs/ens/samples.jsonl: the best-of-n run's prompts with its 16 samples each (bon --samples)."""
    prompts = {r["id"]: r for r in map(json.loads, jsonl_lines((BON_RUN / "prompts.jsonl").read_text()))}
    lines = []
    for record in map(json.loads, jsonl_lines((BON_RUN / "samples.jsonl").read_text())):
        prompt = prompts[record["id"]]
        lines.append(
            {"prompt": prompt["prompt"], "instructions": prompt["instructions"], "responses": record["responses"]}
        )
    path = RUNS / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def sample_items(path: Path) -> list[tuple[Any, str]]:
    from rewardsmith.data.schema import Turn

    items = []
    for record in map(json.loads, path.read_text().splitlines()):
        turns = tuple(Turn(t["role"], t["content"]) for t in record["prompt"])
        items += [(turns, r) for r in record["responses"]]
    return items


def best_member(kind: str) -> Path:
    """The member with the highest validation accuracy (ties: the lower seed)."""
    accuracy = [json.loads((m / "metrics.json").read_text())["eval"][VALIDATION]["accuracy"] for m in members(kind)]
    return members(kind)[int(np.argmax(accuracy))]


def run() -> None:
    log = RUNS / "commands.txt"
    RUNS.mkdir(parents=True, exist_ok=True)
    for kind, extra in KINDS.items():
        command(["train", "--config", CONFIG, "--members", str(K), *extra, "--out", f"runs/ens/{kind}", "-q"], log)
    samples = write_samples()
    train_heads(RUNS / "heads", sample_items(samples))
    from rewardsmith.jobs.ensemble import make_ensemble

    proxies = []
    for kind in KINDS:
        for rule in RULES:
            out = RUNS / "rules" / f"{kind}-{rule}"
            if not (out / "ensemble.json").exists():
                make_ensemble([str(m / "model") for m in members(kind)], out, rule, LAMBDA, progress=True)
            proxies.append(out)
    proxies += [best_member(kind) / "model" for kind in KINDS]
    args = ["bon", "--samples", str(samples.relative_to(ROOT))]
    for proxy in proxies:
        args += ["--proxy", str(proxy.relative_to(ROOT))]
    args += ["--gold", "ifeval", "--gold", str(GOLD.relative_to(ROOT)), "--n", "16", "--seed", "0"]
    command([*args, "--out", "runs/ens/bon", "-q"], log)


# ----------------------------------------------------------------------------------------------------- summarise


def _estimate(e: Interval) -> dict[str, Any]:
    return {"estimate": e.estimate, "ci": [e.low, e.high], "n": e.n}


def _paired_accuracy(a: np.ndarray, b: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """a - b in accuracy points over the same pairs (a, b: per-pair correctness), with a paired percentile CI."""
    from rewardsmith.stats import paired_difference

    return _estimate(paired_difference(a, b, N_BOOT, seed, scale=100.0))


def _block(
    correct: np.ndarray, doubt: np.ndarray, margins: np.ndarray, chars: tuple[np.ndarray, np.ndarray], kind: str
) -> dict[str, Any]:
    from rewardsmith.evaluate.metrics import doubt_block, length_controlled_accuracy
    from rewardsmith.stats import mean_interval

    lc = length_controlled_accuracy(margins, chars[0], chars[1], n_boot=N_BOOT)
    return {
        "accuracy": _estimate(mean_interval(correct, N_BOOT, 0, scale=100.0)),
        "length_controlled": _estimate(lc.value),
        "doubt": doubt_block(correct, doubt, kind, n_boot=N_BOOT),
    }


def _member_scores(kind: str) -> list[dict[str, Any]]:
    return [json.loads((m / "scores.json").read_text()) for m in members(kind)]


def summarise_sets() -> dict[str, Any]:
    """Per evaluation set: each member, the best-validation member, every rule of each kind and the shared-backbone
    heads; accuracy, length-controlled accuracy, selective accuracy and the doubt's AUROC, paired differences."""
    from rewardsmith.evaluate.metrics import error_auroc_difference, pairwise_correct
    from rewardsmith.models.ensemble import combine, read_ensemble, scales

    scores = {kind: _member_scores(kind) for kind in KINDS}
    heads = json.loads((RUNS / "heads" / "heads.json").read_text())
    ref = np.array(heads["reference"]).T  # (K, texts)
    out: dict[str, Any] = {}
    best = {kind: members(kind).index(best_member(kind)) for kind in KINDS}
    for name in scores["seeds"][0]:
        if name == VALIDATION:
            continue
        base = scores["seeds"][0][name]
        chars = (np.array(base["chosen_chars"], float), np.array(base["rejected_chars"], float))
        entry: dict[str, Any] = {"pairs": len(base["pair_id"]), "models": {}, "paired": {}}
        correct: dict[str, np.ndarray] = {}
        doubts: dict[str, np.ndarray] = {}
        for kind in KINDS:
            own = scores[kind]
            assert all(s[name]["pair_id"] == base["pair_id"] for s in own), f"{kind} {name}: pairs differ"
            rewards = np.stack([np.ravel(np.column_stack([s[name]["chosen"], s[name]["rejected"]])) for s in own])
            spec = read_ensemble(RUNS / "rules" / f"{kind}-mean")
            sd = np.asarray(spec.reference.sd)[:, None]
            member_margins = rewards[:, 0::2] - rewards[:, 1::2]
            spread = (member_margins / sd).std(axis=0, ddof=1)
            for k in range(K):
                label = f"{kind} member {k}"
                c = pairwise_correct(member_margins[k])
                correct[label], doubts[label] = c, -np.abs(member_margins[k])
                if k == best[kind]:
                    entry["models"][f"{kind} best member"] = {
                        "member": k,
                        **_block(c, doubts[label], member_margins[k], chars, "-|margin|"),
                    }
                else:
                    entry["models"][label] = {"accuracy": _estimate_point(c)}
            for rule in RULES:
                combined, _ = combine(rewards, replace(spec, rule=rule, lam=LAMBDA))
                margins = combined[0::2] - combined[1::2]
                label = f"{kind} {rule}"
                correct[label], doubts[label] = pairwise_correct(margins), spread
                entry["models"][label] = _block(correct[label], spread, margins, chars, "members' sd of the margin")
        h = heads["sets"][name]
        assert h["pair_id"] == base["pair_id"], f"heads {name}: pairs differ"
        h_rewards = np.stack([np.array(h["chosen"]), np.array(h["rejected"])], axis=1).reshape(-1, K).T  # (K, 2N)
        mean, sd_ref = scales(ref)
        seeds_spec = read_ensemble(RUNS / "rules" / "seeds-mean")
        h_spec = replace(seeds_spec, reference=replace(seeds_spec.reference, mean=mean, sd=sd_ref), rule="mean")
        h_combined, _ = combine(h_rewards, h_spec)
        h_margins = h_combined[0::2] - h_combined[1::2]
        h_spread = ((h_rewards[:, 0::2] - h_rewards[:, 1::2]) / np.asarray(sd_ref)[:, None]).std(axis=0, ddof=1)
        correct["heads mean"], doubts["heads mean"] = pairwise_correct(h_margins), h_spread
        entry["models"]["heads mean"] = _block(
            correct["heads mean"], h_spread, h_margins, chars, "heads' sd of the margin"
        )
        for kind in KINDS:
            best_label = f"{kind} member {best[kind]}"
            for rule in RULES:
                entry["paired"][f"{kind} {rule} - {kind} best member"] = _paired_accuracy(
                    correct[f"{kind} {rule}"], correct[best_label]
                )
            entry["paired"][f"{kind} mean auroc - {kind} best member auroc"] = _estimate(
                error_auroc_difference(
                    correct[f"{kind} mean"],
                    doubts[f"{kind} mean"],
                    correct[best_label],
                    doubts[best_label],
                    n_boot=N_BOOT,
                )
            )
        entry["paired"]["heads mean - seeds mean"] = _paired_accuracy(correct["heads mean"], correct["seeds mean"])
        entry["paired"]["boot mean - seeds mean"] = _paired_accuracy(correct["boot mean"], correct["seeds mean"])
        out[name] = entry
    return out


def _estimate_point(correct: np.ndarray) -> dict[str, Any]:
    return {"estimate": 100.0 * float(np.mean(correct)), "ci": None, "n": int(correct.size)}


def summarise() -> None:
    from rewardsmith.io.atomic import atomic_write_text

    bon = json.loads((RUNS / "bon" / "metrics.json").read_text())
    heads = json.loads((RUNS / "heads" / "heads.json").read_text())
    labels = {p["source"]: p["label"] for p in bon["proxies"]}
    out = {
        "command": "python experiments/ensembles.py run && python experiments/ensembles.py summarise",
        "members": K,
        "config": CONFIG,
        "rules": list(RULES),
        "lambda": LAMBDA,
        "best_member": {kind: str(best_member(kind).relative_to(ROOT)) for kind in KINDS},
        "heads_train_seconds": heads["train_seconds"],
        "sets": summarise_sets(),
        "bon": {"ns": bon["ns"], "golds": bon["golds"], "proxy_labels": labels, "prompts": bon["prompts"]},
        "commands": jsonl_lines((RUNS / "commands.txt").read_text()),
    }
    atomic_write_text(RESULTS / "ensembles.json", json.dumps(out, indent=1) + "\n")
    figures = ROOT / "docs" / "ensembles"
    figures.mkdir(parents=True, exist_ok=True)
    for png in sorted((RUNS / "bon" / "plots").glob("gold_vs_kl_*.png")):
        shutil.copyfile(png, figures / png.name)
    print(f"wrote {RESULTS / 'ensembles.json'} and {figures}/*.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", "summarise"])
    step = parser.parse_args().step
    run() if step == "run" else summarise()


if __name__ == "__main__":
    sys.exit(main())
