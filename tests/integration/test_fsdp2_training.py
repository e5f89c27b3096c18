"""FSDP on CPU processes (see test_sharded_training.py's docstring for what runs where): FSDP2 over gloo through
accelerate's own FSDP2 path matches a plain process, resumes exactly after a kill, checkpoints whole state that
resumes under one process, and saves a folder plain transformers loads; FSDP1 is refused. Its own file, so `make
test`'s workers run it beside the DeepSpeed tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_sharded_training import _assert_matches, _launch, _outputs, _trained


@pytest.mark.slow
@pytest.mark.skipif(torch.accelerator.is_available(), reason="FSDP1 runs on this machine's accelerator")
def test_fsdp1_on_cpu_processes_is_refused(tmp_path: Path) -> None:
    result = _launch("bt", tmp_path, "fsdp1.yaml", processes=2)
    assert result.returncode != 0
    assert (
        "rewardsmith.errors.ConfigError: the launcher asked for FSDP1 on a machine without GPUs: accelerate runs "
        "FSDP1, and DeepSpeed with several processes, only on GPUs" in result.stderr
    )
    assert not (tmp_path / "outputs.safetensors").exists() and not (tmp_path / "run" / "log.jsonl").exists()


# ----------------------------------------------------------------------------------------------------------
# FSDP2 on CPU processes (gloo)


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny-llama reward model runs, each folder as ddp_train.py writes it: plain/ (one process, no launcher);
    clean/ (FSDP2, 2 CPU processes, uninterrupted); resumed/ (the same, SIGKILLed after step 4, its checkpoint
    from step 3 copied to checkpoint-step3/, then started again with 2 processes); one-process/ (that checkpoint
    resumed by FSDP2 with 1 process)."""
    root = tmp_path_factory.mktemp("fsdp2")
    _trained("llama", root / "plain", None)
    _trained("llama", root / "clean", "fsdp.yaml", processes=2)
    killed = _launch("llama", root / "resumed", "fsdp.yaml", processes=2, kill_after=4)
    checkpoint = root / "resumed" / "run" / "checkpoint"
    assert killed.returncode != 0 and (checkpoint / "state.json").exists(), killed.stderr[-3000:]
    shutil.copytree(checkpoint, root / "checkpoint-step3")
    shutil.copytree(root / "resumed", root / "one-process")
    _trained("llama", root / "resumed", "fsdp.yaml", processes=2)
    _trained("llama", root / "one-process", "fsdp.yaml", processes=1)
    return root


def _fsdp2_ran(out: Path, processes: int) -> None:
    """The run trained under accelerate's FSDP (not DDP) and left no Gloo thread running past its group."""
    assert (out / "engine.txt").read_text() == "FSDP"
    assert (out / "processes.txt").read_text() == str(processes)
    for rank in range(processes if processes > 1 else 0):
        threads = (out / f"threads-{rank}.txt").read_text().split()
        assert not [t for t in threads if "gloo" in t], (rank, threads)


@pytest.mark.slow
def test_fsdp2_on_two_cpu_processes_matches_a_plain_process(fsdp2: Path) -> None:
    _fsdp2_ran(fsdp2 / "clean", 2)
    assert (fsdp2 / "plain" / "engine.txt").read_text() == "NO"
    _assert_matches(_outputs(fsdp2 / "clean", 2), _outputs(fsdp2 / "plain", 1))


@pytest.mark.slow
def test_a_killed_fsdp2_run_resumes_to_the_same_weights(fsdp2: Path) -> None:
    """Checkpoint after step 3, SIGKILL after step 4, the same command again: the uninterrupted run's weights,
    bit for bit (whole model and optimiser state written from the shards and scattered back into them)."""
    _fsdp2_ran(fsdp2 / "resumed", 2)
    clean = load_file(str(fsdp2 / "clean" / "weights.safetensors"))
    resumed = load_file(str(fsdp2 / "resumed" / "weights.safetensors"))
    assert clean.keys() == resumed.keys()
    assert all(torch.equal(clean[k], resumed[k]) for k in clean)
    assert not (fsdp2 / "resumed" / "run" / "checkpoint").exists()  # a finished run drops its checkpoint


@pytest.mark.slow
def test_an_fsdp2_checkpoint_holds_whole_state_and_resumes_under_one_process(fsdp2: Path) -> None:
    """The checkpoint of two FSDP2 processes holds every parameter and its AdamW moments at full shape (each
    process held half of each), keyed by name; one FSDP2 process resumes it and ends where the uninterrupted
    two-process run ended, within the tolerance (steps 4-6 sum their gradients in another order)."""
    from rewardsmith.io.state import load_state

    state = load_state(fsdp2 / "checkpoint-step3")
    initial = load_file(str(fsdp2 / "clean" / "initial.safetensors"))
    assert state["next_batch"] == 3 and state["model"].keys() == initial.keys()
    assert all(state["model"][k].shape == initial[k].shape for k in initial)
    moments = state["optimizer"]["state"]
    assert moments.keys() == initial.keys()  # every tensor of the state dict is a trained parameter here
    for name, entry in moments.items():
        assert entry["exp_avg"].shape == entry["exp_avg_sq"].shape == initial[name].shape, name
    assert sorted(n for g in state["optimizer"]["param_groups"] for n in g["params"]) == sorted(moments)
    _fsdp2_ran(fsdp2 / "one-process", 1)
    _assert_matches(_outputs(fsdp2 / "one-process", 1), _outputs(fsdp2 / "clean", 2))


@pytest.mark.slow
def test_the_fsdp2_model_folder_loads_in_transformers_with_the_same_rewards(fsdp2: Path, tmp_path: Path) -> None:
    """The folder the FSDP2 run saved (a LlamaForSequenceClassification folder: backbone and reward head as its
    `score` layer), and `rewardsmith export` of it, load with AutoModelForSequenceClassification and give the
    reward margins the trained model gave in memory, one text at a time without padding."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from helpers import easy_pairs
    from rewardsmith.data.templates import make_encoder
    from rewardsmith.evaluate.scoring import encode_pair_texts
    from rewardsmith.jobs.export import run_export

    trained = _outputs(fsdp2 / "clean", 2)["now"]  # ddp_train.py's held-out margins, chosen - rejected
    # The text format it trained with (MiniLM's tokenizer has no chat template); the export's tokenizer carries
    # that format as its chat template, so the texts are encoded by name here, the same for both folders.
    assert json.loads((fsdp2 / "clean" / "model" / "rewardsmith.json").read_text())["template"] == "plain"
    run_export(fsdp2 / "clean" / "model", tmp_path / "export")
    for folder in (fsdp2 / "clean" / "model", tmp_path / "export"):
        model = AutoModelForSequenceClassification.from_pretrained(str(folder), dtype=torch.float32).eval()
        assert type(model).__name__ == "LlamaForSequenceClassification"
        encoder = make_encoder(AutoTokenizer.from_pretrained(str(folder)), "plain", 32, 8)
        texts = encode_pair_texts(encoder, easy_pairs(96)[64:])
        with torch.no_grad():
            rewards = torch.tensor([float(model(input_ids=torch.tensor([t.input_ids])).logits[0, 0]) for t in texts])
        margins = rewards[0::2] - rewards[1::2]
        assert float((margins - trained.double()).abs().max()) < 1e-5, folder
