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
from rewardsmith.data.prepare import train_data as prepare_data
from rewardsmith.data.schema import PreferencePair
from rewardsmith.w2s.config import ShiftConfig, ShiftSplitConfig
from rewardsmith.w2s.pipeline import shift_data as prepare_shift_data


def _write(path: Path, rows: list[dict[str, str]]) -> DatasetConfig:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return DatasetConfig("file", path=str(path))


def _rows(n: int, tag: str, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [
        {
            "prompt": f"{tag} question number {i} about {rng.choice(['cats', 'tax', 'rust', 'tea'])}",
            "chosen": f"a careful answer {i}",
            "rejected": f"a careless answer {i}",
        }
        for i in range(n)
    ]


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
    cfg = ShiftConfig(
        source=source,
        targets=[target],
        split=ShiftSplitConfig(
            gold_fraction=0.2, w2s_fraction=0.4, id_fraction=0.3, val_fraction=0.1, target_pairs=None
        ),
    )
    data = prepare_shift_data(cfg)
    training = _keys(data.gold) | _keys(data.w2s)
    assert data.val and not (_keys(data.val) & training)
    for name, pairs in data.eval.items():
        assert pairs and not (_keys(pairs) & training), name
    assert data.overlap_removed["target.jsonl"] > 0
    # The ID test, the validation split and the training pools are disjoint by construction of the hash split.
    assert not (_keys(data.eval["id"]) & _keys(data.val))


# ----------------------------------------------------------------------------------------------------
# The same on the real data: a punctuation- and case-insensitive match of prompts (the first human turn, the key
# of every split, reduced to its letters and digits) between every training pool and every evaluation set of the
# committed configs. Stricter than the split's own key (which ignores only case and outer spaces): a conversation
# repeated with other punctuation or inner spacing would show up here.

ROOT = Path(__file__).resolve().parents[2]


def _loose(pair: PreferencePair) -> str:
    return "".join(ch for ch in pair.first_user_turn().lower() if ch.isalnum())


def _overlap(training: list[PreferencePair], evaluated: list[PreferencePair]) -> list[str]:
    keys = {_loose(p) for p in training}
    return sorted({p.first_user_turn()[:80] for p in evaluated if _loose(p) in keys})


@pytest.mark.slow
@pytest.mark.parametrize("config", ["shift-harmless.yaml", "shift-helpful.yaml"])
def test_real_shift_runs_share_no_prompt_between_training_and_evaluation(config: str, data_dir: Path) -> None:
    from rewardsmith.config import load_yaml

    cfg = load_yaml(ShiftConfig, ROOT / "configs" / config)
    data = prepare_shift_data(cfg, data_dir)
    training = data.gold + data.w2s
    for name, pairs in {**data.eval, "validation": data.val}.items():
        assert pairs, name
        assert not _overlap(training, pairs), f"{config}: {name} repeats training prompts"


@pytest.mark.slow
@pytest.mark.parametrize("config", ["train-harmless.yaml", "train-helpful.yaml"])
def test_real_train_runs_share_no_prompt_between_training_and_evaluation(config: str, data_dir: Path) -> None:
    from rewardsmith.config import RunConfig, load_yaml

    cfg = load_yaml(RunConfig, ROOT / "configs" / config)
    cfg.data.data_dir = str(data_dir)
    data = prepare_data(cfg.data)
    for name, pairs in data.eval_sets.items():
        assert not _overlap(data.train, pairs), f"{config}: {name} repeats training prompts"


@pytest.mark.slow
def test_real_icrm_protocol_targets_share_no_prompt_with_training(data_dir: Path) -> None:
    from rewardsmith.config import load_yaml
    from rewardsmith.icrm.config import ICRMRunConfig
    from rewardsmith.icrm.protocols.context import MATH, MORAL, PKU, RMBENCH_SUBSETS, EvalContext

    cfg = load_yaml(ICRMRunConfig, ROOT / "configs" / "icrm-minilm.yaml")
    cfg.data_dir = str(data_dir)
    # Only the split and the overlap filter are used: no model is needed to pick the targets.
    ctx = EvalContext(cfg, None, None, None, False, None)  # type: ignore[arg-type]
    training = [p for source in cfg.episodes.sources for p in ctx.pools(source)["train"].pairs]
    for source in (PKU, MORAL, MATH, *RMBENCH_SUBSETS):
        targets = ctx.test_pool(source).pairs
        assert targets, source
        assert not _overlap(training, targets), f"{source}: protocol targets repeat training prompts"
