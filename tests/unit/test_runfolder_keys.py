"""Which config keys make a run folder's earlier run another run (io.runfolder.differing_keys)."""

from __future__ import annotations

from rewardsmith.io.runfolder import differing_keys


def test_a_setting_added_since_and_left_off_is_no_difference() -> None:
    old = {"train.seed": 0, "data.train.name": "hh-rlhf/helpful-base"}
    assert differing_keys(old, {**old, "data.bootstrap": None}) == []
    assert differing_keys(old, {**old, "data.bootstrap": 3}) == ["data.bootstrap"]
    assert differing_keys({**old, "data.bootstrap": None}, old) == ["data.bootstrap"]  # dropped: not the same config
    assert differing_keys(old, {**old, "train.seed": 1}) == ["train.seed"]
    assert differing_keys(old, {**old, "train.seed": 1}, volatile=["train.seed"]) == []
