"""The embedded SmolLM2 de-quantised once (models/gguf.py): what the cache folder gives equals what the GGUF file
gives, bit for bit; a second load does not read the GGUF; a cache that cannot be written, a build whose read-back
differs, or an entry damaged since, each falls back to the GGUF with one line and caches nothing wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rewardsmith.models import gguf as gguf_module
from rewardsmith.models.gguf import RECORD, dequantised


@pytest.mark.slow
def test_the_cached_smollm2_is_the_gguf_bit_for_bit_and_a_second_load_skips_the_gguf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rewardsmith.models.backbone import load_smollm2, smollm2_gguf
    from rewardsmith.rollouts.policy import load_policy

    monkeypatch.setenv("REWARDSMITH_CACHE_DIR", str(tmp_path / "cache"))
    gguf = smollm2_gguf()
    reference, reference_tokenizer = gguf_module.read_gguf(gguf)  # transformers' own GGUF read, no cache
    folder = dequantised(gguf)
    assert folder is not None and folder.parent == tmp_path / "cache" / "dequantised" and (folder / RECORD).is_file()

    def no_gguf(_gguf: Path) -> None:
        raise AssertionError("the GGUF was read although its cache folder is complete")

    monkeypatch.setattr(gguf_module, "read_gguf", no_gguf)
    assert dequantised(gguf) == folder
    policy = load_policy("smollm2")
    ours, theirs = policy.model.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert policy.source == str(gguf) and getattr(policy.model.config, "quantization_config", None) is None
    texts = ["<|im_start|>user\nHow do I fix a flat tyre? Ünïcödé 🙂<|im_end|>\n", "  two  spaces\tand a tab"]
    assert [policy.tokenizer(t).input_ids for t in texts] == [reference_tokenizer(t).input_ids for t in texts]
    assert policy.tokenizer.chat_template == reference_tokenizer.chat_template
    backbone = load_smollm2()
    base = backbone.model.state_dict()
    assert all(torch.equal(base[k], theirs[f"model.{k}"]) for k in base) and backbone.source == str(gguf)
    with torch.no_grad():
        ids = torch.tensor([reference_tokenizer("Hello there, how are you?").input_ids])
        assert torch.equal(policy.model(ids).logits, reference(ids).logits)


# ----------------------------------------------------------------------------------------------------
# The fallbacks, on a tiny causal LM standing in for what the GGUF reader returns


def _tiny_read(_gguf: Path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rewardsmith.models.backbone import minilm_dir

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir()))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    return LlamaForCausalLM(config), tokenizer


@pytest.fixture
def fake_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REWARDSMITH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(gguf_module, "read_gguf", _tiny_read)
    path = tmp_path / "tiny.Q4_1.gguf"
    path.write_bytes(b"GGUF stand-in")
    return path


def test_a_cache_that_cannot_be_written_falls_back_to_the_gguf_with_one_line(
    fake_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("REWARDSMITH_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    assert dequantised(fake_gguf) is None
    err = capsys.readouterr().err.strip()
    assert err.startswith("note: reading tiny.Q4_1.gguf without a de-quantised cache") and "\n" not in err


def test_a_build_whose_weights_do_not_read_back_is_not_cached(
    fake_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rewardsmith.models import weights

    exact = weights.from_pretrained_exact

    def off_by_one_bit(*args, **kwargs):
        model = exact(*args, **kwargs)
        with torch.no_grad():
            next(model.parameters()).view(-1)[0] = torch.nextafter(
                next(model.parameters()).view(-1)[0], torch.tensor(float("inf"))
            )
        return model

    monkeypatch.setattr(weights, "from_pretrained_exact", off_by_one_bit)
    assert dequantised(fake_gguf) is None
    assert "its weights do not read back bit for bit" in capsys.readouterr().err
    assert list((tmp_path / "cache" / "dequantised").iterdir()) == []  # nothing left behind, not even the build


def test_a_damaged_entry_is_not_used_nor_replaced(fake_gguf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = dequantised(fake_gguf)
    assert folder is not None and dequantised(fake_gguf) == folder
    weights_file = folder / "model.safetensors"
    weights_file.write_bytes(weights_file.read_bytes()[:100])  # cut short since it was built
    capsys.readouterr()
    assert dequantised(fake_gguf) is None
    err = capsys.readouterr().err
    assert str(folder) in err and "remove it to rebuild" in err and "de-quantising" not in err  # no second build
    assert weights_file.stat().st_size == 100  # left as it is, for its owner to see


def test_an_entry_owned_by_another_user_is_not_used(
    fake_gguf: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    folder = dequantised(fake_gguf)
    assert folder is not None
    monkeypatch.setattr(os, "getuid", lambda: folder.stat().st_uid + 1)  # as if another user had built it
    assert dequantised(fake_gguf) is None and str(folder) in capsys.readouterr().err
