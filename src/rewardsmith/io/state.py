"""Pickle-free state files: nested dicts, lists and tuples of tensors, numpy arrays and JSON scalars, stored
as one safetensors file (the arrays) plus one JSON file (the structure and the scalars).

Loading reads tensors and JSON only, so a crafted file can fail to load but can never run code (unlike
torch.load without weights_only). A state folder is written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from rewardsmith.errors import CheckpointError, first_line
from rewardsmith.io.atomic import atomic_folder

TENSORS_FILE = "tensors.safetensors"
STRUCTURE_FILE = "state.json"
_FORMAT = "rewardsmith.state/1"


def _flatten(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """JSON structure of `value`, moving every array into `tensors` under a numbered key."""
    if isinstance(value, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = value.detach().cpu().clone().contiguous()
        return {"__tensor__": key}
    if isinstance(value, np.ndarray):
        key = f"t{len(tensors)}"
        tensors[key] = torch.from_numpy(np.ascontiguousarray(value).copy())
        return {"__ndarray__": key}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in value):
            return {k: _flatten(v, tensors) for k, v in value.items()}
        return {"__items__": [[_flatten(k, tensors), _flatten(v, tensors)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [_flatten(v, tensors) for v in value]}
    if isinstance(value, list):
        return [_flatten(v, tensors) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} in a state file")


def _unflatten(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [_unflatten(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tensor__" in value:
        return tensors[value["__tensor__"]]
    if "__ndarray__" in value:
        return tensors[value["__ndarray__"]].numpy()
    if "__tuple__" in value:
        return tuple(_unflatten(v, tensors) for v in value["__tuple__"])
    if "__items__" in value:
        return {_unflatten(k, tensors): _unflatten(v, tensors) for k, v in value["__items__"]}
    return {k: _unflatten(v, tensors) for k, v in value.items()}


def save_state(folder: str | Path, state: Any) -> Path:
    """Writes `state` into `folder` (tensors.safetensors + state.json), atomically."""
    tensors: dict[str, torch.Tensor] = {}
    structure = _flatten(state, tensors)
    folder = Path(folder)
    with atomic_folder(folder) as tmp:
        save_file(tensors, str(tmp / TENSORS_FILE))
        (tmp / STRUCTURE_FILE).write_text(json.dumps({"format": _FORMAT, "state": structure}))
    return folder


def load_state(folder: str | Path) -> Any:
    """The state saved by save_state. CheckpointError (one line) when the folder is missing or unreadable."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / STRUCTURE_FILE).read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
            raise ValueError(f"not a {_FORMAT} file")
        tensors = load_file(str(folder / TENSORS_FILE))
        return _unflatten(meta["state"], tensors)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, SafetensorError) as exc:
        detail = first_line(exc)
        raise CheckpointError(f"{folder}: cannot read saved state ({detail})") from None
