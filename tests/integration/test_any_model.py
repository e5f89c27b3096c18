"""Reward models rewardsmith did not train: TRL RewardTrainer output (conversational and standard pairs), an
OpenRLHF-format checkpoint and a LoRA adapter (tests/conftest.py builds them). Their rewards equal a plain
transformers forward of the same token ids, one sequence at a time, at any batch size and either padding side;
the token ids are TRL's own; and every command takes them: eval, score, serve (OpenRLHF's and verl's bodies),
calibrate --model, export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from helpers import QUICK_CALIBRATE, rk
from rewardsmith.data.schema import Turn
from rewardsmith.evaluate.scoring import RewardScorer
from rewardsmith.models.loading import load_reward_model

pytestmark = pytest.mark.slow  # trains models and runs whole commands: `make test`, not test-fast

TOL = 1e-5
KINDS = ["trl_chat_model", "trl_plain_model", "openrlhf_model", "lora_adapter"]


def conversations() -> list[tuple[tuple[Turn, ...], str]]:
    """Single- and multi-turn conversations, a system message, and prompts and responses long enough to be cut at
    128 tokens."""
    long_prompt = " ".join(f"word{k}" for k in range(300))
    items: list[tuple[tuple[Turn, ...], str]] = [
        ((Turn("user", "how do I fix a flat tyre?"),), "take the wheel off and patch the tube"),
        ((Turn("user", "how do I fix a flat tyre?"),), "no idea"),
        (
            (Turn("system", "be brief"), Turn("user", "hi"), Turn("assistant", "hello!"), Turn("user", "and then?")),
            "then we talk",
        ),
        ((Turn("user", long_prompt),), "a short answer"),
        ((Turn("user", "tell me everything"),), " ".join(f"fact{k}" for k in range(300))),
    ]
    items += [((Turn("user", f"question {i}?"),), "answer " * (i % 6 + 1)) for i in range(35)]
    return items


def reference_rewards(kind: str, folder: Path, ids: list[list[int]]) -> np.ndarray:
    """A plain transformers forward of each sequence alone (no padding, no batching)."""
    from transformers import AutoModel, AutoModelForSequenceClassification

    with torch.no_grad():
        if kind == "openrlhf_model":
            from safetensors.torch import load_file

            config = json.loads((folder / "config.json").read_text())
            base = AutoModel.from_pretrained(str(folder), use_safetensors=True, dtype=torch.float32).eval()
            head = load_file(str(folder / "model.safetensors"))["value_head.weight"].float()
            out = [float(base(input_ids=torch.tensor([x])).last_hidden_state[0, -1] @ head[0]) for x in ids]
            return (np.array(out) - config["mean"]) / config["std"]
        if kind == "lora_adapter":
            from peft import PeftModel

            base_dir = json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"]
            base = AutoModelForSequenceClassification.from_pretrained(
                base_dir, use_safetensors=True, dtype=torch.float32
            )
            model = PeftModel.from_pretrained(base, str(folder)).eval()  # not merged: the adapter as trained
        else:
            model = AutoModelForSequenceClassification.from_pretrained(
                str(folder), use_safetensors=True, dtype=torch.float32
            ).eval()
        return np.array([float(model(input_ids=torch.tensor([x])).logits[0, 0]) for x in ids])


@pytest.mark.parametrize("kind", KINDS)
def test_rewards_equal_a_plain_transformers_forward(kind: str, request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(kind)
    loaded = load_reward_model(folder, max_length=128)
    items = conversations()
    encoded = [loaded.encoder().encode(p, r) for p, r in items]
    assert any(e.prompt_truncated for e in encoded) and any(e.response_truncated for e in encoded)
    want = reference_rewards(kind, Path(folder), [e.input_ids for e in encoded])
    for batch_size in (1, 7, 32):
        for side in ("right", "left"):
            scorer = RewardScorer(loaded.model, loaded.encoder(), loaded.pad_id, batch_size, padding_side=side)
            got = scorer.score_texts(items)
            assert np.abs(got - want).max() <= TOL, (kind, batch_size, side, np.abs(got - want).max())
    assert np.ptp(want) > 1e-4  # the rewards differ between texts: equality above is not trivial


def test_token_ids_are_trls(trl_chat_model: Path, trl_plain_model: Path) -> None:
    chat = load_reward_model(trl_chat_model)
    plain = load_reward_model(trl_plain_model)
    assert (chat.template, plain.template) == ("chat", "chat")  # both tokenizers carry a chat template
    plain = load_reward_model(trl_plain_model, template="plain")
    tok = chat.tokenizer
    for prompt, response in conversations()[:3]:
        messages = [{"role": t.role, "content": t.content} for t in prompt]
        trl_chat = tok.apply_chat_template(
            [*messages, {"role": "assistant", "content": response}], tokenize=True, return_dict=True
        )["input_ids"]
        assert chat.encoder().encode(prompt, response).input_ids == list(trl_chat)
    # Standard pairs: prompt + response + EOS tokenised as one text; the EOS is also the pad token.
    assert tok.pad_token_id == tok.eos_token_id
    text_prompt = "Question 3: how do I fix a flat tyre?\nAnswer:"
    encoded = plain.encoder().encode((Turn("user", text_prompt),), " patch the tube (3)")
    assert encoded.input_ids == tok(text_prompt + " patch the tube (3)" + tok.eos_token)["input_ids"]
    assert encoded.input_ids[-1] == tok.pad_token_id


def test_the_pad_token_trap_reads_the_position_transformers_reads(trl_plain_model: Path) -> None:
    """pad == EOS and every standard text ends with EOS: last-token pooling must read the token before it, as
    transformers' own forward does, in any batch."""
    loaded = load_reward_model(trl_plain_model, template="plain")
    items = [((Turn("user", f"question {i}?"),), "word " * (i + 1)) for i in range(6)]
    encoded = [loaded.encoder().encode(p, r) for p, r in items]
    assert all(e.input_ids[-1] == loaded.pad_id for e in encoded)
    want = reference_rewards("trl_plain_model", trl_plain_model, [e.input_ids for e in encoded])
    got = RewardScorer(loaded.model, loaded.encoder(), loaded.pad_id, batch_size=6).score_texts(items)
    np.testing.assert_allclose(got, want, atol=TOL)


