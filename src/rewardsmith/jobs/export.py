"""`rewardsmith export`: a reward model as a Hugging Face folder AutoModelForSequenceClassification loads with the
same scores (models.export), written atomically and never over a folder the tool did not write."""

from __future__ import annotations

from pathlib import Path

from rewardsmith.io.outputs import check_output_folder, write_output_folder
from rewardsmith.jobs.common import JobResult
from rewardsmith.models.export import sequence_classifier_of, write_export
from rewardsmith.models.loading import load_reward_model


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
    sequence_classifier_of(loaded)  # refuse what the format cannot express before writing anything
    facts: dict[str, object] = {}
    write_output_folder(out, lambda folder: facts.update(write_export(loaded, folder)), "export", overwrite)
    lines = [
        loaded.describe(),
        f"wrote {out}: {facts['architecture']} (AutoModelForSequenceClassification), tokenizer with the "
        f"{facts['template']} chat template, pad token id {facts['pad_token_id']}",
    ]
    return JobResult(Path(out), f"exported {model} -> {out}", dict(facts), [], lines)
