"""`rewardsmith examples`: small real files to try every command on, written from the data sample shipped in
the package (MIT-licensed HH-RLHF and PluriHarms rows; see resources/sample/SOURCE.md):

- pairs.jsonl       60 HH-RLHF harmless pairs: {"prompt" (an HH transcript), "chosen", "rejected"};
- heldout.jsonl     40 more pairs from other conversations, to evaluate on;
- responses.jsonl   single responses to score: {"prompt", "response"};
- demos.jsonl       8 demonstrations of a flipped standard (the less harmless response shown as preferred);
- bon-prompts.jsonl 6 prompts of held-out conversations, each with one or two verifiable instructions attached
                    (IFEval's checkers), for `rewardsmith bon --gold ifeval`;
- ratings.csv       PluriHarms harm ratings in long format: rater_id, item_id, score (0-100), model_score
                    (the prompt's Harm_Level classifier score), response (the rated prompt's text, which
                    `calibrate --model` scores), and two demographic columns of the raters.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from rewardsmith.data.ratings import load_ratings
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.sources import sample_dir
from rewardsmith.data.splits import split_pairs
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import JobResult, written_line
from rewardsmith.rollouts.instructions import attach_instructions
from rewardsmith.rollouts.prompt import BonPrompt, prompt_id
from rewardsmith.rollouts.prompts import prompts_jsonl

FILES = ("pairs.jsonl", "heldout.jsonl", "responses.jsonl", "demos.jsonl", "bon-prompts.jsonl", "ratings.csv")
BON_PROMPTS = 6


def _jsonl(rows: list[dict[str, str]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def write_examples(out: str | Path, overwrite: bool = False) -> JobResult:
    """Writes the example files into the folder `out` (a run folder: nothing of anyone else's is replaced;
    overwrite: write them again, or beside files of someone else's)."""
    with (
        sample_dir() as data_dir,
        RunFolder.open(out, "examples", {"files": list(FILES)}, overwrite=overwrite) as folder,
    ):
        pairs = load_dataset("hh-rlhf/harmless-base", data_dir=data_dir).pairs
        parts = split_pairs(pairs, {"train": 0.8, "heldout": 0.2}, salt="examples")
        train, heldout = parts["train"], parts["heldout"]

        def row(p) -> dict[str, str]:
            return {"prompt": p.prompt_text().strip(), "chosen": p.chosen, "rejected": p.rejected}

        folder.write_text("pairs.jsonl", _jsonl([row(p) for p in train[:60]]))
        folder.write_text("heldout.jsonl", _jsonl([row(p) for p in heldout[:40]]))
        responses = [
            {"prompt": p.prompt_text().strip(), "response": text}
            for p in train[60:70]
            for text in (p.chosen, p.rejected)
        ]
        folder.write_text("responses.jsonl", _jsonl(responses))
        flipped = [
            {"prompt": p.prompt_text().strip(), "chosen": p.rejected, "rejected": p.chosen} for p in train[70:78]
        ]
        folder.write_text("demos.jsonl", _jsonl(flipped))
        prompts = [BonPrompt(prompt_id(p.prompt), p.prompt) for p in heldout[40 : 40 + BON_PROMPTS]]
        folder.write_text("bon-prompts.jsonl", prompts_jsonl([attach_instructions(p, seed=0) for p in prompts]))
        ratings = load_ratings("pluriharms", data_dir=data_dir)
        table = ratings.frame.copy()
        table["response"] = table["item_id"].map(lambda item: ratings.items[item][1])  # the rated prompt's text
        columns = ["rater_id", "item_id", "score", "model_score", "response", "Race_Ethnicity", "Gender"]
        buffer = io.StringIO()
        table[columns].to_csv(buffer, index=False, quoting=csv.QUOTE_MINIMAL)
        folder.write_text("ratings.csv", buffer.getvalue())
        folder.mark_complete()
        return JobResult(
            folder.path,
            f"example files -> {folder.path}",
            {"files": list(FILES)},
            [],
            [written_line(folder, list(FILES))],
        )
