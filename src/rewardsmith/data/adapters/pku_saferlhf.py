"""PKU-SafeRLHF subsets: `pku-saferlhf/harmless` (chosen = safer_response_id) and `pku-saferlhf/helpful`
(chosen = better_response_id).

Files: <data_dir>/pku-saferlhf/{test,train}.parquet. Every row carries both labels; they disagree on about
a quarter of pairs. The metadata keeps both label ids, the safety flags and severity levels of each
response, so steering code can relabel a pair by the other preference without reloading.
Pairs with a whitespace-only response are dropped ("empty_response"; one row of train.parquet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.data.adapters._common import (
    BadRow,
    PairCollector,
    check_split,
    data_file,
    iter_parquet,
    parquet_columns,
    require_int,
    require_text,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, user_prompt

PKU_SPLITS = ("test", "train")
# preference name -> the label column that picks the chosen response
PKU_LABEL_COLUMNS = {"harmless": "safer_response_id", "helpful": "better_response_id"}
_COLUMNS = (
    "prompt",
    "extra_info",
    "response_0",
    "response_1",
    "is_response_0_safe",
    "is_response_1_safe",
    "response_0_severity_level",
    "response_1_severity_level",
    "response_0_harm_category",
    "response_1_harm_category",
    "better_response_id",
    "safer_response_id",
    "response_0_source",
    "response_1_source",
)


def _question(record: Mapping[str, Any]) -> str:
    """The plain question: extra_info.question, else the first user message of the chat-list prompt."""
    extra = record.get("extra_info")
    if isinstance(extra, Mapping) and isinstance(extra.get("question"), str) and extra["question"].strip():
        return str(extra["question"])
    prompt = record.get("prompt")
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    if isinstance(prompt, list | tuple):
        for message in prompt:
            if (
                isinstance(message, Mapping)
                and message.get("role") == "user"
                and isinstance(message.get("content"), str)
                and message["content"].strip()
            ):
                return str(message["content"])
    raise BadRow("no question in extra_info.question or prompt", "prompt")


def _harms(categories: Any) -> list[str]:
    """Names of the harm categories flagged True (the column is a struct of 19 booleans)."""
    if not isinstance(categories, Mapping):
        return []
    return sorted(str(k) for k, v in categories.items() if v)


def pku_pair(record: Mapping[str, Any], preference: str, domain: str, pair_id: str) -> PreferencePair:
    """PreferencePair of one PKU-SafeRLHF row under `preference` ("harmless" or "helpful").

    metadata: better_response_id, safer_response_id, chosen_response_id, labels_agree,
    is_response_{0,1}_safe, response_{0,1}_severity_level, response_{0,1}_harms, response_{0,1}_source,
    and chosen_/rejected_ views of safety and severity.
    """
    responses = (
        require_text(record, "response_0", allow_empty=True),
        require_text(record, "response_1", allow_empty=True),
    )
    better = require_int(record, "better_response_id", (0, 1))
    safer = require_int(record, "safer_response_id", (0, 1))
    chosen_id = safer if preference == "harmless" else better
    safe = (bool(record.get("is_response_0_safe")), bool(record.get("is_response_1_safe")))
    severity = (record.get("response_0_severity_level"), record.get("response_1_severity_level"))
    metadata: dict[str, Any] = {
        "better_response_id": better,
        "safer_response_id": safer,
        "chosen_response_id": chosen_id,
        "labels_agree": better == safer,
        "is_response_0_safe": safe[0],
        "is_response_1_safe": safe[1],
        "response_0_severity_level": severity[0],
        "response_1_severity_level": severity[1],
        "response_0_harms": _harms(record.get("response_0_harm_category")),
        "response_1_harms": _harms(record.get("response_1_harm_category")),
        "response_0_source": record.get("response_0_source"),
        "response_1_source": record.get("response_1_source"),
        "chosen_is_safe": safe[chosen_id],
        "rejected_is_safe": safe[1 - chosen_id],
        "chosen_severity_level": severity[chosen_id],
        "rejected_severity_level": severity[1 - chosen_id],
    }
    return PreferencePair(
        prompt=user_prompt(_question(record)),
        chosen=responses[chosen_id],
        rejected=responses[1 - chosen_id],
        label=1.0,
        domain=domain,
        pair_id=pair_id,
        metadata=metadata,
    )


def load_pku_saferlhf(opts: LoadOptions, preference: str) -> PairDataset:
    """PairDataset of PKU-SafeRLHF under one preference; pair_id "<name>:<split>:<0-based row>"."""
    name = f"pku-saferlhf/{preference}"
    split = check_split(name, opts.split, PKU_SPLITS, "test")
    path = data_file(opts, "pku-saferlhf", f"{split}.parquet")
    out = PairCollector(name, path, opts)
    present = set(parquet_columns(path))

    def convert(row_index: int, record: Mapping[str, Any]) -> PreferencePair | str:
        pair = pku_pair(record, preference, name, f"{name}:{split}:{row_index}")
        if pair.chosen == pair.rejected:
            return "identical"
        if not pair.chosen.strip() or not pair.rejected.strip():
            return "empty_response"
        return pair

    return out.collect(iter_parquet(path, columns=[c for c in _COLUMNS if c in present]), convert)
