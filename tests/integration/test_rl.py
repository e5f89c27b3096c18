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
    from rewardsmith.bon.policy import Policy
    from rewardsmith.bon.prompts import BonPrompt, prompt_id
    from rewardsmith.client import GRPOReward, RewardClient
    from rewardsmith.data.schema import Turn
    from rewardsmith.jobs.bon import ModelScores
    from rewardsmith.jobs.inference import InferenceOptions
    from rewardsmith.jobs.score import score_file
    from rewardsmith.rl.recipe import GRPOSettings, grpo_trainer
    from rewardsmith.rl.tracker import POINTS_FILE, GoldTracker, TrackerSettings, served_proxy
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
    assert points[0]["kl"]["estimate"] == pytest.approx(0.0, abs=1e-6)  # the policy is its own reference
    assert all(p["golds"][str(trl_plain_model)]["estimate"] is not None for p in points)
    assert all(p["proxy"]["estimate"] is not None and p["prompts"] == 2 for p in points)


def test_the_embedded_smollm2_policy_from_gguf_is_fine_tunable() -> None:
    from transformers.trainer_utils import validate_quantization_for_training

    from rewardsmith.bon.policy import load_policy
    from rewardsmith.rl.recipe import trainable

    model = load_policy("smollm2").model
    with pytest.raises(ValueError, match="quantized"):  # de-quantized fp32 weights, but marked as GGUF-quantized
        validate_quantization_for_training(model)
    model = trainable(model)
    validate_quantization_for_training(model)
    assert all(p.dtype.is_floating_point and p.requires_grad for p in model.parameters())
