"""The attention rewardsmith's backbones run: transformers' SDPA attention, except that under bf16 (or fp16)
autocast on a CPU the attention core of small heads (head_dim <= 32, e.g. MiniLM's 12 x 32) runs in float32.

Why: PyTorch's CPU flash-attention kernels are slower in bf16 than in fp32 for small heads, while the linear
layers around them gain about 2x from bf16. Measured on a 2-core AVX512-BF16 CPU with PyTorch 2.13
(benchmarks/bench_kernels.py -> benchmarks/results/kernels.json, fresh processes, 3 rounds): forward+backward
of MiniLM's 32-wide heads ran 1.13-2.17x faster with the core upcast to fp32 (64 to 384 tokens), the forward
alone 0.90-1.13x (neutral); SmolLM2's 64-wide heads lost with the upcast from 256 tokens on (0.83-0.87x), so
wider heads keep the bf16 core. The upcast only raises precision: scores move by bf16 rounding at most, towards
the fp32 ones.

The function (with transformers' SDPA mask builder) is registered in transformers' AttentionInterface under
ATTENTION_NAME the first time a model is assembled (nothing happens at import); a model's saved config.json does
not record it.
"""

from __future__ import annotations

from typing import Any

import torch

ATTENTION_NAME = "rewardsmith_sdpa"
FP32_CORE_MAX_HEAD_DIM = 32  # widest head whose CPU attention core runs in fp32 under autocast (see above)
_LOW_PRECISION = (torch.bfloat16, torch.float16)


def fp32_core(query: torch.Tensor) -> bool:
    """Whether the attention core for this query (B, heads, T, head_dim) runs upcast to float32."""
    return query.device.type == "cpu" and query.dtype in _LOW_PRECISION and query.shape[-1] <= FP32_CORE_MAX_HEAD_DIM


def sdpa_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """transformers' sdpa_attention_forward with the fp32 core of `fp32_core`. query/key/value: (B, heads, T,
    head_dim); returns the attention output (B, T, heads, head_dim) in the query's dtype and None."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not fp32_core(query):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()  # an additive mask must match the query's dtype
    with torch.autocast(device_type="cpu", enabled=False):
        out, weights = sdpa_attention_forward(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return out.to(query.dtype), weights


def use_rewardsmith_attention(backbone: Any) -> None:
    """Switches a transformers backbone (or a peft wrapper of one) from "sdpa" to ATTENTION_NAME; models on
    another implementation (eager, flash) are left as they are."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    base = backbone.get_base_model() if hasattr(backbone, "get_base_model") else backbone
    config = getattr(base, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return
    # Idempotent (a global name -> function map). The mask builder must be registered too: transformers builds
    # no padding mask at all for an attention name it has no mask function for.
    AttentionInterface.register(ATTENTION_NAME, sdpa_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    base.set_attn_implementation(ATTENTION_NAME)
