"""What a long command will cost, said in one line before it starts: the time and memory of a training run on
the CPU and the bytes a model takes on disk, all from the model's parameter count (and its config's width and
depth for the activations), never from its name.

Time: a training step costs about 6 FLOPs per token per parameter the tokens pass through (2 forward, 2 for the
backward through the activations, 2 for the weight gradients; 4 under LoRA, 2 for heads over a frozen backbone)
(Kaplan et al. 2020, sec. 2.1), embedding tables aside (a lookup, not a product). CPU_TRAIN_FLOPS is the rate
rewardsmith's Trainer reached on the 2-core CPU the project was measured on: MiniLM-L6 (10.6M non-embedding
parameters) trains at 11 pairs/s at 128 tokens in fp32 (../shared/docs/DESIGN.md), 1.8e11 FLOP/s, which puts
SmolLM2-135M (106M) at about 1 pair/s at 128 tokens, as measured (1-1.7 pairs/s). bf16 autocast is not counted
as faster: it ran MiniLM 2.3x faster (README, Speed) but SmolLM2-135M no faster (0.68 pairs/s at 192 tokens, 16
pairs a step, 23.5 s a step, the rate above), so the estimate is the fp32 one.

Memory: the process itself (RUNTIME_BYTES), fp32 weights, their gradients and AdamW's two moments (16 bytes per
trained parameter, 4 per frozen one) plus the activations kept for the backward pass, about (34 h + 5 a s) * 2
bytes per token and layer for width h, a heads and sequence length s (Korthikanti et al. 2022, eq. 1, in fp32):
9.4 GB for SmolLM2-135M at 16 pairs of 128 tokens a step, where 8-12 GB was measured (10.4 GB peak resident here,
evaluation included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

CPU_TRAIN_FLOPS = 1.8e11  # FLOP/s of a training step in fp32 on the 2-core CPU (module docstring)
BF16_SPEEDUP = 1.0  # bf16 autocast against fp32 on that CPU: 2.3x for MiniLM, 1.0x for SmolLM2-135M (docstring)
LARGE_PARAMETERS = 50_000_000  # a model this size is said what it costs whatever the run's length
RUNTIME_BYTES = 1_000_000_000  # the process before any model: Python, torch, transformers, the data
LONG_SECONDS = 600.0  # a run estimated this long is said what it costs whatever the model's size
LARGE_WRITE_BYTES = 100_000_000  # a model written this large is said so before it is written


def parameter_counts(model: nn.Module) -> tuple[int, int, int]:
    """(all parameters, those in embedding tables, those that take gradients), tied weights counted once."""
    seen: set[int] = set()
    total = trained = 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trained += p.numel() if p.requires_grad else 0
    embedded: set[int] = set()
    embedding = 0
    for module in model.modules():
        if isinstance(module, nn.Embedding) and id(module.weight) not in embedded:
            embedded.add(id(module.weight))
            embedding += module.weight.numel()
    return total, embedding, trained


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the model's state dict as safetensors writes it: each tensor at its own dtype, a tied weight once."""
    seen: set[int] = set()
    size = 0
    for tensor in model.state_dict(keep_vars=True).values():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            size += tensor.numel() * tensor.element_size()
    return size


