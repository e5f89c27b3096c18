"""Whether bf16 runs where it is asked for: only on a device that multiplies bf16 natively.

bf16 autocast is a speed option (the backbone's products in bf16; pooling and heads stay fp32). It is fast on a CPU
only where the CPU multiplies bf16 natively (AVX-512 BF16 or AMX; oneDNN reports it). Elsewhere (an AVX2-only CPU,
e.g. an AMD EPYC Zen 3) every bf16 product is emulated: on a 2-core AVX2 EPYC a 512 x 384 by 384 x 1536 product
took 463 ms against 10.6 ms in fp32, and a MiniLM training run went at 0.33 pairs/s against about 11 in fp32. There
bf16 buys nothing and costs a run (the demo's included) tens of times its length, so the work runs in fp32, and one
line on stderr, once per process, says so before it starts. A run folder's environment records
`bf16_native` (io/environment.py), so a config that asked for bf16 says where it did not get it.
"""

from __future__ import annotations

import functools
import sys

import torch

from rewardsmith.io.environment import cpu_bf16_native


def bf16_native(device: torch.device | str) -> bool:
    """Whether bf16 products run natively on `device`: always on an accelerator, on a CPU where oneDNN says so."""
    return torch.device(device).type != "cpu" or cpu_bf16_native()


FP32_INSTEAD = (
    "note: running in fp32, not the bf16 asked for: this CPU has no native bf16 (no AVX-512 BF16 or AMX), and "
    "emulated bf16 is tens of times slower than fp32 (rewardsmith/models/precision.py)"
)


def use_bf16(asked: bool | None, device: torch.device | str) -> bool:
    """Whether work on `device` runs under bf16 autocast: when asked and native there. Asked but not native: False,
    and FP32_INSTEAD on stderr once per process."""
    if not asked:
        return False
    if bf16_native(device):
        return True
    _say_fp32_instead()
    return False


@functools.cache
def _say_fp32_instead() -> None:
    """FP32_INSTEAD on stderr, the first time only (cached: once per process)."""
    print(FP32_INSTEAD, file=sys.stderr, flush=True)
