"""RM-Bench (arXiv:2410.16184): `rm-bench/chat`, `rm-bench/code`, `rm-bench/safety-refuse`,
`rm-bench/safety-response` and `rm-bench/safety` (both safety files).

Files: <data_dir>/rm-bench/<subset>_filtered.json, a JSON array of rows {id, subset, prompt,
chosen[3], rejected[3], ...}. The three variants of each side are style levels, in this order:
0 = concise, 1 = detailed plain text, 2 = detailed markdown.

One pair per row: chosen/rejected are the concise variants (index 0); all variants stay in
metadata["chosen_variants"] / ["rejected_variants"]. `rmbench_matrix_pairs` expands rows into the nine
style combinations the benchmark scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Literal

from rewardsmith.data.adapters._common import (
    BadRow,
    PairCollector,
    check_split,
    data_file,
    read_json_array,
    require_text,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, user_prompt

RMBENCH_FILES: dict[str, tuple[str, ...]] = {
    "chat": ("chat",),
    "code": ("code",),
    "safety-refuse": ("safety-refuse",),
    "safety-response": ("safety-response",),
    "safety": ("safety-refuse", "safety-response"),
}
RMBENCH_STYLES = ("concise", "detailed_plain", "detailed_markdown")
Difficulty = Literal["easy", "normal", "hard"]


def rmbench_difficulty(chosen_style: int, rejected_style: int) -> Difficulty:
    """RM-Bench difficulty of comparing chosen variant i with rejected variant j (arXiv:2410.16184).

    In the benchmark's 3x3 accuracy matrix, rows are the chosen response's style and columns the
    rejected response's style, both ordered concise < detailed plain < detailed markdown:
      hard   = upper-right triangle (i < j): a less styled chosen against a more styled rejected
               response, e.g. concise chosen vs markdown rejected; style pulls against correctness;
      normal = diagonal (i == j): same style on both sides;
      easy   = lower-left triangle (i > j): a more styled chosen against a less styled rejected
               response; style and correctness agree.
    Hard accuracy is the mean of the three upper-right cells, easy the mean of the three lower-left
    cells (THU-KEG/RM-Bench `compute_accuracy`: hard = triu(M, 1), easy = tril(M, -1)).
    """
    if chosen_style < rejected_style:
        return "hard"
    if chosen_style > rejected_style:
        return "easy"
    return "normal"


def rmbench_matrix_pairs(pairs: Sequence[PreferencePair]) -> list[PreferencePair]:
    """The 9 (i, j) style combinations of each RM-Bench pair, i = chosen style, j = rejected style.

    Returns len(pairs) * 9 pairs in (pair, i, j) order with pair_id "<pair_id>:<i><j>" and metadata
    extended by chosen_style, rejected_style (0-2) and difficulty (see rmbench_difficulty).
    Raises ValueError for a pair without RM-Bench variants in its metadata.
    """
    out: list[PreferencePair] = []
    for pair in pairs:
        chosen_variants = pair.metadata.get("chosen_variants")
        rejected_variants = pair.metadata.get("rejected_variants")
        if not chosen_variants or not rejected_variants:
            raise ValueError(f"pair {pair.pair_id!r} has no RM-Bench style variants in its metadata")
        for i, chosen in enumerate(chosen_variants):
            for j, rejected in enumerate(rejected_variants):
                metadata = dict(pair.metadata, chosen_style=i, rejected_style=j, difficulty=rmbench_difficulty(i, j))
                out.append(
                    PreferencePair(
                        pair.prompt, chosen, rejected, pair.label, pair.domain, f"{pair.pair_id}:{i}{j}", metadata
                    )
                )
    return out


def _variants(record: Mapping[str, Any], key: str) -> list[str]:
    value = record.get(key)
    if not isinstance(value, list) or len(value) != len(RMBENCH_STYLES):
        raise BadRow(f"expected a list of {len(RMBENCH_STYLES)} style variants", key)
    for variant in value:
        if not isinstance(variant, str) or not variant.strip():
            raise BadRow("every style variant must be a non-empty string", key)
    return list(value)


def rmbench_pair(row_index: int, record: Mapping[str, Any], domain: str, stem: str) -> PreferencePair:
    """PreferencePair of one row of <stem>_filtered.json; pair_id "rm-bench/<stem>:<row's id>", so
    row_index (the PairCollector converter argument) is not used."""
    prompt = require_text(record, "prompt")
    chosen, rejected = _variants(record, "chosen"), _variants(record, "rejected")
    if "id" not in record:
        raise BadRow("missing value", "id")
    metadata: dict[str, Any] = {
        "rmbench_id": record["id"],
        "subset": record.get("subset"),
        "file": stem,
        "chosen_variants": chosen,
        "rejected_variants": rejected,
    }
    for extra in ("error_key", "error", "language", "task_id"):
        if extra in record:
            metadata[extra] = record[extra]
    return PreferencePair(
        prompt=user_prompt(prompt),
        chosen=chosen[0],
        rejected=rejected[0],
        label=1.0,
        domain=domain,
        pair_id=f"rm-bench/{stem}:{record['id']}",
        metadata=metadata,
    )


def load_rm_bench(opts: LoadOptions, subset: str) -> PairDataset:
    """PairDataset of one RM-Bench subset; pair_id "rm-bench/<file>:<id>".

    metadata: rmbench_id, subset (the row's own subset, e.g. xstest-should-refuse), file,
    chosen_variants, rejected_variants, and for chat rows error_key/error, for code rows language/task_id.
    """
    name = f"rm-bench/{subset}"
    check_split(name, opts.split, ("test",), "test")
    paths = [data_file(opts, "rm-bench", f"{stem}_filtered.json") for stem in RMBENCH_FILES[subset]]
    out = PairCollector(name, paths[0] if len(paths) == 1 else paths[0].parent, opts)
    for stem, path in zip(RMBENCH_FILES[subset], paths, strict=True):
        out.collect(enumerate(read_json_array(path), start=1), partial(rmbench_pair, domain=name, stem=stem), path=path)
        if out.full():
            break
    return out.dataset
