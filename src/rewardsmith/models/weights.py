"""The one model-loading rule: weights are read from safetensors (or GGUF) only, everywhere (backbones, whole
models, adapters, heads). A folder that holds only pickle weights (`pytorch_model.bin`, `adapter_model.bin`,
`*.pt`) is refused with one line saying how to convert it, because unpickling a file runs whatever code it
carries; every `from_pretrained` call in rewardsmith also passes `use_safetensors=True`.
"""

from __future__ import annotations

from pathlib import Path

from rewardsmith.errors import CheckpointError

SAFE_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.gguf")
PICKLE_PATTERNS = ("*.bin", "*.bin.index.json", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")


def _found(folder: Path, patterns: tuple[str, ...], ignore: tuple[str, ...] = ()) -> list[str]:
    return sorted({p.name for pattern in patterns for p in folder.glob(pattern) if p.is_file()} - set(ignore))


def require_safetensors(folder: str | Path, what: str = "model", ignore: tuple[str, ...] = ()) -> None:
    """CheckpointError (one line) when `folder` has pickle weights and no safetensors or GGUF weights (files named
    in `ignore`, such as a rewardsmith folder's heads.safetensors, do not count as the weights)."""
    folder = Path(folder)
    if not folder.is_dir() or _found(folder, SAFE_PATTERNS, ignore):
        return
    pickles = _found(folder, PICKLE_PATTERNS)
    if pickles:
        raise CheckpointError(
            f"{folder}: the {what} weights are pickle files only ({', '.join(pickles[:3])}); rewardsmith reads "
            "safetensors only (a pickle runs code when loaded). Convert it once, if you trust the file: load it with "
            "transformers (AutoModelForSequenceClassification for a reward model, else AutoModel) and call "
            f"save_pretrained('{folder}-safetensors')"
        )
