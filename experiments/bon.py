"""Does a reward model help a policy? Best-of-n of SmolLM2-135M-Instruct's own samples, chosen by every kind of proxy
rewardsmith trains, judged by a verifiable gold and a learned gold (docs/bon.md; the questions of
rewardsmith.bon.claims, declared before this ran).

    .venv/bin/python experiments/bon.py run          # every step below; a finished step is reused
    .venv/bin/python experiments/bon.py summarise    # docs/results/bon.json

Data, so that no model has seen a prompt's conversation: the prompts are the held-out part (a hash of the first human
turn, 20%) of hh-rlhf/helpful-rejection-sampled, minus every conversation of hh-rlhf/helpful-base and harmless-base,
each with one or two verifiable instructions attached (rewardsmith.rollouts.instructions); their preference pairs are
the held-out set every model's pair accuracy is measured on. The learned gold is a MiniLM trained on about three
times the proxies' data: all of helpful-base and the rest of helpful-rejection-sampled.

`run` calls, in order, one command each (written to runs/bon/commands.txt as they run):

    rewardsmith train --config configs/train-harmless.yaml --out runs/harmless          # the README's proxies
    rewardsmith train --config configs/train-helpful.yaml --out runs/helpful
    rewardsmith shift --config runs/bon/shift-helpful.yaml --out runs/bon/shift-helpful --seeds 0
        # the weak-to-strong students of configs/shift-helpful.yaml: naive and ANCHOR at the sweep's lambda*
    rewardsmith icrm train --config configs/icrm-minilm.yaml --seed 0 --out runs/icrm/s0       # the ICRM
    rewardsmith icrm train --config configs/icrm-minilm.yaml --bt --seed 0 --out runs/icrm/bt-s0   # its BT baseline
    rewardsmith train --config configs/bon-smollm2-helpful.yaml --out runs/bon/smollm2-helpful   # a decoder RM
    rewardsmith train --train file --path runs/bon/gold-pairs.jsonl ... --out runs/bon/gold    # the learned gold
    rewardsmith eval --model M --dataset file --path runs/bon/heldout-pairs.jsonl --out runs/bon/eval-<name>
    rewardsmith bon --policy smollm2 --prompts runs/bon/prompts.jsonl --prompts-limit 100 --n 16 ...
        --proxy (each of the above) --gold ifeval --gold runs/bon/gold/model --out runs/bon/run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from steps import note_machine, run_step  # experiments/steps.py: each step logged with its times

from rewardsmith.io.jsonsafe import jsonl_lines

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "bon"
RESULTS = ROOT / "docs" / "results"
EXE = str(ROOT / ".venv" / "bin" / "rewardsmith")
PROMPT_SOURCE = "hh-rlhf/helpful-rejection-sampled"
HELD_OUT = 0.2  # of PROMPT_SOURCE's conversations, by hash: the prompts and the held-out pairs
PROMPTS = 100
N = 16
SAMPLING = ["--n", str(N), "--max-new-tokens", "80", "--temperature", "0.7", "--top-p", "0.9", "--seed", "0"]
DEMOS = 8  # demonstrations of the helpful standard steering the ICRM (from helpful-base's training part)


def data_dir() -> Path:
    from rewardsmith.data.sources import resolve_data_dir

    return resolve_data_dir(os.environ.get("REWARDSMITH_DATA_DIR"))


def command(args: list[str], log: Path) -> None:
    """Runs one rewardsmith command (a finished run folder is reported, not redone), logged with its times."""
    run_step(EXE, args, log, ROOT)


def _pair_record(pair: Any) -> dict[str, Any]:
    return {
        "prompt": [{"role": t.role, "content": t.content} for t in pair.prompt],
        "chosen": pair.chosen,
        "rejected": pair.rejected,
    }


def write_data() -> dict[str, Any]:
    """runs/bon/{prompts,heldout-pairs,gold-pairs,demos}.jsonl (see the module docstring); returns their counts."""
    from rewardsmith.data.prepare import conversations
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.data.splits import split_pairs
    from rewardsmith.rollouts.instructions import attach_instructions
    from rewardsmith.rollouts.prompt import BonPrompt, prompt_id
    from rewardsmith.rollouts.prompts import prompts_jsonl

    root = data_dir()
    source = load_dataset(PROMPT_SOURCE, data_dir=root).pairs
    helpful = load_dataset("hh-rlhf/helpful-base", data_dir=root).pairs
    harmless = load_dataset("hh-rlhf/harmless-base", data_dir=root).pairs
    parts = split_pairs(source, {"train": 1.0 - HELD_OUT, "heldout": HELD_OUT}, salt="bon")
    seen = conversations(helpful) | conversations(harmless) | conversations(parts["train"])
    heldout = [p for p in parts["heldout"] if p.conversation_key() not in seen]
    prompts: dict[str, BonPrompt] = {}
    for pair in heldout:
        base = BonPrompt(prompt_id(pair.prompt), pair.prompt, {"source": PROMPT_SOURCE})
        prompts.setdefault(base.id, attach_instructions(base, seed=0))
    gold_pairs = helpful + [p for p in parts["train"] if p.conversation_key() not in conversations(heldout)]
    # The ICRM's demonstrations: helpful-base pairs of its training part (configs/train-helpful.yaml's split).
    train_part = split_pairs(helpful, {"train": 0.7}, salt="split")["train"]
    RUNS.mkdir(parents=True, exist_ok=True)
    (RUNS / "prompts.jsonl").write_text(prompts_jsonl(list(prompts.values())), encoding="utf-8")
    for name, pairs in (("heldout-pairs", heldout), ("gold-pairs", gold_pairs), ("demos", train_part[:DEMOS])):
        text = "".join(json.dumps(_pair_record(p), ensure_ascii=False) + "\n" for p in pairs)
        (RUNS / f"{name}.jsonl").write_text(text, encoding="utf-8")
    return {"prompts": len(prompts), "heldout_pairs": len(heldout), "gold_pairs": len(gold_pairs), "demos": DEMOS}


def shift_config() -> Path:
    """configs/shift-helpful.yaml with the naive student and ANCHOR at the harmless sweep's lambda* (as
    experiments/w2s.py's headline runs use it), one seed, no ceiling."""
    import yaml

    sys.path.insert(0, str(ROOT / "experiments"))
    from w2s import chosen_anchor

    config = yaml.safe_load((ROOT / "configs" / "shift-helpful.yaml").read_text(encoding="utf-8"))
    anchor = chosen_anchor()
    config["methods"] = [{"name": "naive", "objective": "naive"}, {**anchor, "name": "anchor"}]
    config["ceiling"] = False
    config["save_students"] = True
    path = RUNS / "shift-helpful.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def proxies() -> dict[str, str]:
    """Proxy label -> model source (an in-context one with its demonstrations after #demos=)."""
    students = RUNS / "shift-helpful" / "seed0"
    return {
        "harmless": "runs/harmless/model",
        "helpful": "runs/helpful/model",
        "w2s-naive": str((students / "naive" / "model").relative_to(ROOT)),
        "w2s-anchor": str((students / "anchor" / "model").relative_to(ROOT)),
        "icrm": "runs/icrm/s0/model",
        "icrm+demos": f"runs/icrm/s0/model#demos={(RUNS / 'demos.jsonl').relative_to(ROOT)}",
        "bt-baseline": "runs/icrm/bt-s0/model",
        "smollm2-helpful": "runs/bon/smollm2-helpful/model",
    }


