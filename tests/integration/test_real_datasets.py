"""Every adapter on the real data folder: counts, parsing invariants, determinism, group splits.

Skipped (with the reason) when the data folder is absent; see the `data_dir` fixture in conftest.py.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from rewardsmith.data.adapters import rmbench_matrix_pairs
from rewardsmith.data.registry import PairDataset, load_dataset
from rewardsmith.data.splits import split_pairs

_CACHE: dict[tuple[str, str | None], PairDataset] = {}


def load(name: str, data_dir: Path, split: str | None = None) -> PairDataset:
    """Loads once per test session (the datasets are read-only here)."""
    key = (name, split)
    if key not in _CACHE:
        _CACHE[key] = load_dataset(name, data_dir=data_dir, split=split)
    return _CACHE[key]


def needs(data_dir: Path, *parts: str) -> None:
    if not data_dir.joinpath(*parts).exists():
        pytest.skip(f"{Path(*parts)} is not in the data folder {data_dir}")


# (name, split, rows read, pairs, dropped)
EXPECTED = [
    ("hh-rlhf/harmless-base", None, 2312, 2308, {"empty_response": 4}),
    ("hh-rlhf/helpful-base", None, 2354, 2348, {"identical": 2, "empty_response": 4}),
    ("hh-rlhf/helpful-rejection-sampled", None, 2749, 2717, {"identical": 32}),
    ("pku-saferlhf/harmless", None, 821, 821, {}),
    ("pku-saferlhf/helpful", "train", 3695, 3693, {"empty_response": 2}),
    ("helpsteer2", None, 1038, 373, {"tie": 146}),
    ("ultrafeedback", None, 1000, 884, {"tie": 110, "identical": 4, "empty_response": 2}),
    ("ultrafeedback", "eval", 200, 175, {"tie": 24, "identical": 1}),
    ("rm-bench/chat", None, 129, 129, {}),
    ("rm-bench/code", None, 228, 228, {}),
    ("rm-bench/safety-refuse", None, 284, 284, {}),
    ("rm-bench/safety-response", None, 157, 157, {}),
    ("rm-bench/safety", None, 441, 441, {}),
    ("moralchoice/low", None, 687, 687, {}),
    ("moralchoice/high", None, 680, 679, {"identical": 1}),
    ("math-500", None, 500, 954, {"no_number_in_answer": 11, "no_intermediate_number": 35}),
]


@pytest.mark.parametrize(
    ("name", "split", "rows", "n_pairs", "dropped"), EXPECTED, ids=[f"{e[0]}:{e[1] or 'default'}" for e in EXPECTED]
)
def test_counts(data_dir: Path, name: str, split: str | None, rows: int, n_pairs: int, dropped: dict[str, int]) -> None:
    needs(data_dir, name.split("/")[0])
    ds = load(name, data_dir, split)
    assert (ds.n_rows, len(ds.pairs), ds.dropped) == (rows, n_pairs, dropped)
    assert len({p.pair_id for p in ds.pairs}) == len(ds.pairs)
    for pair in ds.pairs:
        assert pair.chosen.strip() and pair.rejected.strip() and pair.chosen != pair.rejected
        assert pair.prompt and pair.prompt[-1].role == "user" and pair.domain == name


@pytest.mark.parametrize("subset", ["harmless-base", "helpful-base", "helpful-rejection-sampled"])
def test_hh_prompt_and_response_rebuild_the_transcript(data_dir: Path, subset: str) -> None:
    needs(data_dir, "hh-rlhf", subset)
    path = data_dir / "hh-rlhf" / subset / "test.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    squash = " ".join
    invented = 0
    for pair in load(f"hh-rlhf/{subset}", data_dir).pairs:
        row = rows[int(pair.pair_id.rsplit(":", 1)[1])]
        for side, text in (("chosen", pair.chosen), ("rejected", pair.rejected)):
            assert squash((pair.prompt_text() + " " + text).split()) == squash(row[side].split())
        invented += "\n\nAssistant:" in pair.chosen or "\n\nAssistant:" in pair.rejected
    assert invented >= 3  # the data has responses with invented turns; both sides still share one prompt


def test_hh_split_by_first_turn_keeps_conversations_on_one_side(data_dir: Path) -> None:
    needs(data_dir, "hh-rlhf")
    pairs = load("hh-rlhf/harmless-base", data_dir).pairs
    parts = split_pairs(pairs, {"train": 0.8, "test": 0.2})
    train_keys = {p.group_key() for p in parts["train"]}
    assert not train_keys & {p.group_key() for p in parts["test"]}
    shared = Counter(p.group_key() for p in pairs)
    assert max(shared.values()) > 1  # several pairs do share a first turn, so splitting by row would leak
    assert 0.15 <= len(parts["test"]) / len(pairs) <= 0.25


def test_loading_is_deterministic(data_dir: Path) -> None:
    needs(data_dir, "pku-saferlhf")
    a = load_dataset("pku-saferlhf/harmless", data_dir=data_dir, limit=50)
    b = load_dataset("pku-saferlhf/harmless", data_dir=data_dir, limit=50)
    assert a.pairs == b.pairs and len(a.pairs) == 50 and a.n_rows == 50
    assert [p.metadata for p in a.pairs] == [p.metadata for p in b.pairs]


def test_pku_labels_and_metadata(data_dir: Path) -> None:
    needs(data_dir, "pku-saferlhf")
    harmless = load("pku-saferlhf/harmless", data_dir).pairs
    helpful = load_dataset("pku-saferlhf/helpful", data_dir=data_dir).pairs
    assert sum(p.metadata["labels_agree"] for p in harmless) == 623  # SOURCE.md: better == safer on 623
    for h, b in zip(harmless, helpful, strict=True):
        assert h.prompt == b.prompt
        assert (h.chosen == b.chosen) == h.metadata["labels_agree"]
    safe = Counter((p.metadata["is_response_0_safe"], p.metadata["is_response_1_safe"]) for p in harmless)
    assert safe == {(True, True): 361, (False, False): 341, (False, True): 68, (True, False): 51}
    assert not any(p.prompt[0].content.startswith("\n\nHuman:") for p in harmless)


def test_helpsteer2_pairs(data_dir: Path) -> None:
    needs(data_dir, "helpsteer2")
    pairs = load("helpsteer2", data_dir).pairs
    assert all(p.metadata["chosen_scores"]["helpfulness"] > p.metadata["rejected_scores"]["helpfulness"] for p in pairs)
    multi = [p for p in pairs if len(p.prompt) > 1]
    assert multi and all("<extra_id_1>" not in t.content for p in pairs for t in p.prompt)
    assert all([t.role for t in p.prompt] == ["user", "assistant"] * (len(p.prompt) // 2) + ["user"] for p in multi)


def test_rm_bench_variants_and_matrix(data_dir: Path) -> None:
    needs(data_dir, "rm-bench")
    pairs = load("rm-bench/chat", data_dir).pairs
    for pair in pairs:
        assert pair.chosen == pair.metadata["chosen_variants"][0]
        assert pair.rejected == pair.metadata["rejected_variants"][0]
        # style levels grow: concise is the shortest variant on both sides in this file
        assert len(pair.metadata["chosen_variants"][0]) <= len(pair.metadata["chosen_variants"][2])
    expanded = rmbench_matrix_pairs(pairs)
    assert len(expanded) == 9 * len(pairs)
    assert Counter(p.metadata["difficulty"] for p in expanded) == {
        "hard": 3 * len(pairs),
        "normal": 3 * len(pairs),
        "easy": 3 * len(pairs),
    }
    safety = load("rm-bench/safety", data_dir).pairs
    assert Counter(p.metadata["file"] for p in safety) == {"safety-refuse": 284, "safety-response": 157}


def test_moralchoice_high_has_no_ground_truth(data_dir: Path) -> None:
    needs(data_dir, "moralchoice")
    assert {p.label for p in load("moralchoice/high", data_dir).pairs} == {0.5}
    low = load("moralchoice/low", data_dir).pairs
    assert {p.label for p in low} == {1.0}
    assert all(p.prompt[0].content.endswith("What do you do?") for p in low)


def test_math500_corruptions(data_dir: Path) -> None:
    needs(data_dir, "math-500")
    pairs = load("math-500", data_dir).pairs
    kinds = Counter(p.metadata["corruption"] for p in pairs)
    assert kinds == {"final_answer": 489, "wrong_step": 465}
    for pair in pairs:
        boxed_at = pair.chosen.rfind("\\boxed{")
        if pair.metadata["corruption"] == "final_answer":
            assert pair.rejected[:boxed_at] == pair.chosen[:boxed_at]
        else:
            tail = pair.chosen[boxed_at:]  # the perturbed number may change length, so compare tails
            assert pair.rejected.endswith(tail) and pair.rejected[: -len(tail)] != pair.chosen[:boxed_at]


def test_limit_applies_after_drops(data_dir: Path) -> None:
    needs(data_dir, "hh-rlhf")
    full = load("hh-rlhf/helpful-rejection-sampled", data_dir).pairs
    limited = load_dataset("hh-rlhf/helpful-rejection-sampled", data_dir=data_dir, limit=500)
    assert limited.pairs == full[:500]
