"""HH-RLHF (arXiv:2204.05862): `hh-rlhf/harmless-base`, `hh-rlhf/helpful-base`,
`hh-rlhf/helpful-rejection-sampled`.

Files: <data_dir>/hh-rlhf/<subset>/test.jsonl.gz, rows {"chosen": transcript, "rejected": transcript}.
Only the test splits are in the data directory. Pairs whose transcripts are identical are dropped
("identical"), and so are pairs with a whitespace-only response ("empty_response"): an empty response
has no tokens to score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.data.adapters._common import (
    BadRow,
    PairCollector,
    check_split,
    data_file,
    iter_jsonl,
    parse_hh_transcript,
    require_text,
    split_hh_pair,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair

HH_SUBSETS = ("harmless-base", "helpful-base", "helpful-rejection-sampled")
HH_SPLITS = ("test",)


def hh_pair_from_transcripts(chosen: str, rejected: str, domain: str, pair_id: str) -> PreferencePair:
    """One PreferencePair from two full HH transcripts (prompt turns + both final responses).

    Raises BadRow when the transcripts share no assistant cue. Empty responses are returned as "";
    the caller decides whether to drop them.
    """
    prompt_text, chosen_response, rejected_response = split_hh_pair(chosen, rejected)
    turns = parse_hh_transcript(prompt_text)
    if not turns:
        raise BadRow("empty prompt", "chosen")
    return PreferencePair(
        prompt=turns, chosen=chosen_response, rejected=rejected_response, label=1.0, domain=domain, pair_id=pair_id
    )


def load_hh_rlhf(opts: LoadOptions, subset: str) -> PairDataset:
    """PairDataset of one HH-RLHF subset: gold label 1.0, pair_id "<name>:<split>:<0-based row>"."""
    name = f"hh-rlhf/{subset}"
    split = check_split(name, opts.split, HH_SPLITS, "test")
    path = data_file(opts, "hh-rlhf", subset, f"{split}.jsonl.gz")

    def convert(row_index: int, record: Mapping[str, Any]) -> PreferencePair | str:
        chosen = require_text(record, "chosen")
        rejected = require_text(record, "rejected")
        if chosen == rejected:
            return "identical"
        pair = hh_pair_from_transcripts(chosen, rejected, name, f"{name}:{split}:{row_index}")
        if not pair.chosen or not pair.rejected:
            return "empty_response"
        return pair

    return PairCollector(name, path, opts).collect(iter_jsonl(path), convert)