# ---------------------------------------------------------------------------------------------------------
# Folders rewardsmith refuses, in one line


def test_remote_code_is_refused_unless_asked(tmp_path: Path, trl_chat_model: Path) -> None:
    import shutil

    folder = tmp_path / "custom"
    shutil.copytree(trl_chat_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="my-own-arch", auto_map={"AutoModelForSequenceClassification": "modeling.MyRM"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling.py").write_text("raise SystemExit('this code must not run')\n")
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"prompt": "hi", "response": "hello"}) + "\n")
    result = rk("score", "--model", folder, "--input", inp, "--out", tmp_path / "o.jsonl")
    assert result.exit_code == 2 and "--trust-remote-code" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("breakage", ["two-labels", "base-model-only", "not-a-model"])
def test_unsupported_folders_get_one_line_naming_what_was_found(
    tmp_path: Path, trl_chat_model: Path, breakage: str
) -> None:
    import shutil

    folder = tmp_path / "m"
    shutil.copytree(trl_chat_model, folder)
    config = json.loads((folder / "config.json").read_text())
    if breakage == "two-labels":
        config.update(num_labels=2, id2label={"0": "a", "1": "b"}, label2id={"a": 0, "b": 1})
        needle = "2 labels"
    elif breakage == "base-model-only":
        config["architectures"] = ["Qwen2Model"]
        needle = "found"
    else:
        (folder / "config.json").unlink()
        needle = "found"
    if (folder / "config.json").exists():
        (folder / "config.json").write_text(json.dumps(config))
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"prompt": "hi", "response": "hello"}) + "\n")
    result = rk("score", "--model", folder, "--input", inp, "--out", tmp_path / "o.jsonl")
    assert result.exit_code == 2 and needle in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


# ---------------------------------------------------------------------------------------------------------
# Every command takes them


def train_on(pairs: Path, run: Path, backbone: str | Path, *options: str) -> None:
    """`rewardsmith train` of `backbone` on a pairs file, quietly, into `run`, with `options`; checked to succeed."""
    result = rk("train", "--train", "file", "--path", pairs, "--backbone", backbone, *options, "--out", run, "-q")
    assert result.exit_code == 0, result.output


