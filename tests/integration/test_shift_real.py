"""The shift pipeline on the real data (slow): a small harmless run, end to end, through the CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rewardsmith.config import load_yaml
from rewardsmith.data.sources import resolve_data_dir
from rewardsmith.errors import RewardsmithError
from rewardsmith.w2s.config import AnchorSettings, MethodConfig, ShiftConfig

ROOT = Path(__file__).resolve().parents[2]


def _data_dir() -> Path | None:
    try:
        path = resolve_data_dir(None)
    except RewardsmithError:
        return None
    return path if (path / "hh-rlhf").exists() and (path / "pku-saferlhf").exists() else None


@pytest.mark.slow
def test_shift_harmless_small(tmp_path: Path) -> None:
    data_dir = _data_dir()
    if data_dir is None:
        pytest.skip("real datasets not found (set REWARDSMITH_DATA_DIR)")
    from typer.testing import CliRunner

    from rewardsmith.cli import app
    from rewardsmith.config import dump_yaml

    cfg = load_yaml(ShiftConfig, ROOT / "configs" / "shift-harmless.yaml")
    cfg = replace(
        cfg,
        targets=cfg.targets[:2],
        methods=[MethodConfig("naive"), MethodConfig("anchor-1", "anchor", anchor=AnchorSettings(weight=1.0))],
    )
    cfg.quick = replace(cfg.quick, gold_pairs=32, w2s_pairs=32, id_pairs=32, target_pairs=24, max_length=64, n_boot=50)
    config_path = tmp_path / "shift.yaml"
    config_path.write_text(dump_yaml(cfg))
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "shift",
            "--config",
            str(config_path),
            "--out",
            str(out),
            "--quick",
            "--data-dir",
            str(data_dir),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    target = cfg.targets[0].name
    assert metrics["sizes"]["id"] == 32 and metrics["sizes"][target] == 24
    naive = metrics["methods"]["naive"]
    for key in ("id_acc", "wrg", f"ood_acc.{target}", f"nts.{target}", f"pgr.{target}"):
        assert key in naive and f"{key}_ci" in naive
    assert (out / "report.md").read_text().count("|") > 20
    assert list((out / "plots").glob("id_vs_ood_*.png"))


def test_shift_bad_config_is_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rewardsmith.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text("methods: [{name: x, objective: nope}]\n")
    result = CliRunner().invoke(app, ["shift", "--config", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "nope" in result.output
