"""Pieces every job shares: opening a run folder for a config, the result a job returns, and the terminal
summary lines (what was read, dropped by reason, truncated, written)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardsmith.config import dump_yaml, to_dict, volatile_keys
from rewardsmith.errors import ConfigError
from rewardsmith.io.runfolder import Compare, RunFolder


@dataclass
class JobResult:
    """out: the run folder; metrics: what metrics.json holds; rows: the console results table; summary: the
    read / dropped / truncated / written lines; reused: the folder held this finished run already."""

    out: Path
    title: str
    metrics: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    reused: bool = False


def open_run(
    out: str | Path,
    command: str,
    config: Any,
    overwrite: bool = False,
    compare: Compare | None = None,
    extra_volatile: Sequence[str] = (),
) -> RunFolder:
    """Opens the run folder for `command` with a config dataclass and writes config.yaml (resolved)."""
    volatile = [*volatile_keys(type(config)), *extra_volatile]
    folder = RunFolder.open(out, command, to_dict(config), overwrite=overwrite, volatile=volatile, compare=compare)
    folder.write_text("config.yaml", dump_yaml(config))
    return folder


def finished_run(
    folder: RunFolder, title: str, rows: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None
) -> JobResult | None:
    """The result of the finished run `folder` already holds (its metrics.json), or None when it holds none: a
    command rerun on its own finished folder reports it instead of training again."""
    path = folder.path / "metrics.json"
    if not (folder.complete and path.exists()):
        return None
    metrics = json.loads(path.read_text(encoding="utf-8"))
    return JobResult(
        folder.path,
        title,
        metrics,
        rows(metrics) if rows else [],
        [f"{folder.path} already holds this finished run; nothing retrained (--overwrite redoes it)"],
        reused=True,
    )


def dataset_lines(summaries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per dataset read, whose figures add up: what was read (rows, or a part's pairs) = used + set aside
    (held out, past a cap: `set_aside`) + dropped (bad rows by reason, and pairs sharing a conversation with
    training); anything a summary leaves unexplained is said as "not used"."""
    lines = []
    for name, s in summaries.items():
        label = s.get("label", name)
        read = s["rows"] if "rows" in s else s.get("pairs")
        used = s.get("used")
        drops = {k.replace("_", " "): int(v) for k, v in (s.get("dropped") or {}).items() if v}
        if s.get("overlap_removed"):
            drops["shares a conversation with training"] = int(s["overlap_removed"])
        aside = {k: int(v) for k, v in (s.get("set_aside") or {}).items() if v}
        parts = [f"{read} {'rows read' if 'rows' in s else 'pairs'}"] if read is not None else []
        if used is not None:
            parts.append(f"{used} used")
            parts += [f"{v} {k}" for k, v in aside.items()]
            rest = (read or 0) - used - sum(aside.values()) - sum(drops.values())
            if read is not None and rest > 0:
                parts.append(f"{rest} not used")
        if drops:
            reasons = ", ".join(f"{k} {v}" for k, v in drops.items())
            parts.append(f"{sum(drops.values())} dropped ({reasons})")
        text = f"read {label}: " + ", ".join(parts)
        repairs = {k: v for k, v in (s.get("repaired") or {}).items() if v}
        if repairs:
            text += " (repaired: " + ", ".join(f"{k.replace('_', ' ')} in {v} pairs" for k, v in repairs.items()) + ")"
        lines.append(text)
    return lines


def truncation_line(counts: Mapping[str, int], what: str = "sequences") -> str:
    n = counts.get("texts", 0)
    return (
        f"truncated {what}: prompt cut in {counts.get('prompt_truncated', 0)} of {n}, response cut in "
        f"{counts.get('response_truncated', 0)} of {n}"
    )


def written_line(folder: RunFolder | Path, names: Sequence[str]) -> str:
    base = folder.path if isinstance(folder, RunFolder) else Path(folder)
    present = [n for n in dict.fromkeys(names) if (base / n).exists()]  # each name once, in order
    return f"wrote {base}: " + ", ".join(present)


def add_counts(total: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    for k, v in more.items():
        total[k] = total.get(k, 0) + int(v)
    return total


# ------------------------------------------------------------------------------------------ models by name


def model_labels(sources: Sequence[str]) -> list[str]:
    """Display names of the models, in order: a folder's name, or its parent's for a folder called `model`
    ("runs/harmless/model" -> "harmless"); a hub id as given; the source itself wherever two names coincide.
    ConfigError for a model given twice."""
    seen: set[str] = set()
    for source in sources:
        if source in seen:
            raise ConfigError(f"--model {source} given twice")
        seen.add(source)
    names = []
    for source in sources:
        path = Path(source.rstrip("/"))
        names.append(path.parent.name if path.name == "model" and path.parent.name else path.name or source)
    return [name if names.count(name) == 1 else source for name, source in zip(names, sources, strict=True)]


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_") or "model"
