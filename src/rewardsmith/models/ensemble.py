"""An ensemble of reward models is a model: a folder holding `ensemble.json` (its members, each any model `score`
takes, its rule and the reference scale of every member), accepted wherever a model goes.

Members' rewards are first put on one scale: each member's reward is standardised by its mean and standard
deviation on the reference texts recorded in the folder (z = (r - mean_k) / sd_k), so that no member's scale
decides the rule. Then, per text, over the K standardised rewards:

- `mean`: their mean;
- `min`: the worst case (their minimum);
- `uwo`: uncertainty-weighted, mean - lambda * sd.

The text's uncertainty is the sd of the K standardised rewards (ddof 1). Combined rewards and uncertainties are in
reference standard deviations. Members are scalar models; an in-context model, an ensemble inside an ensemble and
an ensemble of one are refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.errors import ConfigError

ENSEMBLE_FILE = "ensemble.json"
FORMAT = "rewardsmith-ensemble"
VERSION = 1
RULES = ("mean", "min", "uwo")


@dataclass(frozen=True)
class Reference:
    """The texts every member was standardised on: where they came from, how many, their digest, and each member's
    mean and sd of rewards over them."""

    source: str
    texts: int
    digest: str
    mean: tuple[float, ...]
    sd: tuple[float, ...]


@dataclass(frozen=True)
class EnsembleSpec:
    """members: each member's source as written in the folder (a path relative to the folder, or absolute, or a hub
    id); rule: mean | min | uwo; lam: lambda of uwo; reference: the members' scales."""

    members: tuple[str, ...]
    rule: str
    lam: float
    reference: Reference
    labels: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "members": [
                {"source": m, "label": label}
                for m, label in zip(self.members, self.labels or self.members, strict=True)
            ],
            "rule": self.rule,
            "lambda": self.lam,
            "reference": {
                "source": self.reference.source,
                "texts": self.reference.texts,
                "digest": self.reference.digest,
                "mean": list(self.reference.mean),
                "sd": list(self.reference.sd),
            },
        }


def is_ensemble(source: str | Path) -> bool:
    """True when `source` is a folder holding ensemble.json."""
    try:
        return (Path(source) / ENSEMBLE_FILE).is_file()
    except (OSError, ValueError):
        return False


def check_rule(rule: str, lam: float) -> None:
    """ConfigError for an unknown rule or a negative or non-finite lambda."""
    if rule not in RULES:
        raise ConfigError(f"ensemble rule {rule!r}: expected one of {', '.join(RULES)}")
    if not (math.isfinite(lam) and lam >= 0):
        raise ConfigError(f"ensemble lambda {lam!r}: expected a number >= 0")


def member_path(folder: Path, source: str) -> str:
    """A member's source as loading reads it: relative to the ensemble folder when it names something there, else
    as written (an absolute path, or a hub id)."""
    local = folder / source
    return str(local) if not Path(source).is_absolute() and local.exists() else source


def _hub_id(source: str) -> bool:
    path = Path(source)
    return not path.is_absolute() and not source.startswith(".") and len(path.parts) == 2 and not path.exists()


def check_members(folder: Path | None, members: list[str], where: str) -> None:
    """ConfigError unless there are at least two members, each one a model folder or hub id that exists, none an
    ensemble (an ensemble inside an ensemble, or the ensemble itself)."""
    if len(members) < 2:
        raise ConfigError(f"{where}: an ensemble needs at least two members, got {len(members)}")
    seen: set[str] = set()
    for m in members:
        path = Path(m)
        if folder is not None and path.resolve() == folder.resolve():
            raise ConfigError(f"{where}: member {m} is the ensemble itself")
        if is_ensemble(path):
            raise ConfigError(f"{where}: member {m} is itself an ensemble; list its members instead")
        if not _hub_id(m) and not path.exists():
            raise ConfigError(f"{where}: member {m} does not exist")
        key = str(path.resolve()) if path.exists() else m
        if key in seen:
            raise ConfigError(f"{where}: member {m} is listed twice")
        seen.add(key)


def read_ensemble(folder: str | Path) -> EnsembleSpec:
    """The spec in `folder`/ensemble.json with member sources resolved for loading; ConfigError naming the file and
    field for anything malformed, a missing member, an ensemble of one or one that contains itself."""
    folder = Path(folder)
    path = folder / ENSEMBLE_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable ensemble file ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ConfigError(f"{path}: `format` is not {FORMAT!r}")
    members = raw.get("members")
    if not isinstance(members, list) or not all(
        isinstance(m, dict) and isinstance(m.get("source"), str) for m in members
    ):
        raise ConfigError(f"{path}: `members` must be a list of {{source, label}} objects")
    sources = [member_path(folder, m["source"]) for m in members]
    check_members(folder, sources, str(path))
    rule, lam = raw.get("rule"), raw.get("lambda", 1.0)
    if not isinstance(lam, (int, float)) or isinstance(lam, bool):
        raise ConfigError(f"{path}: `lambda` must be a number")
    check_rule(str(rule), float(lam))
    ref: Any = raw.get("reference")
    try:
        reference = Reference(
            str(ref["source"]),
            int(ref["texts"]),
            str(ref["digest"]),
            tuple(float(x) for x in ref["mean"]),
            tuple(float(x) for x in ref["sd"]),
        )
    except (TypeError, KeyError, ValueError):
        raise ConfigError(f"{path}: `reference` must hold source, texts, digest, mean and sd") from None
    if len(reference.mean) != len(sources) or len(reference.sd) != len(sources):
        raise ConfigError(
            f"{path}: `reference` has {len(reference.mean)} means and {len(reference.sd)} sds for "
            f"{len(sources)} members"
        )
    if not all(math.isfinite(s) and s > 0 for s in reference.sd) or not all(math.isfinite(m) for m in reference.mean):
        raise ConfigError(f"{path}: `reference` sds must be finite and > 0, means finite")
    labels = tuple(str(m.get("label") or m["source"]) for m in members)
    return EnsembleSpec(tuple(sources), str(rule), float(lam), reference, labels)


def scales(rewards: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Each member's mean and sd (ddof 1) of its rewards (K, N) on the reference texts."""
    r = np.asarray(rewards, dtype=np.float64)
    return tuple(float(x) for x in r.mean(axis=1)), tuple(float(x) for x in r.std(axis=1, ddof=1))


def combine(rewards: np.ndarray, spec: EnsembleSpec) -> tuple[np.ndarray, np.ndarray]:
    """(combined reward (M,), uncertainty (M,)) of members' rewards (K, M) under the spec's scales and rule."""
    mean = np.asarray(spec.reference.mean)[:, None]
    sd = np.asarray(spec.reference.sd)[:, None]
    z = (np.asarray(rewards, dtype=np.float64) - mean) / sd
    spread = z.std(axis=0, ddof=1)
    if spec.rule == "mean":
        combined = z.mean(axis=0)
    elif spec.rule == "min":
        combined = z.min(axis=0)
    else:
        combined = z.mean(axis=0) - spec.lam * spread
    return combined, spread
