"""A JSONL record of generated text holds, unescaped, characters str.splitlines() splits on (U+2028 and kin): the
readers of rewardsmith's own JSONL files split on newlines only, so a resume never cuts such a record in two and
drops everything after it."""

from __future__ import annotations

import json

from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.rollouts.prompt import BonPrompt
from rewardsmith.rollouts.sampling import _sampled_so_far

ODD = "a\u2028b\u2029c\x85d\x1ce\x1df\x1eg\x0ch"


def test_jsonl_lines_split_on_newlines_only() -> None:
    text = "".join(json.dumps({"t": ODD, "k": k}, ensure_ascii=False) + "\n" for k in range(3))
    assert len(text.splitlines()) > 3  # what went wrong
    lines = jsonl_lines(text)
    assert [json.loads(x)["k"] for x in lines] == [0, 1, 2] and json.loads(lines[0])["t"] == ODD
    assert jsonl_lines("") == [] and jsonl_lines("x") == ["x"]


def test_a_resumed_sampling_keeps_every_finished_record_of_odd_text() -> None:
    from rewardsmith.data.schema import Turn

    prompts = [BonPrompt(f"p{k}", (Turn("user", "q"),)) for k in range(3)]
    text = "".join(json.dumps({"id": p.id, "responses": [ODD, "plain"]}, ensure_ascii=False) + "\n" for p in prompts)
    assert [r["id"] for r in _sampled_so_far(text, prompts, 2)] == ["p0", "p1", "p2"]
