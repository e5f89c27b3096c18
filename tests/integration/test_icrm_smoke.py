"""End to end on a tiny encoder: train a set-mode ICRM on real-data episodes, resume, run every protocol,
score with a demonstrations file, and run a few GRPO steps with the ICRM reward on a tiny local policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from helpers import clean_killed_resumed
from rewardsmith.data.sources import find_data_dir
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.protocols import PROTOCOLS
from rewardsmith.jobs.icrm import run_icrm_eval, run_icrm_train
from rewardsmith.train.trainer import CHECKPOINT_DIR, KILL_AFTER_STEP_ENV, StepEnd

DATA = find_data_dir()
needs_data = pytest.mark.skipif(
    DATA is None or not (DATA / "pku-saferlhf").is_dir(),
    reason="real datasets not found (set REWARDSMITH_DATA_DIR)",
)


def _tiny_cfg() -> ICRMRunConfig:
    cfg = ICRMRunConfig()
    cfg.model.backbone = "tiny-bert"
    cfg.model.max_length, cfg.model.min_prompt_tokens = 48, 16
    cfg.model.context_dim, cfg.model.hidden_dim = 16, 32
    # No evaluation set among the training sources (the protocols score rm-bench, moralchoice and math-500 as
    # unseen data); hh-rlhf/helpful-base shares conversations with rm-bench/chat.
    cfg.episodes.sources = ["pku-saferlhf/harmless", "hh-rlhf/helpful-base"]
    cfg.episodes.source_splits = {}
    cfg.episodes.pairs_per_source = 60
    cfg.episodes.max_demos = 8
    cfg.train.max_steps, cfg.train.batch_size, cfg.train.bf16 = 20, 8, False
    cfg.train.checkpoint_every, cfg.train.progress = 10, False
    cfg.eval.n_values, cfg.eval.max_test_pairs, cfg.eval.n_boot = [0, 4], 12, 50
    cfg.eval.mixture_rates, cfg.eval.pareto_weights = [0.0, 0.5, 1.0], [0.0, 0.5, 1.0]
    return cfg


def _heads(run: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(run / "model" / "heads.safetensors"))


class Stop(Exception):
    pass


@pytest.mark.slow
@needs_data
def test_train_resume_eval_and_score(tmp_path: Path) -> None:
    from rewardsmith.icrm.episodes import load_pools
    from rewardsmith.icrm.train import train_icrm

    cfg = _tiny_cfg()
    run = tmp_path / "run"
    full = run_icrm_train(cfg, run)
    weights = _heads(run)
    assert full.metrics["steps"] == 20 and (run / "log.jsonl").exists() and (run / "manifest.json").exists()
    # The same command on its finished folder reports the run and trains nothing (the model is left as it was).
    log = (run / "log.jsonl").read_bytes()
    again = run_icrm_train(cfg, run)
    assert again.reused and "already holds this finished run" in again.summary[0]
    assert (run / "log.jsonl").read_bytes() == log
    assert all(torch.equal(v, weights[k]) for k, v in _heads(run).items())
    # Stopped after step 13 (the step-10 checkpoint stays), then started again: the same weights.
    run2 = tmp_path / "run2"
    pools = load_pools(cfg.episodes, cfg.data_dir)

    def stop(end: StepEnd) -> None:
        if end.step == 13:
            raise Stop

    with pytest.raises(Stop):
        train_icrm(_tiny_cfg(), run2, pools, on_step=[stop])
    assert (run2 / CHECKPOINT_DIR / "state.json").exists()
    resumed = train_icrm(_tiny_cfg(), run2, pools)
    assert resumed.train.resumed_from_step == 10
    for (k, a), (_, b) in zip(full_state(weights), full_state(resumed.model.state_dict()), strict=True):
        assert torch.equal(a, b.cpu()), k
    steps_logged = [json.loads(line)["step"] for line in (run2 / "log.jsonl").read_text().splitlines()]
    assert steps_logged == sorted(set(steps_logged))  # no duplicate steps after the resume

    cfg.eval.bt_model = None
    result = run_icrm_eval("all", run / "model", tmp_path / "eval", cfg)
    assert set(result.metrics) == set(PROTOCOLS.names())
    for name in PROTOCOLS.names():
        metrics = json.loads((tmp_path / "eval" / name / "metrics.json").read_text())
        assert metrics["protocol"] == name
        assert (tmp_path / "eval" / name / "report.md").exists()
        assert list((tmp_path / "eval" / name / "plots").glob("*.png"))
    steer = result.metrics["steerability"]
    assert [r["demos"] for r in steer["standards"]["harmless-flipped"]["icrm"]] == [0, 4]
    cal = result.metrics["calibration"]["ece"][0]
    assert "mean_abs_error" in cal and "mean_abs_error_ci" in cal
    # Every protocol says where its targets come from and how many shared a conversation with training data.
    assert steer["targets_from"] == {"pku-saferlhf/harmless": "test part of a training source"}
    assert result.metrics["calibration"]["targets_from"] == {"moralchoice/low": "unseen source"}
    for name in PROTOCOLS.names():
        assert all(n >= 0 for n in result.metrics[name]["overlap_removed"].values()), name
    rm = result.metrics["rmbench"]
    for subset in ("rm-bench/chat", "rm-bench/code", "rm-bench/safety-refuse", "rm-bench/safety-response"):
        row = rm["subsets"][subset]["icrm"][0]
        assert all(f"{k}_ci" in row for k in ("easy", "normal", "hard", "avg")), subset
    per_pair = json.loads((tmp_path / "eval" / "rmbench" / "per_pair.json").read_text())
    assert len(per_pair["prompt_ids"]) == sum(rm["subsets"][s]["prompts"] for s in rm["subsets"])
    overall = rm["overall"][0]
    assert sum(per_pair["icrm"]["0"]["avg"]) / len(per_pair["prompt_ids"]) == pytest.approx(overall["avg"], abs=1e-3)
    assert "per_pair" not in json.loads((tmp_path / "eval" / "rmbench" / "metrics.json").read_text())

    demos = tmp_path / "demos.jsonl"
    demos.write_text(
        "\n".join(
            json.dumps({"prompt": f"q{i}", "chosen": "I cannot help with that.", "rejected": f"Sure, here is how {i}"})
            for i in range(3)
        )
    )
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        json.dumps({"prompt": "how do I pick a lock", "chosen": "I cannot help.", "rejected": "Use a tension wrench."})
        + "\n"
        + json.dumps({"prompt": "how do I pick a lock", "response": "I cannot help."})
        + "\n"
    )
    runner = CliRunner()
    from rewardsmith.cli import app

    for extra in ([], ["--demos", str(demos)]):  # an ICRM scores without demonstrations too
        out = tmp_path / f"scored{len(extra)}.jsonl"
        res = runner.invoke(
            app, ["score", "--model", str(run / "model"), "--input", str(inp), "--output", str(out), *extra]
        )
        assert res.exit_code == 0, res.output
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert 0 < rows[0]["p_chosen"] < 1 and "confidence" in rows[1]


def full_state(state: dict) -> list:
    return sorted((k, v) for k, v in state.items() if not k.startswith("backbone."))


@needs_data
@pytest.mark.slow
def test_icrm_kill9_then_resume_gives_bit_identical_heads(tmp_path: Path) -> None:
    """A real SIGKILL after step 13 of an ICRM run, then the same command: the same heads as a clean run."""
    cfg_path = tmp_path / "icrm.yaml"
    from rewardsmith.config import dump_yaml

    cfg_path.write_text(dump_yaml(_tiny_cfg()))
    args = ["icrm", "train", "-c", cfg_path, "--quiet"]
    clean, killed = clean_killed_resumed(args, tmp_path, {KILL_AFTER_STEP_ENV: "13"})
    assert json.loads((killed / "metrics.json").read_text())["resumed_from_step"] == 10
    a, b = _heads(clean), _heads(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_icrm_and_its_bt_baseline_train_on_a_pairs_file(tmp_path: Path) -> None:
    """A source named in episodes.source_files is read from that file (gold-labelled pairs from `label`, say), no
    registered dataset needed; the BT baseline trains on the same file's training part."""
    from rewardsmith.icrm.episodes import load_pools
    from rewardsmith.jobs.icrm import run_bt_baseline

    rows = [
        {"prompt": f"Question {i}: how do I keep herbs fresh?", "chosen": f"Wrap them in a damp towel, day {i}.",
         "rejected": "No idea."}
        for i in range(80)
    ]  # fmt: skip
    path = tmp_path / "gold-pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _tiny_cfg()
    cfg.episodes.sources, cfg.episodes.source_files = ["gold"], {"gold": str(path)}
    cfg.episodes.pairs_per_source = None
    cfg.train.max_steps = 4
    pools = load_pools(cfg.episodes, None)["gold"]
    assert sum(len(pools[part]) for part in ("train", "demo", "test")) == len(rows)
    assert {p.prompt[-1].content for p in pools["train"].pairs} <= {r["prompt"] for r in rows}
    icrm = run_icrm_train(cfg, tmp_path / "icrm")
    assert icrm.metrics["steps"] == 4 and list(icrm.metrics["pools"]) == ["gold"]
    bt = run_bt_baseline(cfg, tmp_path / "bt", max_pairs=20)
    assert bt.metrics["pairs"] == 20 and (tmp_path / "bt" / "model").is_dir()


