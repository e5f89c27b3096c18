"""The golds of `rewardsmith bon` and the prompts they need: verifiable instructions attached reproducibly and
checked by if-verifiable's IFEval checkers, MATH answers by math-verify, prompts read from files with one-line
errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rewardsmith.data.schema import Turn
from rewardsmith.errors import DataError, UnknownNameError
from rewardsmith.rollouts.gold import GoldContext, check_prompts_for, discover_golds, resolve_gold
from rewardsmith.rollouts.instructions import ATTACHABLE, attach_instructions, check_instructions, fraction_followed
from rewardsmith.rollouts.prompt import BonPrompt, prompt_id
from rewardsmith.rollouts.prompts import choose, load_prompts

CONTEXT = GoldContext(lambda source, texts: np.zeros(len(texts)))


def _prompt(text: str) -> BonPrompt:
    turns = (Turn("user", text),)
    return BonPrompt(prompt_id(turns), turns)


def test_every_attachable_instruction_runs_offline_and_attachment_is_reproducible() -> None:
    for instruction, draw in ATTACHABLE.items():
        import random

        [item] = check_instructions([{"id": instruction, "kwargs": draw(random.Random(0))}], "test")
        assert fraction_followed("a plain short answer", [item], "prompt") in (0.0, 1.0)
    a = attach_instructions(_prompt("How do I patch a bike tyre?"), seed=0)
    b = attach_instructions(_prompt("How do I patch a bike tyre?"), seed=0)
    assert a.turns == b.turns and a.meta["instructions"] == b.meta["instructions"]
    assert a.turns[-1].content.startswith("How do I patch a bike tyre?\n\n") and 1 <= len(a.meta["instructions"]) <= 2
    others = {str(attach_instructions(_prompt("How do I patch a bike tyre?"), seed=s).meta) for s in range(20)}
    assert len(others) > 5  # the seed draws other instructions


def test_fraction_followed_by_hand() -> None:
    no_comma = {"id": "punctuation:no_comma", "kwargs": {}}
    lower = {"id": "change_case:english_lowercase", "kwargs": {}}
    assert fraction_followed("all lowercase and no commas here", [no_comma, lower], "p") == 1.0
    assert fraction_followed("All Capitalised, with a comma", [no_comma, lower], "p") == 0.0
    assert fraction_followed("lowercase, but a comma", [no_comma, lower], "p") == 0.5
    assert fraction_followed("", [no_comma], "p") == 0.0
    end = {"id": "startend:end_checker", "kwargs": {"end_phrase": "Any other questions?"}}
    assert fraction_followed("Patch it. Any other questions?", [end], "p") == 1.0


def test_instructions_that_cannot_run_here_are_refused_by_name() -> None:
    with pytest.raises(DataError, match="punkt"):
        check_instructions([{"id": "length_constraints:number_sentences", "kwargs": {"num_sentences": 2}}], "f.jsonl")
    with pytest.raises(DataError, match="unknown instruction 'no:such'"):
        check_instructions([{"id": "no:such"}], "f.jsonl")
    with pytest.raises(DataError, match="non-empty list"):
        check_instructions([], "f.jsonl")


def test_the_golds_are_found_and_score_by_hand() -> None:
    assert set(discover_golds()) == {"ifeval", "math", "reward-model"}
    assert resolve_gold("ifeval").name == "ifeval" and resolve_gold("runs/gold/model").name == "reward-model"
    with pytest.raises(UnknownNameError, match="unknown gold 'ifevl'; known: ifeval, math"):
        resolve_gold("ifevl")  # a misspelt gold is named as such, not looked for as a model folder
    prompt = BonPrompt(
        "p", (Turn("user", "Say hi."),), {"instructions": [{"id": "punctuation:no_comma", "kwargs": {}}]}
    )
    values = resolve_gold("ifeval").score("ifeval", [prompt], [["hi there", "hi, there"]], CONTEXT)
    np.testing.assert_array_equal(values, [[1.0, 0.0]])
    maths = BonPrompt("m", (Turn("user", "What is 1/2 + 1/4?"),), {"answer": "\\frac{3}{4}"})
    answers = ["The sum is $\\boxed{\\frac{3}{4}}$.", "It is 0.75", "The answer is \\boxed{1}"]
    np.testing.assert_array_equal(resolve_gold("math").score("math", [maths], [answers], CONTEXT), [[1.0, 1.0, 0.0]])


def test_a_gold_refuses_prompts_without_what_it_needs() -> None:
    with pytest.raises(DataError, match=r"carry no instructions.*ifeval/<dataset>"):
        check_prompts_for(resolve_gold("ifeval"), "ifeval", [_prompt("hi")], "hh-rlhf/helpful-base")
    check_prompts_for(resolve_gold("runs/gold"), "runs/gold", [_prompt("hi")], "x")  # a reward model needs nothing


def test_prompts_from_a_file_with_their_gold_fields_and_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    rows = [
        {"prompt": "What is 2 + 2?", "answer": "4"},
        {"prompt": [{"role": "user", "content": "hi"}], "id": "x1", "instructions": [{"id": "punctuation:no_comma"}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prompts = load_prompts(str(path))
    assert {p.id for p in prompts} == {"x1", prompt_id((Turn("user", "What is 2 + 2?"),))}
    by_id = {p.id: p for p in prompts}
    assert by_id["x1"].meta["instructions"] == [{"id": "punctuation:no_comma", "kwargs": {}}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "no prompt"}) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl.*row 1.*prompt"):
        load_prompts(str(bad))
    assert len(choose(prompts + prompts, None)) == 2 and len(choose(prompts, 1)) == 1


def test_real_prompt_sources(data_dir: Path) -> None:
    maths = load_prompts("math-500", data_dir, limit=5)
    assert len(maths) == 5 and all(p.meta["answer"] for p in maths)
    assert load_prompts("math-500", data_dir, limit=3) == maths[:3]  # a limit keeps a prefix of one order
    ifeval = load_prompts("ifeval/hh-rlhf/helpful-base", data_dir, limit=4)
    assert len(ifeval) == 4 and all(p.meta["instructions"] and p.turns[-1].role == "user" for p in ifeval)
