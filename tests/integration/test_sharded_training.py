"""Sharded training through accelerate: FSDP2, FSDP1 and DeepSpeed ZeRO-2/3 with the configs shipped in
configs/accelerate/, the Trainer's whole-state checkpoints, exact resume, LoRA and the ICRM heads.

What runs here, on CPU processes (accelerate 1.15, torch 2.13 CPU build, deepspeed 0.19):
- FSDP2 (configs/accelerate/fsdp.yaml) with two CPU processes over gloo: accelerate sets DistributedType.FSDP only
  from MULTI_GPU / NPU / XPU ..., never from MULTI_CPU, so the Trainer makes that one choice itself
  (train.sharding.run_fsdp2_on_cpu_processes) and the rest is accelerate's FSDP2 path (fully_shard) and
  torch.distributed.checkpoint, as on GPUs. A tiny-llama reward model trained so matches a plain process (the
  tolerance below; measured 1e-6), a run killed after step 4 resumes to the uninterrupted run's weights bit for
  bit, its checkpoint holds whole (gathered, unsharded) tensors and resumes under one FSDP2 process within the
  tolerance, and the saved model folder, and its `rewardsmith export`, load in plain transformers
  (AutoModelForSequenceClassification) and give the trained model's reward margins within 1e-5 (measured 1e-6).
- FSDP1 cannot: accelerate's FSDP1 plugin needs an accelerator device. The Trainer refuses that launch; the test
  checks it.
- DeepSpeed runs on its CPU accelerator (DS_ACCELERATOR=cpu) in one process: ZeRO-2 and ZeRO-3 partition over
  one rank, through the same engine, optimiser wrapping, gathering and tensor-fragment API as on GPUs. With two
  CPU processes accelerate counts one (its PartialState has no CPU backend for DeepSpeed, so each process would
  take itself for the only one); the Trainer refuses that launch; the test checks it.
- DDP over gloo with two processes: tests/integration/test_distributed.py.

Tolerance: as test_distributed.py, reward margins of 32 held-out pairs (ICRM utility margins of 64 episodes)
within 1e-4 of one plain process after 6 AdamW steps, while training moved them by more than 100 times that
(measured here: 6e-7 for ZeRO-2 and ZeRO-3 on CPU; DeepSpeed clips gradients in its own step, so sums differ in
order). A killed run resumes to bit-identical weights (same engine, same processes). The saved model folder
(heads.safetensors whole, backbone or LoRA adapter) scores exactly as the trained model in memory.

On GPUs (marked gpu; skipped with fewer than 2 CUDA devices), each config with 2 processes against 1 plain
process, and a killed 2-process run resumed, e.g.:

    accelerate launch --config_file configs/accelerate/fsdp.yaml --num_processes 2 \\
        tests/integration/ddp_train.py --kind bt --out /tmp/fsdp
    .venv/bin/python -m pytest -q -m gpu tests/integration/test_sharded_training.py

FSDP2 on 2 CPU processes (marked slow, runs in CI):

    .venv/bin/python -m pytest -q tests/integration/test_fsdp2_training.py
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import launcher
import pytest
import torch
from safetensors.torch import load_file

from rewardsmith.train.trainer import KILL_AFTER_STEP_ENV

SCRIPT = Path(__file__).with_name("ddp_train.py")
ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "accelerate"
TOLERANCE = 1e-4
KINDS = {"bt": ["--kind", "bt"], "lora": ["--kind", "bt", "--lora-r", "4"], "icrm": ["--kind", "icrm"]}
# A decoder reward model: its saved folder is a *ForSequenceClassification folder plain transformers loads.
ARGS = {**KINDS, "llama": ["--kind", "bt", "--backbone", "tiny-llama"]}
needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed (pip install deepspeed)"
)
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")


def _launch(
    kind: str,
    out: Path,
    config: str | None,
    processes: int = 1,
    kill_after: int | None = None,
    deepspeed_cpu: bool = False,
) -> subprocess.CompletedProcess[str]:
    """ddp_train.py in one plain process (config None), or under `accelerate launch --config_file CONFIG`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    if deepspeed_cpu:
        env["DS_ACCELERATOR"] = "cpu"
    if kill_after is not None:
        env[KILL_AFTER_STEP_ENV] = str(kill_after)
    cmd = launcher.command([str(SCRIPT)], processes, None if config is None else CONFIGS / config)
    return subprocess.run(
        [*cmd, *ARGS[kind], "--out", str(out)], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT
    )


