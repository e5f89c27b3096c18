"""JSON-ready values: numpy scalars and arrays, tuples, paths and dataclasses turned into plain JSON types,
NaN and infinities written as null (JSON has neither)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def json_ready(value: Any) -> Any:
    """A copy of `value` made of dict / list / str / int / float / bool / None only.

    Mapping keys become strings; numpy arrays and tuples become lists; numpy scalars Python scalars;
    non-finite floats None; Paths strings; dataclasses dicts. Anything else raises TypeError naming it.
    """
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_ready(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_ready(dataclasses.asdict(value))
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return json_ready(value.tolist())
    if hasattr(value, "item"):
        return json_ready(value.item())
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(value: Any, indent: int | None = 2) -> str:
    """`json_ready(value)` as text (strict JSON: no NaN), with a trailing newline."""
    return json.dumps(json_ready(value), indent=indent, allow_nan=False, ensure_ascii=False) + "\n"


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text, split on newlines only. str.splitlines() also splits on characters a JSON string
    written with ensure_ascii=False holds as they are (U+2028, U+2029, U+0085, U+001C-U+001E, form feed), so it would
    cut a record of generated text in two; the empty text after a final newline is not a line."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines
