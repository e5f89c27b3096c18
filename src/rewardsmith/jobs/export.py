"""`rewardsmith export`: a reward model as a Hugging Face folder AutoModelForSequenceClassification loads with the
same scores (models.export), written atomically and never over a folder the tool did not write."""

from __future__ import annotations

import sys
from pathlib import Path

from rewardsmith.io.outputs import check_output_folder, write_output_folder
from rewardsmith.jobs.common import JobResult
from rewardsmith.models.export import sequence_classifier_of, write_export
from rewardsmith.models.loading import load_reward_model
from rewardsmith.train.cost import write_line


def run_export(
    model: str | Path,
    out: str | Path,
    template: str = "auto",
    max_length: int | None = None,
    trust_remote_code: bool = False,
    overwrite: bool = False,
) -> JobResult:
    """Exports `model` (any kind models.loading reads) to the folder `out`."""
    check_output_folder(out, overwrite)
    loaded = load_reward_model(model, template, max_length, trust_remote_code=trust_remote_code)
    classifier = sequence_classifier_of(loaded)  # refuse what the format cannot express before writing anything
    cost = write_line(classifier, f"export to {out}")
    if cost is not None:
        print(cost, file=sys.stderr, flush=True)
    facts: dict[str, object] = {}
    write_output_folder(out, lambda folder: facts.update(write_export(loaded, folder)), "export", overwrite)
    # The chat template the tokenizer files carry: the model's own for `chat`, else one writing hh / plain text.
    template = (
        "its own chat template" if facts["template"] == "chat" else f"a chat template writing {facts['template']} text"
    )
    lines = [
        loaded.describe(),
        f"wrote {out}: {facts['architecture']} (AutoModelForSequenceClassification), tokenizer with "
        f"{template}, pad token id {facts['pad_token_id']}",
    ]
    return JobResult(Path(out), f"exported {model} -> {out}", dict(facts), [], lines)