def _outputs(out: Path, processes: int) -> dict[str, torch.Tensor]:
    assert (out / "processes.txt").read_text() == str(processes)
    return load_file(str(out / "outputs.safetensors"))


def _trained(kind: str, out: Path, config: str | None, processes: int = 1, **kw: bool) -> dict[str, torch.Tensor]:
    result = _launch(kind, out, config, processes, **kw)
    assert result.returncode == 0, result.stderr[-3000:]
    return _outputs(out, processes)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, torch.Tensor]]:
    """One plain process per kind (no launcher), trained once for the module."""
    root = tmp_path_factory.mktemp("plain")
    return {kind: _trained(kind, root / kind, None) for kind in KINDS}


def _assert_matches(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    worst = float((got["now"] - want["now"]).abs().max())
    assert worst < TOLERANCE, worst
    moved = float((want["now"] - want["before"]).abs().max())
    assert moved > 100 * TOLERANCE, moved
    # The saved folder scores as the model in memory did (heads saved and loaded whole).
    assert float((got["reloaded"] - got["now"]).abs().max()) < 1e-6


@pytest.mark.slow
@needs_deepspeed
@pytest.mark.parametrize(
    ("config", "kind"),
    [("deepspeed-zero2.yaml", "bt"), ("deepspeed-zero3.yaml", "lora"), ("deepspeed-zero3.yaml", "icrm")],
)
def test_deepspeed_on_its_cpu_accelerator_matches_a_plain_process(
    plain: dict[str, dict[str, torch.Tensor]], tmp_path: Path, config: str, kind: str
) -> None:
    _assert_matches(_trained(kind, tmp_path, config, deepspeed_cpu=True), plain[kind])


@pytest.mark.slow
@needs_deepspeed
@pytest.mark.parametrize("config", ["deepspeed-zero2.yaml", "deepspeed-zero3.yaml"])
def test_a_killed_deepspeed_run_resumes_to_the_same_weights(tmp_path: Path, config: str) -> None:
    """Checkpoint after step 3, SIGKILL after step 4, the same command again: the weights of an uninterrupted
    run of the same engine, bit for bit (the optimiser's moments, step and master weights came back)."""
    _trained("bt", tmp_path / "clean", config, deepspeed_cpu=True)
    killed = _launch("bt", tmp_path / "killed", config, kill_after=4, deepspeed_cpu=True)
    assert killed.returncode != 0 and (tmp_path / "killed" / "run" / "checkpoint" / "state.json").exists()
    _trained("bt", tmp_path / "killed", config, deepspeed_cpu=True)
    clean = load_file(str(tmp_path / "clean" / "weights.safetensors"))
    resumed = load_file(str(tmp_path / "killed" / "weights.safetensors"))
    assert clean.keys() == resumed.keys()
    assert all(torch.equal(clean[k], resumed[k]) for k in clean)


@pytest.mark.slow
@needs_deepspeed
def test_a_checkpoint_of_a_plain_run_resumes_under_deepspeed(
    plain: dict[str, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    """Whole state: a checkpoint written by one plain process resumes under ZeRO-3 and ends where the plain
    run ended (within the tolerance: the engines sum in other orders)."""
    killed = _launch("bt", tmp_path, None, kill_after=4)
    assert killed.returncode != 0 and (tmp_path / "run" / "checkpoint" / "state.json").exists()
    _assert_matches(_trained("bt", tmp_path, "deepspeed-zero3.yaml", deepspeed_cpu=True), plain["bt"])


@pytest.mark.slow
@needs_deepspeed
def test_deepspeed_with_two_cpu_processes_is_refused(tmp_path: Path) -> None:
    result = _launch("bt", tmp_path, "deepspeed-zero2.yaml", processes=2, deepspeed_cpu=True)
    assert result.returncode != 0
    assert "the launcher started 2 processes but accelerate counts 1" in result.stderr


@pytest.mark.slow
@pytest.mark.gpu
@needs_two_gpus
@pytest.mark.parametrize(
    "config", ["ddp.yaml", "fsdp.yaml", "fsdp1.yaml", "deepspeed-zero2.yaml", "deepspeed-zero3.yaml"]
)
@pytest.mark.parametrize("kind", list(KINDS))
def test_two_gpus_match_one_plain_process(
    plain: dict[str, dict[str, torch.Tensor]], tmp_path: Path, config: str, kind: str
) -> None:
    if config.startswith("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        pytest.skip("deepspeed is not installed (pip install deepspeed)")
    _assert_matches(_trained(kind, tmp_path, config, processes=2), plain[kind])


@pytest.mark.slow
@pytest.mark.gpu
@needs_two_gpus
@pytest.mark.parametrize("config", ["fsdp.yaml", "fsdp1.yaml", "deepspeed-zero2.yaml", "deepspeed-zero3.yaml"])
def test_a_killed_two_gpu_run_resumes_to_the_same_weights(tmp_path: Path, config: str) -> None:
    if config.startswith("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        pytest.skip("deepspeed is not installed (pip install deepspeed)")
    _trained("bt", tmp_path / "clean", config, processes=2)
    killed = _launch("bt", tmp_path / "killed", config, processes=2, kill_after=4)
    assert killed.returncode != 0 and (tmp_path / "killed" / "run" / "checkpoint" / "state.json").exists()
    _trained("bt", tmp_path / "killed", config, processes=2)
    clean = load_file(str(tmp_path / "clean" / "weights.safetensors"))
    resumed = load_file(str(tmp_path / "killed" / "weights.safetensors"))
    assert all(torch.equal(clean[k], resumed[k]) for k in clean)


@pytest.mark.parametrize("lora", [0, 4])
def test_skeleton_rebuilds_a_plain_module_that_scores_as_the_original(lora: int) -> None:
    """The structure taken before prepare() (parameters on the meta device) plus whole weights gives back the
    module: same outputs bit for bit, its own storage, the non-persistent buffers (BERT's position ids) back."""
    from helpers import easy_pairs
    from rewardsmith.config import LoraSettings, ModelConfig
    from rewardsmith.evaluate.scoring import score_pairs
    from rewardsmith.models.factory import build_reward_model
    from rewardsmith.train.sharding import Skeleton

    cfg = ModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8, lora=LoraSettings(r=lora, alpha=8))
    model, tokenizer = build_reward_model(cfg, seed=0)
    with torch.no_grad():
        model.head.weight.add_(0.5)  # not the initialisation: the weights must come from the state dict
    skeleton = Skeleton(model)
    assert all(p.device.type == "meta" for p in skeleton.module.parameters())
    rebuilt = skeleton.build({k: v.clone() for k, v in model.state_dict().items()}, torch.device("cpu"))
    assert type(rebuilt) is type(model) and rebuilt is not model
    assert [n for n, p in rebuilt.named_parameters() if p.requires_grad] == [
        n for n, p in model.named_parameters() if p.requires_grad
    ]
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(rebuilt.parameters(), model.parameters(), strict=True))
    extra = [n for n, _ in model.named_buffers() if n not in model.state_dict()]
    assert extra and all(torch.equal(rebuilt.get_buffer(n), model.get_buffer(n)) for n in extra)
    held = easy_pairs(20)
    for want, got in zip(
        score_pairs(model, tokenizer, held, 32, 8), score_pairs(rebuilt, tokenizer, held, 32, 8), strict=True
    ):
        assert (want == got).all()
