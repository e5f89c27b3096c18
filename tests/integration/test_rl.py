"""The RL recipe end to end (rewardsmith.rl): TRL's GRPOTrainer on a tiny random-weight Llama policy with SmolLM2's
chat template, its reward the rewardsmith client's GRPO function posting to a reward model served on loopback, and
the gold tracker writing its points. The rewards the trainer logged equal `rewardsmith score` on the same
completions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # trains a policy against a running server


def test_grpo_on_served_rewards_logs_what_score_gives_and_tracks_the_gold(
    tmp_path: Path, chat_tokenizer_dir: Path, trl_chat_model: Path, trl_plain_model: Path
) -> None:
    import pandas as pd
    import torch
    from test_serve import serving
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from conftest import TINY_DECODER
    from rewardsmith.client import GRPOReward, RewardClient
    from rewardsmith.data.schema import Turn
    from rewardsmith.inference import InferenceOptions, ModelScores
    from rewardsmith.jobs.score import score_file
    from rewardsmith.rl.recipe import GRPOSettings, grpo_trainer
    from rewardsmith.rl.tracker import POINTS_FILE, SAMPLES_FILE, GoldTracker, TrackerSettings, served_proxy
    from rewardsmith.rollouts.policy import Policy
    from rewardsmith.rollouts.prompt import BonPrompt, prompt_id
    from rewardsmith.serve.app import build_app
    from rewardsmith.serve.config import ServeConfig

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    torch.manual_seed(0)
    policy = LlamaForCausalLM(
        LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **TINY_DECODER)
    )

    def prompts(texts: list[str]) -> list[BonPrompt]:
        return [BonPrompt(prompt_id((Turn("user", t),)), (Turn("user", t),)) for t in texts]

    train = prompts([f"How do I fix a flat tyre, step {k}?" for k in range(4)])
    heldout = prompts(["How do I patch a tube?", "What keeps a bike chain quiet?"])
    out = tmp_path / "run"
    with serving(build_app(trl_chat_model, ServeConfig(max_wait_ms=5.0))) as url:
        client = RewardClient(url)
        models = ModelScores(InferenceOptions(), progress=False)
        tracker = GoldTracker(
            out,
            heldout,
            Policy(policy, tok, "tiny", True),
            golds=[str(trl_plain_model)],
            score_with_model=models,
            proxy=served_proxy(client),
            settings=TrackerSettings(every=1, samples=2, max_new_tokens=6, n_boot=50),
        )
        settings = GRPOSettings(steps=2, prompts_per_step=2, generations=2, max_new_tokens=6, lr=1e-3)
        trainer = grpo_trainer(policy, tok, train, GRPOReward(url), out, settings, [tracker.callback()])
        trainer.train()
        client.close()
    # Every completion the trainer logged, with the reward it logged, against `rewardsmith score` on it.
    logged = pd.concat(pd.read_parquet(p) for p in sorted((out / "completions").glob("*.parquet")))
    assert len(logged) == 2 * 2 * 2 and "rewardsmith_reward" in logged
    rows = []
    for prompt, completion in zip(logged["prompt"], logged["completion"], strict=True):
        messages = [{"role": m["role"], "content": m["content"]} for m in prompt]
        text = completion[0]["content"] if not isinstance(completion, str) else completion
        rows.append({"prompt": messages, "response": text})
    keep = [k for k, r in enumerate(rows) if r["response"].strip()]  # an empty completion is not sent (NaN logged)
    assert keep, "every completion was empty"
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(rows[k]) + "\n" for k in keep))
    score_file(str(trl_chat_model), tmp_path / "rows.jsonl", tmp_path / "scored.jsonl", progress=False)
    scored = [json.loads(x)["reward"] for x in (tmp_path / "scored.jsonl").read_text().splitlines()]
    np.testing.assert_allclose(logged["rewardsmith_reward"].to_numpy()[keep], scored, atol=1e-5, rtol=0)
    # The gold tracker: a point before training, after each step, and at the end.
    points = [json.loads(x) for x in (out / POINTS_FILE).read_text().splitlines()]
    assert [p["step"] for p in points] == [0, 1, 2]
    # The estimate's value (sign, positions) is checked against a hand computation in
    # tests/unit/test_rl_tracker.py::test_the_tracker_kl_is_the_sum_of_log_ratios_computed_token_by_token.
    assert points[0]["kl"]["estimate"] == pytest.approx(0.0, abs=1e-6)  # the policy is its own reference
    # ...and the reference stays where it was: a copy that kept TRL's patched forward would read the trained
    # policy's logits, and every later KL would be 0 as well.
    assert all(abs(p["kl"]["estimate"]) > 1e-4 for p in points[1:])
    assert all(p["golds"][str(trl_plain_model)]["estimate"] is not None for p in points)
    assert all(p["proxy"]["estimate"] is not None and p["prompts"] == 2 for p in points)
    # Per-prompt values (arms pair on them) whose mean is the point's, and every sample kept.
    for p in points:
        per_prompt = p["per_prompt"]["golds"][str(trl_plain_model)]
        assert len(per_prompt) == 2
        assert np.mean(per_prompt) == pytest.approx(p["golds"][str(trl_plain_model)]["estimate"])
    samples = [json.loads(x) for x in (out / SAMPLES_FILE).read_text().splitlines()]
    assert [(s["step"], len(s["responses"])) for s in samples] == [(k, 2) for k in (0, 0, 1, 1, 2, 2)]


def test_the_embedded_smollm2_policy_is_fine_tunable_and_trainable_drops_a_gguf_marker() -> None:
    from transformers.trainer_utils import validate_quantization_for_training

    from helpers import marked_as_gguf
    from rewardsmith.rl.recipe import trainable
    from rewardsmith.rollouts.policy import load_policy

    model = load_policy("smollm2").model
    validate_quantization_for_training(model)  # de-quantised fp32 weights, loaded without the GGUF marker
    # A policy read by transformers from a GGUF file carries the marker: trainable() drops it.
    marked_as_gguf(model, quantized=True)
    with pytest.raises(ValueError, match="quantized"):
        validate_quantization_for_training(model)
    model = trainable(model)
    validate_quantization_for_training(model)
    assert all(p.dtype.is_floating_point and p.requires_grad for p in model.parameters())


def test_positive_maps_train_the_same_policy(tmp_path: Path, chat_tokenizer_dir: Path) -> None:
    """rl/claims.py CALIBRATION_INVARIANT, through TRL's own GRPO step: a rater's map a*r + b with a > 0 leaves the
    group-standardised advantages (and Adam's update) as they were, so two steps on it reach the parameters two
    steps on r reach; a < 0 negates the advantages, and the first update with them."""
    import copy

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from conftest import TINY_DECODER
    from rewardsmith.data.schema import Turn
    from rewardsmith.rl.recipe import GRPOSettings, grpo_trainer
    from rewardsmith.rollouts.prompt import BonPrompt, prompt_id

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    torch.manual_seed(0)
    start = LlamaForCausalLM(
        LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **TINY_DECODER)
    )
    prompts = [BonPrompt(prompt_id((Turn("user", t),)), (Turn("user", t),)) for t in ("Name a river.", "Say hi.")]

    def text(completion: object) -> str:
        return completion[0]["content"] if isinstance(completion, list) else str(completion)  # type: ignore[index]

    def mapped(slope: float, intercept: float) -> object:
        def reward(prompts: object, completions: list[object], **kwargs: object) -> list[float]:
            return [slope * len(set(text(c))) + intercept for c in completions]  # distinct characters: varies

        reward.__name__ = "reward"
        return reward

    def train(slope: float, intercept: float, steps: int) -> dict[str, torch.Tensor]:
        model = copy.deepcopy(start)
        settings = GRPOSettings(steps=steps, prompts_per_step=2, generations=4, max_new_tokens=8, lr=1e-3)
        grpo_trainer(model, tok, prompts, mapped(slope, intercept), tmp_path / f"{slope}-{steps}", settings).train()
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    before = {k: v.detach().clone() for k, v in start.state_dict().items()}

    def change(after: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([(after[k] - before[k]).flatten() for k in before])

    raw, calibrated = change(train(1.0, 0.0, 2)), change(train(3.0, 7.0, 2))
    assert float(raw.abs().max()) > 1e-4  # the steps changed the policy
    # The same update up to TRL's 1e-4 in (r - mean) / (sd + 1e-4) and Adam's 1e-8, which move a parameter whose
    # gradient is near 0 by a few percent of a step: a thousandth of the update's norm at most.
    assert float((calibrated - raw).norm() / raw.norm()) < 1e-3
    first, reversed_ = change(train(1.0, 0.0, 1)), change(train(-2.0, 1.0, 1))
    assert float((reversed_ + first).norm() / first.norm()) < 1e-3


def _tiny_policy(folder: Path, chat_tokenizer_dir: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from conftest import TINY_DECODER

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    torch.manual_seed(0)
    LlamaForCausalLM(
        LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **TINY_DECODER)
    ).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


def test_rl_command_runs_resumes_after_a_kill_and_refuses_bad_input(
    tmp_path: Path, chat_tokenizer_dir: Path, trl_chat_model: Path, trl_plain_model: Path
) -> None:
    import os
    import re
    import subprocess
    import sys

    from safetensors.torch import load_file
    from typer.testing import CliRunner

    from rewardsmith.cli import app

    policy = _tiny_policy(tmp_path / "policy", chat_tokenizer_dir)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"How do I fix a flat tyre, step {k}?"}) + "\n" for k in range(6)))
    args = [
        "rl", "--policy", policy, "--prompts", prompts, "--heldout", "2", "--proxy", trl_chat_model,
        "--gold", trl_plain_model, "--steps", "3", "--prompts-per-step", "2", "--generations", "2",
        "--max-new-tokens", "6", "--lr", "1e-3", "--track-every", "1", "--track-samples", "2",
        "--track-max-new-tokens", "6", "--bootstrap", "50", "--save-every", "1", "-q",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}

    def run(out: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rewardsmith.cli", *map(str, args), "--out", str(out)],
            capture_output=True, text=True, env={**env, **(extra or {})}, timeout=900,
        )  # fmt: skip

    whole = run(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    metrics = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    assert [p["step"] for p in metrics["track"]] == [0, 1, 2, 3] and metrics["resumed_at_step"] == 0
    assert set(metrics["gold_change"]) == {str(trl_plain_model)} and metrics["heldout_prompts"] == 2
    steps = [json.loads(x) for x in (tmp_path / "whole" / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3] and all("stats" in s["monitors"] for s in steps)

    killed = tmp_path / "killed"
    first = run(killed, {"REWARDSMITH_FAULT_KILL_AFTER_SAVE": "2"})
    assert first.returncode == -9, first.stderr[-3000:]
    assert not (killed / "metrics.json").exists()
    # The server the killed run started went with it (it would otherwise hold its model and port for good).
    import time

    server = re.search(r"serving .* on http://\S+:(\d+)", (killed / "server.log").read_text())
    assert server is not None
    for _ in range(100):
        alive = subprocess.run(["pgrep", "-f", f"serve --model {trl_chat_model}"], capture_output=True, text=True)
        if not alive.stdout.strip():
            break
        time.sleep(0.1)
    assert not alive.stdout.strip(), "the killed run's server outlived it"
    second = run(killed)
    assert second.returncode == 0, second.stderr[-3000:]
    resumed = json.loads((killed / "metrics.json").read_text())
    assert resumed["resumed_at_step"] == 2
    assert [p["step"] for p in resumed["track"]] == [0, 1, 2, 3]  # none lost, none twice
    assert [json.loads(x)["step"] for x in (killed / "steps.jsonl").read_text().splitlines()] == [1, 2, 3]
    # The resumed run ends where the whole one ended: the same weights.
    a = load_file(str(tmp_path / "whole" / "policy" / "model.safetensors"))
    b = load_file(str(killed / "policy" / "model.safetensors"))
    assert all(np.allclose(a[k].numpy(), b[k].numpy(), atol=1e-6) for k in a)
    again = run(killed)
    assert again.returncode == 0 and "already holds this finished run" in again.stdout

    def one_line(result, *needles: str) -> None:
        assert result.exit_code == 2, result.output
        lines = [x for x in result.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and all(n in lines[0] for n in needles), result.stderr

    rk = CliRunner()
    base = [str(a) for a in args[:-1]]
    one_line(rk.invoke(app, ["rl", "--prompts", str(prompts), "--out", str(tmp_path / "a")]), "--proxy", "--server")
    one_line(rk.invoke(app, [*base, "--gold", "ifevl", "--out", str(tmp_path / "b")]), "unknown gold")
    one_line(rk.invoke(app, [*base, "--gold", str(trl_chat_model), "--out", str(tmp_path / "c")]), "own gold")
    one_line(rk.invoke(app, [*base, "--steps", "0", "--out", str(tmp_path / "d")]), "steps")
    assert not any((tmp_path / n).exists() for n in "abcd")
    # A checkpoint file changed since it was written is not read: the run starts again from the start policy.
    checkpoint = next((killed / "trainer").glob("checkpoint-*"))
    assert json.loads((killed / "checkpoints.json").read_text())[checkpoint.name]
