"""What a run folder records about the software it ran on (versions, git commit, seed)."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("rewardsmith", "torch", "transformers", "peft", "accelerate", "numpy", "scipy", "scikit-learn")


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
        "cuda": torch.cuda.is_available(),
    }
