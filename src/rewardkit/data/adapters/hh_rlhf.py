"""HH-RLHF (arXiv:2204.05862): `hh-rlhf/harmless-base`, `hh-rlhf/helpful-base`,
`hh-rlhf/helpful-rejection-sampled`.

Files: <data_dir>/hh-rlhf/<subset>/test.jsonl.gz, rows {"chosen": transcript, "rejected": transcript}.
Only the test splits are in the data directory. Pairs whose transcripts are identical are dropped
("identical"), and so are pairs with a whitespace-only response ("empty_response"): an empty response
has no tokens to score.
"""

from __future__ import annotations

from functools import partial

from rewardkit.data.adapters._common import (
    BadRow,
    PairCollector,
    check_split,
    data_file,
    iter_jsonl,
    parse_hh_transcript,
    require_text,
    split_hh_pair,
)
from rewardkit.data.registry import DATASETS, LoadOptions, PairDataset
from rewardkit.data.schema import PreferencePair

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
    return PreferencePair(prompt=turns, chosen=chosen_response, rejected=rejected_response, label=1.0,
                          domain=domain, pair_id=pair_id)


def load_hh_rlhf(opts: LoadOptions, subset: str) -> PairDataset:
    """PairDataset of one HH-RLHF subset: gold label 1.0, pair_id "<name>:<split>:<0-based row>"."""
    name = f"hh-rlhf/{subset}"
    split = check_split(name, opts.split, HH_SPLITS, "test")
    path = data_file(opts, "hh-rlhf", subset, f"{split}.jsonl.gz")
    out = PairCollector(name, path, opts)
    for row_index, (line_no, record) in enumerate(iter_jsonl(path)):
        if out.full():
            break
        out.row_read()
        try:
            if isinstance(record, BadRow):
                raise record
            if not isinstance(record, dict):
                raise BadRow(f"expected a JSON object, got {type(record).__name__}")
            chosen = require_text(record, "chosen")
            rejected = require_text(record, "rejected")
            if chosen == rejected:
                out.drop("identical")
                continue
            pair = hh_pair_from_transcripts(chosen, rejected, name, f"{name}:{split}:{row_index}")
        except BadRow as bad:
            out.bad_row(bad.message, line_no, bad.field)
            continue
        if not pair.chosen or not pair.rejected:
            out.drop("empty_response")
            continue
        out.add(pair)
    return out.dataset


for _subset in HH_SUBSETS:
    DATASETS.add(f"hh-rlhf/{_subset}", partial(load_hh_rlhf, subset=_subset))
