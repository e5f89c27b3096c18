"""What the one config loader accepts for a number: what a user writes for one (YAML 1.1 reads 1e-5 as a string),
in a YAML file and in --set alike; words, booleans, lists and non-finite values stay refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardsmith.config import RunConfig, apply_overrides, load_yaml, parse_set_options
from rewardsmith.errors import ConfigError


@pytest.mark.parametrize(("written", "value"), [("1e-5", 1e-5), ("3E-4", 3e-4), ("2.5e+3", 2500.0), ("1e2", 100.0)])
def test_a_number_in_exponent_form_is_a_number_in_yaml_and_in_set(tmp_path: Path, written: str, value: float) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"train: {{lr: {written}, head_lr: '{written}'}}\n")
    cfg = load_yaml(RunConfig, config)
    assert cfg.train.lr == value and cfg.train.head_lr == value
    assert isinstance(cfg.train.lr, float)
    over = RunConfig()
    apply_overrides(over, parse_set_options([f"train.lr={written}", f"train.head_lr={written}"]))
    assert over.train.lr == value and over.train.head_lr == value


@pytest.mark.parametrize(
    "written", ["one", "lots", "true", "[1, 2]", "nan", ".inf", "'inf'", "'1_000'", "1e", "'0x10'"]
)
def test_what_is_not_a_number_is_still_refused(tmp_path: Path, written: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"train: {{lr: {written}}}\n")
    with pytest.raises(ConfigError, match=r"train\.lr"):
        load_yaml(RunConfig, config)
    with pytest.raises(ConfigError, match=r"train\.lr"):
        apply_overrides(RunConfig(), parse_set_options([f"train.lr={written}"]))


def test_an_integer_field_still_takes_integers_only() -> None:
    with pytest.raises(ConfigError, match=r"train\.batch_size"):
        apply_overrides(RunConfig(), parse_set_options(["train.batch_size=1e1"]))


def test_an_integer_too_long_for_python_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("train: {seed: " + "9" * 5000 + "}\n")
    with pytest.raises(ConfigError, match=r"c\.yaml") as caught:
        load_yaml(RunConfig, config)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400
    with pytest.raises(ConfigError, match=r"--set train\.seed") as caught:
        parse_set_options(["train.seed=" + "9" * 5000])
    assert len(str(caught.value)) < 400
