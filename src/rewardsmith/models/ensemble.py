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

The reference scales hold only for the members as they were: the file records each member's content digest
(io.digests.folder_digest), and a member whose files changed since (retrained in place) is refused, as is a file
with keys this format does not have. A member written as a relative path is read relative to the ensemble folder
only, never to the working directory, so a moved folder cannot pick up another model of the same name.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.errors import ConfigError
from rewardsmith.io.digests import folder_digest
from rewardsmith.stats import require_finite

ENSEMBLE_FILE = "ensemble.json"
FORMAT = "rewardsmith-ensemble"
VERSION = 2  # 2: each member's content digest (`fingerprint`); a version-1 file has none and is refused
RULES = ("mean", "min", "uwo")
# The largest uwo lambda: beyond it mean - lambda * sd is lambda * sd to float precision (and overflows near 1e308).
MAX_LAMBDA = 1e6
_KEYS = {"format", "version", "members", "rule", "lambda", "reference"}
_MEMBER_KEYS = {"source", "label", "fingerprint"}
_REFERENCE_KEYS = {"source", "texts", "digest", "mean", "sd"}


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
    id); rule: mean | min | uwo; lam: lambda of uwo; reference: the members' scales; fingerprints: each member's
    content digest when the ensemble was made (member_fingerprint)."""

    members: tuple[str, ...]
    rule: str
    lam: float
    reference: Reference
    labels: tuple[str, ...] = field(default=())
    fingerprints: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "members": [
                {"source": m, "label": label, "fingerprint": fingerprint}
                for m, label, fingerprint in zip(
                    self.members, self.labels or self.members, self.fingerprints, strict=True
                )
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
    """ConfigError for an unknown rule or a lambda that is negative, non-finite or above MAX_LAMBDA."""
    if rule not in RULES:
        raise ConfigError(f"ensemble rule {rule!r}: expected one of {', '.join(RULES)}")
    if not (math.isfinite(lam) and 0 <= lam <= MAX_LAMBDA):
        raise ConfigError(f"ensemble lambda {lam!r}: expected a number from 0 to {MAX_LAMBDA:g}")


def member_path(folder: Path, source: str) -> str:
    """A member's source as loading reads it: an absolute path as written; a relative path relative to the ensemble
    folder only (never to the working directory); a hub id (owner/name) as written unless the folder holds a path
    of that name."""
    if Path(source).is_absolute():
        return source
    local = folder / source
    return source if _hub_id(source) and not local.exists() else str(local)


def member_fingerprint(source: str) -> str:
    """A member's content digest: its folder's files (io.digests.folder_digest), or "hub:<id>" for a hub id."""
    path = Path(source)
    return folder_digest(path) if path.is_dir() else f"hub:{source}"


def _hub_id(source: str) -> bool:
    """owner/name: two parts, neither starting with a dot, not absolute (a hub id's shape, not a local path's)."""
    path = Path(source)
    return not path.is_absolute() and len(path.parts) == 2 and not any(p.startswith(".") for p in path.parts)


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


def _unknown(raw: dict[str, Any], known: set[str], path: Path, where: str) -> None:
    extra = sorted(set(raw) - known)
    if extra:
        raise ConfigError(f"{path}: unknown key {extra[0]!r} in {where}; known: {', '.join(sorted(known))}")


def read_ensemble(folder: str | Path, check_fingerprints: bool = True) -> EnsembleSpec:
    """The spec in `folder`/ensemble.json with member sources resolved for loading; ConfigError naming the file and
    field for anything malformed (an unknown key too), a missing member, an ensemble of one or one that contains
    itself, and (check_fingerprints) a member whose files changed since the ensemble was made."""
    folder = Path(folder)
    path = folder / ENSEMBLE_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable ensemble file ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ConfigError(f"{path}: `format` is not {FORMAT!r}")
    if raw.get("version") != VERSION:
        raise ConfigError(
            f"{path}: version {raw.get('version')!r}, not {VERSION}: made before members' fingerprints were recorded; "
            "run `rewardsmith ensemble` again to remake it"
        )
    _unknown(raw, _KEYS, path, "the file")
    members = raw.get("members")
    if not isinstance(members, list) or not all(
        isinstance(m, dict) and isinstance(m.get("source"), str) and isinstance(m.get("fingerprint"), str)
        for m in members
    ):
        raise ConfigError(f"{path}: `members` must be a list of {{source, label, fingerprint}} objects")
    for m in members:
        _unknown(m, _MEMBER_KEYS, path, "a member")
    sources = [member_path(folder, m["source"]) for m in members]
    check_members(folder, sources, str(path))
    fingerprints = tuple(m["fingerprint"] for m in members)
    if check_fingerprints:
        for m, source, recorded in zip(members, sources, fingerprints, strict=True):
            now = member_fingerprint(source)
            if now != recorded:
                raise ConfigError(
                    f"{path}: member {m['source']} changed since the ensemble was made (content {recorded} -> {now}); "
                    "its reference scale no longer holds: run `rewardsmith ensemble` again"
                )
    rule, lam = raw.get("rule"), raw.get("lambda", 1.0)
    if not isinstance(lam, (int, float)) or isinstance(lam, bool):
        raise ConfigError(f"{path}: `lambda` must be a number")
    check_rule(str(rule), float(lam))
    ref: Any = raw.get("reference")
    if isinstance(ref, dict):
        _unknown(ref, _REFERENCE_KEYS, path, "`reference`")
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
    return EnsembleSpec(tuple(sources), str(rule), float(lam), reference, labels, fingerprints)


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
    return require_finite(combined), spread
