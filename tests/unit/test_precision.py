"""models.precision: bf16 only where the device multiplies it natively; elsewhere fp32, said once per process."""

from __future__ import annotations

import pytest
import torch

from rewardsmith.inference.base import InferenceOptions
from rewardsmith.models import precision


@pytest.fixture(autouse=True)
def _fresh() -> None:
    precision._say_fp32_instead.cache_clear()


def test_an_emulating_cpu_runs_fp32_and_is_told_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(precision, "bf16_native", lambda device: False)
    assert not precision.use_bf16(True, "cpu")
    assert not precision.use_bf16(True, "cpu")
    assert capsys.readouterr().err.splitlines() == [precision.FP32_INSTEAD]


def test_bf16_runs_where_native_and_nothing_is_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not precision.use_bf16(False, "cpu")
    assert not precision.use_bf16(None, "cpu")
    monkeypatch.setattr(precision, "bf16_native", lambda device: True)
    assert precision.use_bf16(True, "cpu")
    assert capsys.readouterr().err == ""


def test_the_cpu_answer_is_onednn_s_and_an_accelerator_is_native() -> None:
    assert precision.bf16_native("cpu") == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert precision.bf16_native(torch.device("meta"))


def test_an_inference_reports_the_precision_it_runs_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inference.bf16 (what `bench` and the server's /info report as the precision) is the effective one."""

    class Loaded:
        model = torch.nn.Linear(2, 2)
        bf16 = True  # trained in bf16

    monkeypatch.setattr(precision, "bf16_native", lambda device: False)
    assert not InferenceOptions().runs_bf16(Loaded())
    monkeypatch.setattr(precision, "bf16_native", lambda device: True)
    assert InferenceOptions().runs_bf16(Loaded())
    assert not InferenceOptions(bf16=False).runs_bf16(Loaded())