GOLD = "runs/bon/gold/model"


def run() -> None:
    log = RUNS / "commands.txt"
    note_machine(log)
    counts = write_data()
    print(f"data: {counts}", flush=True)
    command(["train", "--config", "configs/train-harmless.yaml", "--out", "runs/harmless", "-q"], log)
    command(["train", "--config", "configs/train-helpful.yaml", "--out", "runs/helpful", "-q"], log)
    shift = shift_config()
    command(
        ["shift", "--config", str(shift.relative_to(ROOT)), "--out", "runs/bon/shift-helpful", "--seeds", "0", "-q"],
        log,
    )
    command(
        ["icrm", "train", "--config", "configs/icrm-minilm.yaml", "--seed", "0", "--out", "runs/icrm/s0", "-q"], log
    )
    command(
        [
            "icrm",
            "train",
            "--config",
            "configs/icrm-minilm.yaml",
            "--bt",
            "--seed",
            "0",
            "--out",
            "runs/icrm/bt-s0",
            "-q",
        ],
        log,
    )
    command(["train", "--config", "configs/bon-smollm2-helpful.yaml", "--out", "runs/bon/smollm2-helpful", "-q"], log)
    command(["train", "--config", "configs/bon-gold.yaml", "--out", "runs/bon/gold", "-q"], log)
    for name, source in {**proxies(), "gold": GOLD}.items():
        model = source.split("#demos=")[0]
        demos = ["--demos", source.split("#demos=")[1]] if "#demos=" in source else []
        if name in ("icrm", "icrm+demos"):
            continue  # eval scores pairs with a scalar model; the ICRM's pair accuracy comes from score below
        command(
            [
                "eval",
                "--model",
                model,
                *demos,
                "--dataset",
                "file",
                "--path",
                "runs/bon/heldout-pairs.jsonl",
                "--out",
                f"runs/bon/eval-{name}",
                "-q",
            ],
            log,
        )
    for name in ("icrm", "icrm+demos"):
        if (RUNS / f"score-{name}.jsonl").exists():
            continue  # scored by an earlier run (score does not replace its output without --overwrite)
        source = proxies()[name]
        model = source.split("#demos=")[0]
        demos = ["--demos", source.split("#demos=")[1]] if "#demos=" in source else []
        command(
            [
                "score",
                "--model",
                model,
                *demos,
                "--input",
                "runs/bon/heldout-pairs.jsonl",
                "--out",
                f"runs/bon/score-{name}.jsonl",
            ],
            log,
        )
    bon = [
        "bon",
        "--policy",
        "smollm2",
        "--prompts",
        "runs/bon/prompts.jsonl",
        "--prompts-limit",
        str(PROMPTS),
        *SAMPLING,
    ]
    for source in proxies().values():
        bon += ["--proxy", source]
    bon += ["--gold", "ifeval", "--gold", GOLD, "--out", "runs/bon/run"]
    command(bon, log)


