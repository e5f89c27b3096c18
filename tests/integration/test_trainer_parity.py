"""The RL trainers' own request shapes get the rewards `rewardsmith score` gives the same conversations.

A TRL-trained reward model whose tokenizer has a ChatML template (SmolLM2's: its BOS is `<|im_start|>`, its EOS
`<|im_end|>`, and it writes a default system message) is served, and each trainer's request is built as that
trainer builds it:

- OpenRLHF `/get_reward`: `query` = the decoded prompt + response tokens, ending with the policy's EOS (or not,
  when generation hit its token limit), starting with a BOS when the policy's tokenizer adds one; `prompts` = the
  chat-templated prompts;
- verl `/classify`: the chat-templated conversation, with the reward tokenizer's BOS stripped when it starts
  with it (verl's `_switch_chat_template`), or not (its reward loop);
- vLLM `/pooling`, TEI `/predict` (one text or a [prompt, response] pair), native `/v1/score`, and the client
  library (RewardClient and TRL's GRPO reward function).

Every reward equals `score`'s to 1e-4 (fp32); a text that cannot be matched to the template is scored verbatim,
said per item in the response, and counted in /metrics."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from transformers import AutoTokenizer
from typer.testing import CliRunner

from rewardsmith.cli import app
from rewardsmith.client import GRPOReward, RewardClient
from rewardsmith.serve.app import build_app

pytestmark = pytest.mark.slow  # trains a TRL model and serves it

ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
TOL = 1e-4


def conversations(n: int = 24) -> list[tuple[list[dict[str, str]], str]]:
    """Single- and multi-turn prompts, some with a system message, and responses of various lengths."""
    rng = random.Random(0)
    words = [
        "the",
        "a",
        "tyre",
        "patch",
        "wheel",
        "tube",
        "pump",
        "valve",
        "rim",
        "quick",
        "slow",
        "careful",
        "spare",
        "road",
        "bike",
    ]
    out = []
    for i in range(n):
        messages = [{"role": "user", "content": f"question {i}: " + " ".join(rng.choices(words, k=rng.randint(3, 30)))}]
        if i % 3 == 1:
            messages = [{"role": "system", "content": "answer briefly"}, *messages]
        if i % 4 == 2:
            messages = [*messages, {"role": "assistant", "content": "which one?"}, {"role": "user", "content": "any"}]
        out.append((messages, " ".join(rng.choices(words, k=rng.randint(1, 60)))))
    return out


@pytest.fixture(scope="module")
def served(trl_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from test_serve import serving

    tmp = tmp_path_factory.mktemp("parity")
    items = conversations()
    rows = [{"prompt": m, "response": r} for m, r in items]
    inp = tmp / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(
        app, ["score", "--model", str(trl_chat_model), "--input", str(inp), "--out", str(tmp / "o.jsonl")], env=ENV
    )
    assert result.exit_code == 0, result.output
    expected = np.array([json.loads(x)["reward"] for x in (tmp / "o.jsonl").read_text().splitlines()])
    tok = AutoTokenizer.from_pretrained(str(trl_chat_model))
    assert tok.bos_token == "<|im_start|>" and tok.eos_token == "<|im_end|>"
    with serving(build_app(trl_chat_model)) as url:
        yield url, tok, items, expected


def _rendered(tok: Any, messages: list[dict[str, str]], response: str) -> str:
    return str(tok.apply_chat_template([*messages, {"role": "assistant", "content": response}], tokenize=False))


def _prompt(tok: Any, messages: list[dict[str, str]]) -> str:
    return str(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def _verbatim(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(float(x.split()[-1]) for x in text.splitlines() if x.startswith("rewardsmith_texts_verbatim_total"))


@pytest.mark.parametrize("eos", [True, False], ids=["eos", "no-eos"])
@pytest.mark.parametrize("bos", [False, True], ids=["no-bos", "bos"])
def test_openrlhf_queries(served: Any, eos: bool, bos: bool) -> None:
    url, tok, items, expected = served
    prompts = [_prompt(tok, m) for m, _ in items]
    queries = [
        (tok.bos_token if bos else "") + p + r + (tok.eos_token if eos else "")
        for p, (_, r) in zip(prompts, items, strict=True)
    ]
    out = httpx.post(
        f"{url}/get_reward", json={"query": queries, "prompts": prompts, "labels": None}, timeout=120
    ).json()
    assert "rewardsmith" not in out and out["extra_logs"] == {}
    np.testing.assert_allclose(out["rewards"], expected, atol=TOL, rtol=0)


@pytest.mark.parametrize("endpoint", ["/classify", "/pooling"])
@pytest.mark.parametrize("strip_bos", [True, False], ids=["bos-stripped", "as-rendered"])
def test_verl_and_vllm_texts(served: Any, endpoint: str, strip_bos: bool) -> None:
    url, tok, items, expected = served
    texts = [_rendered(tok, m, r) for m, r in items]
    if strip_bos:  # verl: `if prompt.startswith(rm_tokenizer.bos_token): prompt = prompt[len(bos):]`
        assert all(t.startswith(tok.bos_token) for t in texts)
        texts = [t[len(tok.bos_token) :] for t in texts]
    got = []
    for text in texts:  # verl's reward loop posts one conversation at a time
        out = httpx.post(f"{url}{endpoint}", json={"model": "rm", "input": text, "activation": False}, timeout=60)
        body = out.json()
        assert "rewardsmith" not in body, body
        got.append(body["data"][-1]["probs"][-1] if endpoint == "/classify" else body["data"][-1]["data"][-1])
    np.testing.assert_allclose(got, expected, atol=TOL, rtol=0)


def test_tei_predict_texts_and_pairs(served: Any) -> None:
    url, tok, items, expected = served
    whole = [[_rendered(tok, m, r)] for m, r in items]
    pairs = [[_prompt(tok, m), r] for m, r in items]
    for inputs in (whole, pairs):
        out = httpx.post(f"{url}/predict", json={"inputs": inputs, "raw_scores": True}, timeout=120)
        assert "X-Rewardsmith-Note" not in out.headers
        np.testing.assert_allclose([p[0]["score"] for p in out.json()], expected, atol=TOL, rtol=0)


def test_native_score_client_and_grpo_reward(served: Any) -> None:
    url, tok, items, expected = served
    out = httpx.post(
        f"{url}/v1/score", json={"items": [{"prompt": m, "response": r} for m, r in items]}, timeout=120
    ).json()
    np.testing.assert_allclose([x["reward"] for x in out["results"]], expected, atol=TOL, rtol=0)
    with RewardClient(url) as client:
        np.testing.assert_allclose(
            client.rewards([m for m, _ in items], [r for _, r in items]), expected, atol=TOL, rtol=0
        )
        prompts = [_prompt(tok, m) for m, _ in items]
        queries = [p + r + tok.eos_token for p, (_, r) in zip(prompts, items, strict=True)]
        np.testing.assert_allclose(client.get_reward(queries, prompts), expected, atol=TOL, rtol=0)
    # TRL's GRPOTrainer, conversational data: prompts are message lists, completions [{"role": "assistant", ...}].
    reward = GRPOReward(url)
    got = reward(prompts=[m for m, _ in items], completions=[[{"role": "assistant", "content": r}] for _, r in items])
    np.testing.assert_allclose(got, expected, atol=TOL, rtol=0)


def test_a_text_the_template_cannot_read_back_is_scored_verbatim_and_said_so(served: Any) -> None:
    url, tok, items, _ = served
    good = _rendered(tok, *items[0])
    # Another template's framing around ChatML markers: splitting finds turns, but rendering them gives another text.
    odd = "[INST] " + _rendered(tok, *items[1]).replace("<|im_start|>user\n", "<|im_start|>user\n[INST] ", 1)
    before = _verbatim(url)
    body = httpx.post(
        f"{url}/classify", json={"model": "rm", "input": [good, odd], "activation": False}, timeout=60
    ).json()
    assert body["rewardsmith"]["unsplit"] == [1] and "scored verbatim" in body["rewardsmith"]["note"]
    # Verbatim means the string's own tokens: a plain transformers forward of tokenizer(odd) gives the same reward.
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(served_model_dir(url), use_safetensors=True).eval()
    with torch.no_grad():
        want = float(model(input_ids=torch.tensor([tok(odd)["input_ids"]])).logits[0, 0])
    assert abs(body["data"][1]["probs"][0] - want) <= TOL
    out = httpx.post(f"{url}/get_reward", json={"query": [odd]}, timeout=60).json()
    assert out["extra_logs"] == {"unsplit_texts": [1]} and out["rewardsmith"]["unsplit"] == [0]
    assert _verbatim(url) == before + 2


def served_model_dir(url: str) -> str:
    return str(httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["root"])