def _pairs_file(tmp_path: Path) -> Path:
    from conftest import conversation_rows

    rows = [
        {"prompt": r["prompt"], "chosen": r["chosen"][0]["content"], "rejected": r["rejected"][0]["content"]}
        for r in conversation_rows(12)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _score(model: Path, rows: list[dict[str, Any]], tmp_path: Path, name: str) -> list[dict[str, Any]]:
    inp, out = tmp_path / f"{name}-in.jsonl", tmp_path / f"{name}-out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = rk("score", "--model", model, "--input", inp, "--out", out, "-q")
    assert result.exit_code == 0, result.output
    return [json.loads(x) for x in out.read_text().splitlines()]


@pytest.mark.parametrize("kind", KINDS)
def test_eval_and_score_take_it(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    folder = request.getfixturevalue(kind)
    pairs = _pairs_file(tmp_path)
    result = rk("eval", "--model", folder, "--dataset", "file", "--path", pairs, "--out", tmp_path / "e", "-q")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "e" / "metrics.json").read_text())
    block = metrics["eval"]["pairs.jsonl"]
    assert block["n"] == 12
    assert {"accuracy", "length_rule_accuracy", "length_controlled_accuracy", "length_correlation"} <= set(block)
    assert metrics["model_kind"].startswith(("sequence-classification", "openrlhf"))
    rows = [
        {"prompt": [{"role": t.role, "content": t.content} for t in p.prompt], "response": p.chosen}
        for p in _pairs(pairs)
    ]
    scored = _score(folder, rows, tmp_path, "s")
    loaded = load_reward_model(folder)
    want = RewardScorer(loaded.model, loaded.encoder(), loaded.pad_id).score_texts(
        [(p.prompt, p.chosen) for p in _pairs(pairs)]
    )
    np.testing.assert_allclose([r["reward"] for r in scored], want, atol=TOL)


def _pairs(path: Path) -> list[Any]:
    from rewardsmith.data.registry import load_dataset

    return load_dataset("file", path=path).pairs


