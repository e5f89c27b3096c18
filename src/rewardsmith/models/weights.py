"""The one model-loading rule: weights are read from safetensors (or GGUF) only, everywhere (backbones, whole
models, adapters, heads). A folder that holds only pickle weights (`pytorch_model.bin`, `adapter_model.bin`,
`*.pt`) is refused with one line saying how to convert it, because unpickling a file runs whatever code it
carries; every `from_pretrained` call in rewardsmith also passes `use_safetensors=True`.

And weights load exactly or not at all: a config.json that does not match its weight files (a layer added or
removed, another model_type, files from two revisions) would leave weights at their random initialisation or
drop some, and score with them; every load goes through `from_pretrained_exact` / `load_adapter_exact`, which
refuse that in one line naming the two files and the first keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


def _weight_files(folder: Path) -> str:
    found = _found(folder, SAFE_PATTERNS)
    return ", ".join(found[:2]) + (f" and {len(found) - 2} more" if len(found) > 2 else "") if found else "its weights"


def _listed(keys: list[str]) -> str:
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def require_exact_load(
    folder: str | Path,
    missing: Iterable[str],
    unexpected: Iterable[str] = (),
    mismatched: Iterable[Any] = (),
    *,
    config_file: str = "config.json",
    allow_missing: tuple[str, ...] = (),
    model: Any = None,
) -> None:
    """CheckpointError (one line naming the two files and the first keys) when the weights a loader read do not fill
    the model its config describes exactly: a weight the model needs that the files lack would be left at its
    random initialisation, and a weight the files hold that the model has no place for would be dropped, so either
    would score with other weights than the ones trained, with no sign. Missing keys starting with an
    `allow_missing` prefix are the ones a loader leaves out on purpose (a pooler it strips). With `model` given, an
    unexpected key counts only when it belongs to the model's body (its first name, after the base model prefix, is
    one of the model's modules): a task head the model has no place for (a causal LM's lm_head, a classifier's
    score under AutoModel) is dropped on purpose."""
    folder = Path(folder)
    lack = sorted(k for k in missing if not k.startswith(allow_missing))
    extra = sorted(k for k in unexpected if model is None or _in_body(model, k))
    shapes = sorted(str(m[0] if isinstance(m, tuple) else m) for m in mismatched)
    if not (lack or extra or shapes):
        return
    parts = []
    if lack:
        parts.append(f"{len(lack)} weight(s) the config needs are not in the files ({_listed(lack)})")
    if extra:
        parts.append(f"{len(extra)} weight(s) in the files have no place in the config's model ({_listed(extra)})")
    if shapes:
        parts.append(f"{len(shapes)} weight(s) have another shape than the config gives ({_listed(shapes)})")
    raise CheckpointError(
        f"{folder}: {config_file} does not match {_weight_files(folder)}: " + "; ".join(parts) + ". Scoring would "
        "use random or dropped weights; use the config written with these weights (both files from one save)"
    )


def load_adapter_exact(base: Any, folder: str | Path) -> Any:
    """PeftModel.from_pretrained(base, folder, use_safetensors=True), refused with require_exact_load's one line when
    the adapter file and the modules its adapter_config.json creates on `base` differ: peft leaves a missing LoRA
    weight at its initialisation (lora_B = 0: the base model's scores) and drops an unexpected one, warning at
    most."""
    import warnings

    from peft import PeftModel, get_peft_model_state_dict
    from safetensors import safe_open

    folder = Path(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one-line refusal below says what peft would warn about
        model = PeftModel.from_pretrained(base, str(folder), use_safetensors=True)
    files = sorted(folder.glob("adapter_model*.safetensors"))
    in_files: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            in_files.update(handle.keys())
    expected = set(get_peft_model_state_dict(model))
    require_exact_load(folder, expected - in_files, in_files - expected, config_file="adapter_config.json")
    return model


def _in_body(model: Any, key: str) -> bool:
    """Whether a state-dict key names a part of `model` (a transformers model) or of its base model, rather than a
    head the model lacks."""
    prefix = str(getattr(model, "base_model_prefix", "") or "")
    roots = {name for name, _ in model.named_children()}
    base = getattr(model, prefix, None) if prefix else None
    if base is not None and base is not model and hasattr(base, "named_children"):
        roots |= {name for name, _ in base.named_children()}
    stripped = key[len(prefix) + 1 :] if prefix and key.startswith(prefix + ".") else key
    return key.split(".", 1)[0] in roots or stripped.split(".", 1)[0] in roots


def from_pretrained_exact(auto_cls: Any, folder: str | Path, allow_missing: tuple[str, ...] = (), **kwargs: Any) -> Any:
    """`auto_cls.from_pretrained(folder, use_safetensors=True, **kwargs)`, refused by require_exact_load when the
    weights read do not fill the model the config describes exactly."""
    # ignore_mismatched_sizes: transformers would raise "... look at the above report!" about a report that
    # quiet_transformers keeps off the screen; loaded, the mismatched keys come back in `info`, and
    # require_exact_load names them in one line.
    kwargs.setdefault("ignore_mismatched_sizes", True)
    model, info = auto_cls.from_pretrained(str(folder), use_safetensors=True, output_loading_info=True, **kwargs)
    require_exact_load(
        folder,
        info.get("missing_keys", ()),
        info.get("unexpected_keys", ()),
        info.get("mismatched_keys", ()),
        allow_missing=allow_missing,
        model=model,
    )
    return model