def _accuracy(name: str) -> dict[str, Any]:
    """Pair accuracy (%) on the held-out pairs with its 95% CI: from the eval run, or an ICRM's scores (p_chosen)."""
    from rewardsmith.evaluate.metrics import pairwise_accuracy

    if name in ("icrm", "icrm+demos"):
        rows = [json.loads(x) for x in jsonl_lines((RUNS / f"score-{name}.jsonl").read_text())]
        estimate = pairwise_accuracy([r["p_chosen"] - 0.5 for r in rows])
        return {"accuracy": estimate.estimate, "ci": [estimate.low, estimate.high], "n": len(rows)}
    metrics = json.loads((RUNS / f"eval-{name}" / "metrics.json").read_text())
    block = next(iter(metrics["eval"].values()))
    return {"accuracy": block["accuracy"], "ci": block.get("accuracy_ci"), "n": block["n"]}


def summarise(out: Path) -> None:
    """docs/results/bon.json: the bon run's metrics (slimmed), each proxy's and the gold's pair accuracy on the
    held-out pairs, the students' offline comparison (ANCHOR - naive on the source's ID test, paired), the commands
    with their measured seconds; the run's plots copied to docs/bon/."""
    import shutil

    from rewardsmith.io.atomic import atomic_write_text
    from rewardsmith.report.results import slim

    run_dir = RUNS / "run"
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    sources = {p["source"] + (f"#demos={p['demos']}" if p.get("demos") else ""): p["label"] for p in metrics["proxies"]}
    shift = json.loads((RUNS / "shift-helpful" / "metrics.json").read_text(encoding="utf-8"))
    anchor_vs_naive = shift["vs_naive"]["anchor"]
    result = {
        **slim(metrics),
        "command": "python experiments/bon.py run && python experiments/bon.py summarise",
        "proxy_labels": {name: sources[source] for name, source in proxies().items()},
        "pair_accuracy": {name: _accuracy(name) for name in [*proxies(), "gold"]},
        "heldout_pairs": "runs/bon/heldout-pairs.jsonl: the preference pairs of the prompts' conversations",
        "students": {
            "source": shift["source"],
            "id_accuracy": {
                m: {"accuracy": shift["methods"][m]["id_acc"], "ci": shift["methods"][m]["id_acc_ci"]}
                for m in ("naive", "anchor")
            },
            "anchor_minus_naive_id": {"estimate": anchor_vs_naive["d.id"], "ci": anchor_vs_naive["d.id_ci"]},
        },
        "steps": (RUNS / "commands.txt").read_text(encoding="utf-8").splitlines(),
    }
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    figures = ROOT / "docs" / "bon"
    figures.mkdir(parents=True, exist_ok=True)
    for png in sorted((run_dir / "plots").glob("*.png")):
        shutil.copyfile(png, figures / png.name)
    print(f"wrote {out} and {figures}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("run", "summarise"))
    parser.add_argument("--out", type=Path, default=RESULTS / "bon.json")
    args = parser.parse_args()
    if args.step == "run":
        run()
    else:
        summarise(args.out)


if __name__ == "__main__":
    main()
