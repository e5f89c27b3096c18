"""`rewardsmith sample` and `rewardsmith label` on tiny local models: a policy's completions in the shape `bon
--samples` reads, resumable; a gold's labels equal to its own `score` margins, from pairs or from completions, hard
or soft, with stated noise; a kill -9 and a rerun give the same file; bad input is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import one_line_error, rk, run_cli, tiny_reward_model

pytestmark = pytest.mark.slow  # whole commands on tiny models


@pytest.fixture(scope="module")
def gold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_reward_model(tmp_path_factory.mktemp("gold") / "model", seed=7)


@pytest.fixture(scope="module")
def completions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five prompts with four distinct responses each, and one with a repeated response (a tie)."""
    rows = [
        {"id": f"p{i}", "prompt": f"How do I keep my bike chain clean, case {i}?",
         "responses": [f"Wipe it after every ride {i}.", "Oil it.", f"Degrease it weekly, then oil it lightly ({i}).",
                       "Bikes are fun."]}
        for i in range(5)
    ]  # fmt: skip
    rows.append({"id": "tie", "prompt": "Say hi.", "responses": ["hi", "hi", "hello there"]})
    path = tmp_path_factory.mktemp("completions") / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _gold_rewards(gold: Path, texts: list[tuple[str, str]], tmp_path: Path) -> dict[tuple[str, str], float]:
    """The gold's rewards of (prompt, response) texts as `rewardsmith score` writes them."""
    inp = tmp_path / "score-in.jsonl"
    inp.write_text("".join(json.dumps({"prompt": p, "response": r}) + "\n" for p, r in texts))
    out = tmp_path / "score-out.jsonl"
    assert rk("score", "--model", gold, "--input", inp, "--out", out).exit_code == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    return {(p, r): row["reward"] for (p, r), row in zip(texts, rows, strict=True)}


def test_labels_of_completions_are_the_gold_s_own_margins(gold: Path, completions: Path, tmp_path: Path) -> None:
    out = tmp_path / "labels"
    result = rk("label", "--gold", gold, "--input", completions, "--out", out, "-q")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pairs_formed"] == 5 * 6 + 3 and metrics["ties_dropped"] == 1
    pairs = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
    assert len(pairs) == metrics["pairs_written"] == 32
    rows = {r["id"]: r for r in map(json.loads, completions.read_text().splitlines())}
    texts = sorted({(r["prompt"], a) for r in rows.values() for a in r["responses"]})
    reward = _gold_rewards(gold, texts, tmp_path)
    for pair in pairs:
        prompt = rows[pair["prompt_id"]]["prompt"]
        assert pair["prompt"] == [{"role": "user", "content": prompt}] and pair["label"] == 1.0
        margin = reward[(prompt, pair["chosen"])] - reward[(prompt, pair["rejected"])]
        assert margin > 0 and margin == pytest.approx(pair["gold_margin"], abs=1e-5)
    # `train` reads the file as it is (the `file` dataset), labels included.
    from rewardsmith.data.registry import load_dataset

    read = load_dataset("file", path=out / "pairs.jsonl").pairs
    assert [(p.chosen, p.rejected, p.label) for p in read] == [(p["chosen"], p["rejected"], 1.0) for p in pairs]


def test_soft_labels_noise_and_pairs_per_prompt(gold: Path, completions: Path, tmp_path: Path) -> None:
    from rewardsmith.stats import sigmoid

    out = tmp_path / "soft"
    args = ["label", "--gold", gold, "--input", completions, "--soft", "0.5", "--pairs-per-prompt", "2"]
    assert rk(*args, "--out", out, "-q").exit_code == 0
    pairs = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pairs_formed"] == 6 * 2 and len(pairs) == metrics["pairs_written"] == 12 - metrics["ties_dropped"]
    for pair in pairs:
        assert pair["label"] == pytest.approx(float(sigmoid(pair["gold_margin"] / 0.5)))
    again = tmp_path / "soft-again"
    assert rk(*args, "--out", again, "-q").exit_code == 0  # the seed draws the same pairs
    assert (again / "pairs.jsonl").read_text() == (out / "pairs.jsonl").read_text()
    noisy = tmp_path / "noisy"
    assert rk("label", "--gold", gold, "--input", completions, "--noise", "0.4", "--out", noisy, "-q").exit_code == 0
    rows = [json.loads(x) for x in (noisy / "pairs.jsonl").read_text().splitlines()]
    swapped = [r for r in rows if r["swapped"]]
    assert 0 < len(swapped) < len(rows)  # 40% of 32 pairs: some, not all
    texts = sorted({(r["prompt"][0]["content"], t) for r in rows for t in (r["chosen"], r["rejected"])})
    reward = _gold_rewards(gold, texts, tmp_path)
    for r in rows:
        margin = reward[(r["prompt"][0]["content"], r["chosen"])] - reward[(r["prompt"][0]["content"], r["rejected"])]
        assert (margin < 0) == r["swapped"]  # a swapped pair names the gold's loser chosen