@pytest.mark.parametrize("kind", KINDS)
def test_serve_answers_openrlhf_and_verl_bodies_as_score_does(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import httpx
    from test_serve import serving
    from transformers import AutoTokenizer

    from rewardsmith.serve.app import build_app

    folder = Path(request.getfixturevalue(kind))
    loaded = load_reward_model(folder)
    tok = AutoTokenizer.from_pretrained(
        str(folder if kind != "lora_adapter" else request.getfixturevalue("trl_chat_model"))
    )
    conversations_ = [
        ([{"role": "user", "content": f"question {i}: how do I fix a flat tyre?"}], "patch it " * (i + 1))
        for i in range(6)
    ]
    expected = [
        r["reward"]
        for r in _score(folder, [{"prompt": m, "response": r} for m, r in conversations_], tmp_path, "expected")
    ]
    with serving(build_app(folder)) as url:
        prompts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m, _ in conversations_]
        full = [
            tok.apply_chat_template([*m, {"role": "assistant", "content": r}], tokenize=False)
            for m, r in conversations_
        ]
        if loaded.template == "chat":
            # verl's reward loop: {"model", "input": the chat-templated conversation, "activation": false}
            for text, want in zip(full, expected, strict=True):
                out = httpx.post(
                    f"{url}/classify", json={"model": "rm", "input": text, "activation": False}, timeout=60
                ).json()
                assert "rewardsmith" not in out  # split into its turns
                assert abs(out["data"][-1]["probs"][-1] - want) <= TOL
            # OpenRLHF: query = prompt + response, prompts = the templated prompts; then the prompt cut from the left.
            queries = [p + r for p, (_, r) in zip(prompts, conversations_, strict=True)]
            got = httpx.post(f"{url}/get_reward", json={"query": queries, "prompts": prompts}, timeout=60).json()
            np.testing.assert_allclose(got["rewards"], expected, atol=TOL)
            cut = [q[len(p) // 3 :] for q, p in zip(queries, prompts, strict=True)]
            got = httpx.post(f"{url}/get_reward", json={"query": cut, "prompts": prompts}, timeout=60).json()
            np.testing.assert_allclose(got["rewards"], expected, atol=TOL)


# ---------------------------------------------------------------------------------------------------------
# Train / serve parity of a rewardsmith decoder trained in the chat template


@pytest.fixture(scope="module")
def chat_backbone(tmp_path_factory: pytest.TempPathFactory, chat_tokenizer_dir: Path) -> Path:
    """A local decoder backbone folder (tiny Llama, safetensors) with a chat-template tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    from conftest import TINY_DECODER

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    torch.manual_seed(4)
    model = LlamaModel(LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **TINY_DECODER))
    out = tmp_path_factory.mktemp("chat-backbone") / "backbone"
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def test_a_chat_trained_rewardsmith_model_scores_what_verl_and_openrlhf_send_as_score_does(
    chat_backbone: Path, tmp_path: Path
) -> None:
    import httpx
    from test_serve import serving

    from rewardsmith.serve.app import build_app

    ex = tmp_path / "examples"
    assert rk("examples", "--out", ex).exit_code == 0
    run = tmp_path / "run"
    train_on(ex / "pairs.jsonl", run, chat_backbone, "--template", "chat", "--max-length", "128", "--max-steps", "3")
    meta = json.loads((run / "model" / "rewardsmith.json").read_text())
    assert meta["template"] == "chat"
    pairs = _pairs(ex / "pairs.jsonl")
    rows = [
        {
            "prompt": [{"role": t.role, "content": t.content} for t in p.prompt],
            "chosen": p.chosen,
            "rejected": p.rejected,
        }
        for p in pairs
    ]
    scored = _score(run / "model", rows, tmp_path, "pairs")
    loaded = load_reward_model(run / "model")
    tok = loaded.tokenizer
    with serving(build_app(run / "model")) as url:
        verl = []
        for row in rows:
            texts = [
                tok.apply_chat_template([*row["prompt"], {"role": "assistant", "content": row[side]}], tokenize=False)
                for side in ("chosen", "rejected")
            ]
            out = httpx.post(
                f"{url}/classify", json={"model": "rm", "input": texts, "activation": False}, timeout=60
            ).json()
            assert "rewardsmith" not in out  # every text was split into its turns, none cut from the left
            verl.append([d["probs"][0] for d in out["data"]])
        prompts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
        queries = [p + r["chosen"] for p, r in zip(prompts, rows, strict=True)]
        openrlhf = httpx.post(f"{url}/get_reward", json={"query": queries, "prompts": prompts}, timeout=60).json()
        cut = [q[len(p) // 2 :] for q, p in zip(queries, prompts, strict=True)]
        left_cut = httpx.post(f"{url}/get_reward", json={"query": cut, "prompts": prompts}, timeout=60).json()
    verl_scores = np.array(verl)
    np.testing.assert_allclose(verl_scores[:, 0], [s["reward_chosen"] for s in scored], atol=TOL)
    np.testing.assert_allclose(verl_scores[:, 1], [s["reward_rejected"] for s in scored], atol=TOL)
    np.testing.assert_allclose(openrlhf["rewards"], [s["reward_chosen"] for s in scored], atol=TOL)
    np.testing.assert_allclose(left_cut["rewards"], [s["reward_chosen"] for s in scored], atol=TOL)
    # Long prompts are cut, but no pair loses the response that tells its two sides apart.
    assert np.all(np.abs(verl_scores[:, 0] - verl_scores[:, 1]) > 0)
    encoder = loaded.encoder()
    encoded = [encoder.encode(p.prompt, p.chosen) for p in pairs]
    assert any(e.prompt_truncated for e in encoded)


# ---------------------------------------------------------------------------------------------------------
# Models out


@pytest.mark.parametrize("template", ["chat", "plain", "hh"])
def test_export_round_trip_gives_the_same_rewards(chat_backbone: Path, tmp_path: Path, template: str) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    pairs = _pairs_file(tmp_path)
    run = tmp_path / "run"
    lora = ["--lora-r", "4" if template == "hh" else "0"]
    train_on(pairs, run, chat_backbone, "--template", template, "--max-length", "96", "--max-steps", "2", *lora)
    out = tmp_path / "hf"
    exported = rk("export", "--model", run / "model", "--out", out)
    assert exported.exit_code == 0, exported.output
    loaded = load_reward_model(run / "model")
    items = conversations()[:12]
    encoded = [loaded.encoder().encode(p, r) for p, r in items]
    want = RewardScorer(loaded.model, loaded.encoder(), loaded.pad_id, batch_size=5).score_texts(items)
    hf = AutoModelForSequenceClassification.from_pretrained(str(out), use_safetensors=True, dtype=torch.float32)
    with torch.no_grad():
        got = [float(hf(input_ids=torch.tensor([e.input_ids])).logits[0, 0]) for e in encoded]
    np.testing.assert_allclose(got, want, atol=TOL)
    # The exported folder says how it writes texts, and rewardsmith reads that back.
    again = load_reward_model(out)
    assert (again.kind, again.template, again.max_length) == ("sequence-classification", template, 96)
    np.testing.assert_allclose(
        RewardScorer(again.model, again.encoder(), again.pad_id).score_texts(items), want, atol=TOL
    )
    tok = AutoTokenizer.from_pretrained(str(out))
    prompt, response = items[0]
    text = tok.apply_chat_template(
        [{"role": t.role, "content": t.content} for t in prompt] + [{"role": "assistant", "content": response}],
        tokenize=False,
    )
    assert response in text and prompt[0].content in text
    # A second export over it needs --overwrite; a folder of someone else's is never replaced.
    assert rk("export", "--model", run / "model", "--out", out).exit_code == 2
    assert rk("export", "--model", run / "model", "--out", out, "--overwrite").exit_code == 0
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("mine")
    refused = rk("export", "--model", run / "model", "--out", tmp_path / "theirs", "--overwrite")
    assert refused.exit_code == 2 and "did not write" in refused.stderr
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "mine"


def test_export_refuses_what_the_format_cannot_hold_in_one_line(tmp_path: Path, openrlhf_model: Path) -> None:
    pairs = _pairs_file(tmp_path)
    run = tmp_path / "enc"
    train_on(pairs, run, "tiny-bert", "--max-steps", "1")
    for model, needle in ((run / "model", "mean pooling"), (openrlhf_model, "OpenRLHF")):
        result = rk("export", "--model", model, "--out", tmp_path / "x")
        assert result.exit_code == 2 and needle in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------------------------------------
# Calibration and the shift stress test on a model from elsewhere


@pytest.mark.parametrize("kind", ["trl_chat_model", "trl_plain_model"])
def test_calibrate_model_scores_the_rated_items_itself(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import random

    folder = request.getfixturevalue(kind)
    rng = random.Random(0)
    items = [(f"item{k}", f"how do I fix problem {k}?", "patch it " * (k % 5 + 1)) for k in range(20)]
    lines = ["rater_id,item_id,prompt,response,score,model_score"]
    for rater in "abcdefgh":
        slope = rng.uniform(5, 15)
        for item, prompt, response in items:
            lines.append(f"{rater},{item},{prompt},{response},{slope * rng.random():.3f},0")
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("\n".join(lines) + "\n")
    fit = rk("calibrate", "fit", "--ratings", ratings, "--model", folder, "--out", tmp_path / "maps.json")
    assert fit.exit_code == 0, fit.output
    assert "scored 20 rated items" in fit.stdout
    maps = json.loads((tmp_path / "maps.json").read_text())
    loaded = load_reward_model(folder)
    rewards = RewardScorer(loaded.model, loaded.encoder(), loaded.pad_id).score_texts(
        [((Turn("user", p),), r) for _, p, r in items]
    )
    # The maps were fitted on the model's rewards: their model-score mean is the rewards' mean.
    assert maps["info"]["model_score_mean"] == pytest.approx(float(np.mean(rewards)), abs=1e-6)
    run = rk(
        "calibrate",
        "--ratings",
        ratings,
        "--model",
        folder,
        "--out",
        tmp_path / "cal",
        *QUICK_CALIBRATE,
    )
    assert run.exit_code == 0, run.output
    notes = json.loads((tmp_path / "cal" / "metrics.json").read_text())["ratings"]["notes"]
    assert str(folder) in notes["model_score"]


def test_eval_runs_the_shift_stress_test_on_a_model_from_elsewhere(trl_chat_model: Path, tmp_path: Path) -> None:
    from conftest import conversation_rows

    rows = conversation_rows(40)
    for name in ("source", "target"):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "prompt": r["prompt"],
                        "chosen": r["chosen"][0]["content"] + f" ({name} {i})",
                        "rejected": r["rejected"][0]["content"],
                    }
                )
                + "\n"
                for i, r in enumerate(rows)
            )
        )
    config = tmp_path / "shift.yaml"
    config.write_text(
        f"name: t\nsource: {{name: file, path: {tmp_path / 'source.jsonl'}}}\n"
        f"targets: [{{name: file, path: {tmp_path / 'target.jsonl'}}}]\n"
        "split: {gold_fraction: 0.3, w2s_fraction: 0.3, id_fraction: 0.4}\n"
    )
    result = rk("eval", "--model", trl_chat_model, "--shift-config", config, "--out", tmp_path / "e", "-q")
    assert result.exit_code == 0, result.output
    shift = json.loads((tmp_path / "e" / "metrics.json").read_text())["shift"]
    (target,) = shift["targets"].values()
    low, high = target["ood_minus_id_ci"]
    assert low <= target["ood_minus_id"] <= high
    assert "under shift: target.jsonl minus the ID test" in result.stdout
    assert "Under preference shift" in (tmp_path / "e" / "report.md").read_text()
