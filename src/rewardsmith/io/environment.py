"""What a run folder records about the software it ran on (versions, git commit, seed) and the CPU, and whether the
hub may be asked."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("rewardsmith", "torch", "transformers", "peft", "accelerate", "numpy", "scipy", "scikit-learn")


def hub_offline() -> bool:
    """Whether $HF_HUB_OFFLINE is set now. Read at each call: huggingface_hub reads it once, on import, so a value
    set later (a test, a notebook) would otherwise be ignored and a hub id wait for the network to time out."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0")


def hub_notice(name: str) -> None:
    """One line, before the Hugging Face Hub is asked for `name` (not offline, no local folder of that name): the
    hub may take tens of seconds to answer or to fail where there is no network, and the wait should not be silent."""
    print(
        f"{name}: no local folder of that name; asking the Hugging Face Hub (set HF_HUB_OFFLINE=1 to never ask)",
        flush=True,
    )


def git_commit(path: Path | None = None) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=path or Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo; platform's answer elsewhere): timings differ from one CPU to another."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def cpu_bf16_native() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX-512 BF16 or AMX), as oneDNN reports it: where it does not,
    bf16 is emulated and rewardsmith runs fp32 instead (models/precision.py)."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cpu_facts() -> dict[str, Any]:
    """The CPU a timing ran on: its model, how many cores, whether it has native bf16."""
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "bf16_native": cpu_bf16_native()}


def environment_info(seed: int | None = None) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    import torch

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
        "git_commit": git_commit(),
        "seed": seed,
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),  # the `rewardsmith` command's choice (launch.py)
        "cuda": torch.cuda.is_available(),
        # False: bf16 asked for on this CPU ran in fp32 (models/precision.py)
        "bf16_native": torch.cuda.is_available() or cpu_bf16_native(),
    }