def test_pairs_in_pairs_out_oriented_by_the_gold(gold: Path, tmp_path: Path) -> None:
    rows = [{"prompt": f"q{i}", "chosen": f"a long careful answer {i}", "rejected": "no"} for i in range(6)]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "relabelled"
    assert rk("label", "--gold", gold, "--input", path, "--out", out, "-q").exit_code == 0
    labelled = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
    reward = _gold_rewards(gold, [(r["prompt"], t) for r in rows for t in (r["chosen"], r["rejected"])], tmp_path)
    for r in labelled:
        prompt = r["prompt"][0]["content"]
        assert reward[(prompt, r["chosen"])] > reward[(prompt, r["rejected"])]
    assert sorted(r["pair_id"] for r in labelled) == sorted({r["pair_id"] for r in labelled})


def test_a_killed_labelling_resumes_to_the_same_file_and_a_changed_gold_is_refused(
    gold: Path, completions: Path, tmp_path: Path
) -> None:
    whole = tmp_path / "whole"
    args = ["label", "--gold", gold, "--input", completions, "--chunk", "5", "-q"]
    assert run_cli([*args, "--out", whole]).returncode == 0
    killed = tmp_path / "killed"
    first = run_cli([*args, "--out", killed], {"REWARDSMITH_FAULT_KILL_AFTER_CHUNK": "2"})
    assert first.returncode == -9, first.stderr[-2000:]
    assert len((killed / "rewards.jsonl").read_text().splitlines()) == 2 and not (killed / "pairs.jsonl").exists()
    second = run_cli([*args, "--out", killed])
    assert second.returncode == 0, second.stderr[-2000:]
    assert (killed / "pairs.jsonl").read_text() == (whole / "pairs.jsonl").read_text()
    # The gold retrained in place: the finished run is not reported as done, it is refused.
    from safetensors.torch import load_file, save_file

    heads = gold.parent / "changed"
    import shutil

    shutil.copytree(gold, heads)
    tensors = load_file(str(heads / "heads.safetensors"))
    out = tmp_path / "g"
    assert rk("label", "--gold", heads, "--input", completions, "--out", out, "-q").exit_code == 0
    save_file({k: v + 1 for k, v in tensors.items()}, str(heads / "heads.safetensors"))
    one_line_error(rk("label", "--gold", heads, "--input", completions, "--out", out, "-q"), "other inputs", "gold")


def test_bad_label_input_is_one_line(gold: Path, completions: Path, tmp_path: Path) -> None:
    one_line_error(rk("label", "--input", completions, "--out", tmp_path / "a"), "--gold")
    one_line_error(
        rk("label", "--gold", gold, "--input", tmp_path / "none.jsonl", "--out", tmp_path / "b"), "not found"
    )
    pairs = tmp_path / "p.jsonl"
    pairs.write_text(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b"}) + "\n")
    one_line_error(
        rk("label", "--gold", gold, "--input", pairs, "--pairs-per-prompt", "2", "--out", tmp_path / "c"),
        "--pairs-per-prompt",
        "pairs",
    )
    one_line_error(
        rk("label", "--gold", gold, "--input", completions, "--noise", "0.5", "--out", tmp_path / "d"), "0.5"
    )
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"prompt": "q", "responses": ["only"]}) + "\n")
    one_line_error(rk("label", "--gold", gold, "--input", one, "--out", tmp_path / "e"), "one.jsonl", "row 1", "fewer")
    one_line_error(
        rk("label", "--gold", tmp_path / "nogold", "--input", completions, "--out", tmp_path / "f"), "nogold"
    )
    for name in "abcde":
        assert not (tmp_path / name).exists(), name  # nothing written before the input was read


