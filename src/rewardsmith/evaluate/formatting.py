"""Numbers as text, the one formatting of a figure with its interval: used by the report renderer
(rewardsmith.report.render re-exports both) and by capabilities that hand the report layer ready-made rows; and of
a benchmark's ratio with its range over rounds (the benchmarks and the doc blocks they fill)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def is_number(value: Any) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_interval(value: Any) -> bool:
    """True for a [low, high] pair of numbers (either may be None)."""
    return isinstance(value, list | tuple) and len(value) == 2 and all(v is None or is_number(v) for v in value)


def format_value(value: Any, decimals: int = 1) -> str:
    """A cell's text: floats with `decimals` decimals, ints as is, None / NaN as "n/a", bools as "yes" /
    "no", [low, high] as "[a, b]"."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        text = f"{value:.{decimals}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text  # -0.03 -> "0.0", not "-0.0"
    if is_interval(value):
        return f"[{format_value(value[0], decimals)}, {format_value(value[1], decimals)}]"
    if isinstance(value, list | tuple):
        return ", ".join(format_value(v, decimals) for v in value)
    return str(value)


def with_interval(value: Any, interval: Any, decimals: int) -> str:
    """The value's text and, when `interval` has a bound, its [low, high]: "61.2 [58.0, 64.1]" (else "61.2")."""
    text = format_value(value, decimals)
    if is_number(value) and is_interval(interval) and any(v is not None for v in interval):
        text += f" {format_value([None if v is None else float(v) for v in interval], decimals)}"
    return text


def with_range(spread: Mapping[str, float], *, percent: bool = False, unit: str = "x") -> str:
    """A per-round ratio as its median and its range over rounds (a benchmark's {median, min, max}): "1.23x
    (1.10-1.40)" (2 decimals, then `unit`), or with `percent` the share "97% (93-101%)"."""
    if percent:
        return f"{100 * spread['median']:.0f}% ({100 * spread['min']:.0f}-{100 * spread['max']:.0f}%)"
    return f"{spread['median']:.2f}{unit} ({spread['min']:.2f}-{spread['max']:.2f})"
