"""MoralChoice (arXiv:2307.14324): `moralchoice/low` and `moralchoice/high`.

Files: <data_dir>/moralchoice/moralchoice_{low,high}_ambiguity.csv; one scenario per row with a
second-person `context` ("You are a surgeon ...") and two first-person actions ("I follow ...").

Framing: the scenario becomes a user turn that asks the assistant what it would do,
"<context> What do you do?", and each action is an assistant reply in the first person, as in the
paper's own question templates (the scenario followed by a question about the model's choice).

Low ambiguity: action1 is the rule-consistent action, so chosen = action1, rejected = action2, label 1.0.
High ambiguity: there is no ground truth; the pair keeps file order (action1, action2) with label 0.5
and metadata["ground_truth"] = False. Use it for steerability and uncertainty, not for accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.data.adapters._common import (
    PairCollector,
    check_split,
    csv_columns,
    data_file,
    iter_csv,
    require_text,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.errors import DataError

MORALCHOICE_AMBIGUITIES = ("low", "high")  # one file, and one dataset, each
MORALCHOICE_QUESTION = "What do you do?"
MORALCHOICE_RULES = (
    "death",
    "pain",
    "disable",
    "freedom",
    "pleasure",
    "deceive",
    "cheat",
    "break_promise",
    "break_law",
    "duty",
)
_REQUIRED = ("scenario_id", "context", "action1", "action2")


def moralchoice_prompt(context: str) -> str:
    """The user turn of a MoralChoice scenario: the context followed by the question."""
    return f"{context.strip()} {MORALCHOICE_QUESTION}"


def load_moralchoice(opts: LoadOptions, ambiguity: str) -> PairDataset:
    """PairDataset of MoralChoice scenarios; pair_id "moralchoice/<ambiguity>:<scenario_id>".

    metadata: scenario_id, ambiguity, generation_rule, ground_truth (bool), note, and
    action1_rules / action2_rules (rule -> "Yes" / "No" / "No Agreement" as annotated).
    """
    name = f"moralchoice/{ambiguity}"
    check_split(name, opts.split, ("test",), "test")
    path = data_file(opts, "moralchoice", f"moralchoice_{ambiguity}_ambiguity.csv")
    header = csv_columns(path)
    for column in _REQUIRED:
        if column not in header:
            raise DataError(f"column {column!r} not found; columns: {', '.join(header)}", path=path)
    has_truth = ambiguity == "low"

    def convert(row_index: int, record: Mapping[str, Any]) -> PreferencePair | str:
        context = require_text(record, "context")
        action1, action2 = require_text(record, "action1"), require_text(record, "action2")
        if action1.strip() == action2.strip():
            return "identical"
        metadata: dict[str, Any] = {
            "scenario_id": record["scenario_id"],
            "ambiguity": ambiguity,
            "generation_rule": record.get("generation_rule"),
            "ground_truth": has_truth,
            "note": "action1 is the rule-consistent action"
            if has_truth
            else "no ground truth: order is the file's, label 0.5",
            "action1_rules": {r: record.get(f"a1_{r}") for r in MORALCHOICE_RULES if f"a1_{r}" in record},
            "action2_rules": {r: record.get(f"a2_{r}") for r in MORALCHOICE_RULES if f"a2_{r}" in record},
        }
        return PreferencePair(
            prompt=user_prompt(moralchoice_prompt(context)),
            chosen=action1.strip(),
            rejected=action2.strip(),
            label=1.0 if has_truth else 0.5,
            domain=name,
            pair_id=f"{name}:{record['scenario_id']}",
            metadata=metadata,
        )

    return PairCollector(name, path, opts).collect(iter_csv(path), convert)
