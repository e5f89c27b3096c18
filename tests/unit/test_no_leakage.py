"""No evaluation pair shares a conversation (the first human turn) with a training pair, in every pipeline that
trains: `rewardsmith train` (held-out, validation and other evaluation sets), the weak-to-strong pipeline (gold
and W2S pools against ID, validation and targets) and, in test_icrm_heldout.py, the ICRM's episodes. The data
are built so that overlaps exist: each evaluation file repeats some training conversations (in other casing
and spacing, which the conversation key ignores), and the tests show they are dropped and counted.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rewardsmith.config import DataConfig, DatasetConfig
from rewardsmith.data.prepare import prepare_data
from rewardsmith.data.schema import PreferencePair
from rewardsmith.w2s.config import ShiftConfig, ShiftSplitConfig
from rewardsmith.w2s.pipeline import prepare_data as prepare_shift_data


def _write(path: Path, rows: list[dict[str, str]]) -> DatasetConfig:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return DatasetConfig("file", path=str(path))


def _rows(n: int, tag: str, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [{"prompt": f"{tag} question number {i} about {rng.choice(['cats', 'tax', 'rust', 'tea'])}",
             "chosen": f"a careful answer {i}", "rejected": f"a careless answer {i}"} for i in range(n)]


@pytest.fixture
def files(tmp_path: Path) -> tuple[DatasetConfig, DatasetConfig, list[dict[str, str]]]:
    source = _rows(400, "source", 0)
    # The target repeats 58 source conversations (other case and spacing: the same first human turn) among
    # 100 of its own.
    repeats = [{**r, "prompt": "  " + r["prompt"].upper() + " ", "chosen": "another answer"} for r in source[::7]]
    target = _rows(100, "target", 1) + repeats
    return _write(tmp_path / "source.jsonl", source), _write(tmp_path / "target.jsonl", target), repeats


def _keys(pairs: list[PreferencePair]) -> set[str]:
    return {p.group_key() for p in pairs}


def test_train_pipeline_keeps_evaluation_conversations_out_of_training(files) -> None:
    source, target, repeats = files
    data = prepare_data(DataConfig(train=source, eval=[target], train_fraction=0.6, val_fraction=0.2))
    training = _keys(data.train)
    for name, pairs in data.eval_sets.items():
        assert pairs and not (_keys(pairs) & training), name
    # Repeats of conversations in the training part are dropped and counted; repeats of held-out ones stay.
    removed = data.summaries["target.jsonl"]["overlap_removed"]
    assert 0 < removed < len(repeats)
    assert len(data.eval_sets["target.jsonl"]) == 100 + len(repeats) - removed


def test_shift_pipeline_keeps_targets_id_and_validation_out_of_training(files) -> None:
    source, target, _ = files
    cfg = ShiftConfig(source=source, targets=[target],
                      split=ShiftSplitConfig(gold_fraction=0.2, w2s_fraction=0.4, id_fraction=0.3, val_fraction=0.1,
                                             target_pairs=None))
    data = prepare_shift_data(cfg)
    training = _keys(data.gold) | _keys(data.w2s)
    assert data.val and not (_keys(data.val) & training)
    for name, pairs in data.eval.items():
        assert pairs and not (_keys(pairs) & training), name
    assert data.overlap_removed["target.jsonl"] > 0
    # The ID test, the validation split and the training pools are disjoint by construction of the hash split.
    assert not (_keys(data.eval["id"]) & _keys(data.val))