def _shape(model: nn.Module) -> tuple[int, int, int] | None:
    """(width, layers, attention heads) of the first transformers config inside `model`; None without one."""
    for module in model.modules():
        config = getattr(module, "config", None)
        values = [getattr(config, k, None) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads")]
        if all(isinstance(v, int) and v > 0 for v in values):
            return values[0], values[1], values[2]  # type: ignore[return-value]
    return None


def _flops_per_parameter(model: nn.Module, total: int, trained: int) -> float:
    """6 when the backbone is trained, 4 when only adapters inside it are (the backward still runs through it),
    2 when only heads over a frozen backbone are (no backward through it)."""
    if trained >= 0.5 * total:
        return 6.0
    adapted = any(p.requires_grad and "lora_" in name for name, p in model.named_parameters())
    return 4.0 if adapted else 2.0


@dataclass(frozen=True)
class TrainingCost:
    """What one training run costs on the CPU: parameters (all, trained), seconds per optimiser step and for the
    run, peak memory (None where it cannot be told), the bytes of the weights (what a saved model takes) and of a
    checkpoint (0: none is written)."""

    parameters: int
    trained: int
    step_seconds: float
    steps: int
    peak_bytes: int | None
    weight_bytes: int
    checkpoint_bytes: int

    @property
    def seconds(self) -> float:
        return self.step_seconds * self.steps

    def worth_saying(self) -> bool:
        return self.parameters >= LARGE_PARAMETERS or self.seconds >= LONG_SECONDS

    def line(self) -> str:
        """One line for stderr, before the run starts."""
        memory = f"; peak memory about {size_text(self.peak_bytes)}" if self.peak_bytes else ""
        disk = f"; weights of about {size_text(self.weight_bytes)}"
        disk += f", checkpoints of about {size_text(self.checkpoint_bytes)}" if self.checkpoint_bytes else ""
        return (
            f"cost: a {self.parameters / 1e6:.1f}M-parameter model: about {duration_text(self.step_seconds)} a step "
            f"on 2 free CPU cores (the measured rate), about {duration_text(self.seconds)} for {self.steps} "
            f"steps{memory}{disk}"
        )


def training_cost(
    model: nn.Module,
    batches: Sequence[dict[str, torch.Tensor]],
    grad_accum: int,
    steps: int,
    bf16: bool,
    checkpoints: bool,
) -> TrainingCost | None:
    """The CPU cost of `steps` optimiser steps of `grad_accum` micro-batches like `batches` (a sample of the run's
    micro-batches, all processes together); None when the batches carry no token ids (a model trained on cached
    embeddings runs no backbone)."""
    shapes = [b["input_ids"].shape for b in batches if "input_ids" in b]
    if not shapes or steps <= 0:
        return None
    tokens = sum(s.numel() for s in shapes) / len(shapes) * grad_accum  # padded tokens a step
    length = sum(s[-1] for s in shapes) / len(shapes)
    total, embedding, trained = parameter_counts(model)
    body = max(total - embedding, 1)
    per_token = _flops_per_parameter(model, total, trained) * body
    rate = CPU_TRAIN_FLOPS * (BF16_SPEEDUP if bf16 else 1.0)
    step_seconds = per_token * tokens / rate
    state = 16 * trained + 4 * (total - trained)
    shape = _shape(model)
    peak = None
    if shape is not None:
        width, layers, heads = shape
        peak = int(RUNTIME_BYTES + state + tokens / grad_accum * layers * (34 * width + 5 * heads * length) * 2)
    weights = weight_bytes(model)
    return TrainingCost(total, trained, step_seconds, steps, peak, weights, weights + 8 * trained if checkpoints else 0)


def size_text(n_bytes: float) -> str:
    """500 MB, 2.2 GB: decimal units, as file managers and `du --si` show them."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{int(n_bytes)} bytes"


def duration_text(seconds: float) -> str:
    """12 s, 4.5 min, 2.1 h."""
    if seconds < 1:
        return "<1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def write_line(model: nn.Module, what: str) -> str | None:
    """One line for stderr before `model` is written as `what` when it is large (LARGE_WRITE_BYTES); else None."""
    size = weight_bytes(model)
    if size < LARGE_WRITE_BYTES:
        return None
    total = parameter_counts(model)[0]
    return f"cost: {what} writes about {size_text(size)} ({total / 1e6:.1f}M parameters)"


def sample_batches(plan: Any, first: int, last: int, count: int = 3) -> list[dict[str, torch.Tensor]]:
    """Up to `count` micro-batches of `plan` spread over batch indices first..last-1 (one process's view of all)."""
    if last <= first:
        return []
    picks = sorted({first + (last - 1 - first) * k // max(count - 1, 1) for k in range(count)})
    return [plan.batch(i).tensors for i in picks]
