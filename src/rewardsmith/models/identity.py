"""What a model is, by content: the one place that fingerprints models (saved results are reused under it) and
tells whether two sources are the same model (a proxy is never its own gold).

- `model_fingerprint(source)`: the digest of every file of a local model folder (a LoRA adapter's local base
  included; an ensemble's own file and each member's fingerprint); a built-in backbone or hub id is its name, so
  the fingerprint is that name ("hub:owner/name").
- `weights_fingerprints(source)`: one digest of the files that hold a model's weights (safetensors, GGUF, ...),
  whatever their names or the folder's other files; an ensemble's is the set of its members'. Two sources share
  weights when the sets meet: a copy of a model under another name, or an ensemble that holds the other model
  as a member. Two models that share a frozen backbone but not their heads do not.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rewardsmith.io.digests import file_digest, folder_digest, folder_files
from rewardsmith.models.ensemble import ENSEMBLE_FILE, is_ensemble, read_ensemble

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt", ".npz", ".npy")


def _is_weights(relative: str) -> bool:
    return relative.lower().endswith(WEIGHT_SUFFIXES)


def _adapter_base(folder: Path) -> Path | None:
    """The local base model folder a PEFT adapter names (None: a hub id, or not an adapter)."""
    try:
        raw = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    base = raw.get("base_model_name_or_path") if isinstance(raw, dict) else None
    if not isinstance(base, str) or not base:
        return None
    path = Path(base) if Path(base).is_absolute() else folder / base
    return path if path.is_dir() else None


def model_fingerprint(source: str | Path) -> str:
    """A digest of what `source` holds (module docstring): equal for two copies of a model, different once any of
    its files changes. A name that is not a local folder (a built-in backbone, a hub id) is its own identity."""
    path = Path(source).expanduser()
    if not path.is_dir():
        return f"hub:{source}"
    parts = [folder_digest(path)]
    if is_ensemble(path):
        parts += [model_fingerprint(m) for m in read_ensemble(path).members]
    base = _adapter_base(path)
    if base is not None and base.resolve() != path.resolve():
        parts.append(model_fingerprint(base))
    if len(parts) == 1:
        return parts[0]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def weights_fingerprints(source: str | Path) -> frozenset[str]:
    """{the digest of all weight files of `source` together} (an ensemble: one per member); a name that is not a
    local folder: {its name}."""
    path = Path(source).expanduser()
    if not path.is_dir():
        return frozenset({f"hub:{source}"})
    if is_ensemble(path):
        return frozenset().union(*(weights_fingerprints(m) for m in read_ensemble(path).members))
    files = folder_files(path, _is_weights)
    if not files:  # no weight files of a known kind: the whole folder is its identity
        return frozenset({folder_digest(path)})
    digests = sorted(file_digest(f) for f in files)
    base = _adapter_base(path)
    if base is not None and base.resolve() != path.resolve():
        digests += sorted(weights_fingerprints(base))
    return frozenset({hashlib.sha256(json.dumps(digests).encode()).hexdigest()[:16]})


def shared_weights(a: str | Path, b: str | Path) -> bool:
    """Whether `a` and `b` hold a weight file in common: the same model under two names, a copy of it, or an
    ensemble holding the other (or one of its members)."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    if pa.exists() and pb.exists() and pa.resolve() == pb.resolve():
        return True
    return bool(weights_fingerprints(a) & weights_fingerprints(b))


__all__ = ["ENSEMBLE_FILE", "model_fingerprint", "shared_weights", "weights_fingerprints"]
