"""The lines that say what each dataset gave a run add up: what was read = used + set aside + dropped."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rewardsmith.jobs.common import dataset_lines


def figures(line: str) -> tuple[int, list[int]]:
    """(what was read, the other figures) of a dataset line, reasons in parentheses left out."""
    body = re.sub(r"\s*\([^)]*\)", "", line.split(": ", 1)[1])
    numbers = [int(part.split()[0]) for part in body.split(", ")]
    return numbers[0], numbers[1:]


def test_read_is_used_plus_set_aside_plus_dropped() -> None:
    line = dataset_lines({"x": {"label": "x", "rows": 523, "pairs": 500, "dropped": {"identical": 23}, "used": 500}})[0]
    assert line == "read x: 523 rows read, 500 used, 23 dropped (identical 23)"
    # What a summary does not account for is said, so the line still adds up.
    line = dataset_lines({"y": {"label": "y", "pairs": 100, "used": 90, "overlap_removed": 4}})[0]
    assert line == "read y: 100 pairs, 90 used, 6 not used, 4 dropped (shares a conversation with training 4)"


def test_the_lines_of_a_train_run_add_up(tmp_path: Path) -> None:
    from rewardsmith.config import DataConfig, DatasetConfig
    from rewardsmith.data.prepare import train_data

    rows = [{"prompt": f"question {i}?", "chosen": f"a good answer {i}", "rejected": f"no {i}"} for i in range(120)]
    rows += [{"prompt": "same?", "chosen": "same", "rejected": "same"}] * 7  # identical sides: dropped
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source = DatasetConfig(name="file", path=str(path))
    again = DatasetConfig(name="file", path=str(path), limit=60)  # shares conversations with training
    cfg = DataConfig(train=source, eval=[again], val_fraction=0.1, train_pairs=50, eval_pairs=5)
    lines = dataset_lines(train_data(cfg).summaries)
    assert len(lines) == 4, lines
    for line in lines:
        read, rest = figures(line)
        assert read == sum(rest) and "not used" not in line, line
    assert lines[0].startswith("read pairs.jsonl: 127 rows read, 50 used, ") and "past --train-pairs" in lines[0]
    assert "7 dropped (identical" in lines[0]