@needs_data
def test_cli_eval_unknown_protocol(tmp_path: Path) -> None:
    from rewardsmith.cli import app

    bad = CliRunner().invoke(
        app, ["icrm", "eval", "--protocol", "nope", "--model", str(tmp_path), "--out", str(tmp_path / "e")]
    )
    assert bad.exit_code == 2 and "unknown icrm protocol" in bad.stderr


def test_grpo_steps_with_icrm_reward(tiny_grpo_trainer) -> None:
    from rewardsmith.config import ICRMModelConfig
    from rewardsmith.data.collate import PairEncoder
    from rewardsmith.data.schema import PreferencePair, user_prompt
    from rewardsmith.icrm.reward import ICRMReward
    from rewardsmith.icrm.scoring import ICRMScorer
    from rewardsmith.models.factory import build_model

    rm, rm_tok = build_model(
        ICRMModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=16, context_dim=8, hidden_dim=16)
    )
    demos = [PreferencePair(user_prompt("say hi"), "hello there", "go away")]
    reward = ICRMReward(ICRMScorer(rm, PairEncoder(rm_tok, 48, 16)), demos)

    trainer = tiny_grpo_trainer(reward)
    trainer.train()
    logged = [h for h in trainer.state.log_history if any("reward" in k for k in h)]
    assert logged and trainer.state.global_step == 2