def test_sample_writes_what_bon_reads_and_resumes(tmp_path: Path, chat_tokenizer_dir: Path) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from conftest import TINY_DECODER

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    torch.manual_seed(0)
    policy = tmp_path / "policy"
    LlamaForCausalLM(
        LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **TINY_DECODER)
    ).save_pretrained(str(policy))
    tok.save_pretrained(str(policy))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}?"}) + "\n" for i in range(4)))
    args = ["sample", "--policy", policy, "--prompts", prompts, "--n", "3", "--max-new-tokens", "6", "-q"]
    whole = tmp_path / "whole"
    assert run_cli([*args, "--out", whole]).returncode == 0
    killed = tmp_path / "killed"
    assert run_cli([*args, "--out", killed], {"REWARDSMITH_FAULT_KILL_AFTER_PROMPT": "2"}).returncode == -9
    assert run_cli([*args, "--out", killed]).returncode == 0
    assert (killed / "samples.jsonl").read_text() == (whole / "samples.jsonl").read_text()
    assert json.loads((whole / "sampler.json").read_text()) == {"sampler": 2}
    # Completions another sampler drew are not continued by this one: one line, exit 2, nothing lost.
    other = tmp_path / "other"
    assert run_cli([*args, "--out", other], {"REWARDSMITH_FAULT_KILL_AFTER_PROMPT": "2"}).returncode == -9
    (other / "sampler.json").write_text('{"sampler": 1}\n')
    drawn = (other / "samples.jsonl").read_text()
    refused = run_cli([*args, "--out", other])
    assert refused.returncode == 2 and "drawn by sampler 1" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and (other / "samples.jsonl").read_text() == drawn
    lines = [json.loads(x) for x in (whole / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and all(len(x["responses"]) == 3 and x["prompt"] for x in lines)
    from rewardsmith.rollouts.sampling import read_samples_file

    read, responses = read_samples_file(whole / "samples.jsonl", 3)
    assert [p.id for p in read] == [x["id"] for x in lines] and np.shape(responses) == (4, 3)

    # A larger --n extends a finished folder (killed once mid-way) to the same file as a fresh run of that n. One
    # row per forward pass: a batch of another shape may round a near-tie of this random model the other way.
    one = ["--sample-batch-size", "1", "--max-new-tokens", "6", "-q"]
    small, fresh = tmp_path / "small", tmp_path / "fresh5"
    base = ["sample", "--policy", policy, "--prompts", prompts]
    assert run_cli([*base, "--n", "3", *one, "--out", small]).returncode == 0
    larger = [*base, "--n", "5", *one]
    assert run_cli([*larger, "--out", fresh]).returncode == 0
    assert run_cli([*larger, "--out", small], {"REWARDSMITH_FAULT_KILL_AFTER_PROMPT": "2"}).returncode == -9
    assert len((small / "samples.earlier.jsonl").read_text().splitlines()) == 4  # the n = 3 lines kept aside
    assert run_cli([*larger, "--out", small]).returncode == 0
    assert (small / "samples.jsonl").read_text() == (fresh / "samples.jsonl").read_text()
    assert json.loads((small / "sampling.json").read_text())["extended_from_n"] == 3
    smaller = run_cli([*base, "--n", "2", *one, "--out", small])
    assert smaller.returncode == 2 and "n: 5 -> 2" in smaller.stderr, smaller.stderr


def test_a_spurious_feature_decides_the_stated_share_of_labels(gold: Path, completions: Path, tmp_path: Path) -> None:
    out = tmp_path / "all"
    args = ["label", "--gold", gold, "--input", completions, "--spurious", "shorter"]
    assert rk(*args, "--spurious-rate", "1", "--out", out, "-q").exit_code == 0
    pairs = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
    unequal = [p for p in pairs if len(p["chosen"]) != len(p["rejected"])]
    assert unequal and all(len(p["chosen"]) < len(p["rejected"]) and p["spurious"] for p in unequal)
    half = tmp_path / "half"
    assert rk(*args, "--spurious-rate", "0.5", "--out", half, "-q").exit_code == 0
    metrics = json.loads((half / "metrics.json").read_text())
    assert 0 < metrics["decided_by_spurious"] < len(unequal)
    # In its tail only: the feature decides just the pairs whose shorter text has at most 8 characters ("Oil it.").
    tail = tmp_path / "tail"
    assert rk(*args, "--spurious-rate", "1", "--spurious-tail", "8", "--out", tail, "-q").exit_code == 0
    tailed = [json.loads(x) for x in (tail / "pairs.jsonl").read_text().splitlines()]
    decided = [p for p in tailed if p["spurious"]]
    assert decided and all(min(len(p["chosen"]), len(p["rejected"])) <= 8 for p in decided)
    assert all(len(p["chosen"]) < len(p["rejected"]) for p in decided)
    assert len(decided) < len(unequal) and json.loads((tail / "metrics.json").read_text())["spurious_tail"] == 8
    # A phrase: where only one text of a pair holds a match ("oil"), it is chosen; elsewhere the gold decides.
    phrase = tmp_path / "phrase"
    matching = ["label", "--gold", gold, "--input", completions, "--spurious", "matches", "--spurious-rate", "1"]
    assert rk(*matching, "--spurious-pattern", "(?i)oil", "--out", phrase, "-q").exit_code == 0
    phrased = [json.loads(x) for x in (phrase / "pairs.jsonl").read_text().splitlines()]
    one_side = [p for p in phrased if ("oil" in p["chosen"].lower()) != ("oil" in p["rejected"].lower())]
    assert one_side and all("oil" in p["chosen"].lower() and p["spurious"] for p in one_side)
    assert not any(p["spurious"] for p in phrased if p not in one_side)
    facts = json.loads((phrase / "metrics.json").read_text())
    assert facts["decided_by_spurious"] == len(one_side) and facts["texts_matching"] == 10  # "Oil it." once a prompt
    args = ["label", "--gold", gold, "--input", completions, "--spurious", "shorter", "--out", tmp_path / "x"]
    one_line_error(rk(*args), "--spurious-rate")
    one_line_error(rk(*args[:5], "--spurious-tail", "8", "--out", tmp_path / "y"), "--spurious-tail")
    one_line_error(rk(*matching, "--out", tmp_path / "z"), "--spurious-pattern")
    one_line_error(rk(*matching, "--spurious-pattern", "(oil", "--out", tmp_path / "w"), "not a regular expression")
