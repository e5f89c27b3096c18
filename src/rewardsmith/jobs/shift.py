"""`rewardsmith shift`: the weak-to-strong preference-shift protocol into a run folder."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardsmith.config import from_dict, to_dict, volatile_keys
from rewardsmith.errors import RewardsmithError
from rewardsmith.io.environment import environment_info
from rewardsmith.io.runfolder import differing_keys, flatten, unflatten
from rewardsmith.jobs.common import JobResult, open_run, written_line
from rewardsmith.report.render import with_interval
from rewardsmith.report.w2s import shift_report
from rewardsmith.w2s.config import ShiftConfig
from rewardsmith.w2s.pipeline import ShiftData, resolve_config, run_shift, torch_threads

# Keys a rerun may change: students are stored per seed and method, so seeds and methods may be added; the
# evaluation settings only change how finished models are summarised.
_EXTENDABLE = ("seeds", "methods", "name")


def shift_compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Resume check of a shift run: everything equal except seeds, evaluation settings and new methods; a
    method that keeps its name must keep its settings (its trained students would be stale otherwise)."""
    with contextlib.suppress(RewardsmithError, TypeError, ValueError):
        # Settings added to the config since the folder was written read as their defaults, so they do not
        # count as a change (RunFolder hands the configs over flattened).
        old = flatten(to_dict(from_dict(ShiftConfig, unflatten(old))))
    new = flatten(unflatten(new))
    volatile = [*volatile_keys(ShiftConfig), *_EXTENDABLE, *[k for k in set(old) | set(new) if k.startswith("eval.")]]
    diff = differing_keys(old, new, volatile)
    old_methods = {m["name"]: m for m in old.get("methods", [])}
    for m in new.get("methods", []):
        if m["name"] in old_methods and old_methods[m["name"]] != m:
            diff.append(f"methods[{m['name']}]")
    return diff


def console_rows(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each model's ID accuracy, WRG, and accuracy / NTS on every target (percentage points, CIs)."""
    rows = []
    for name, rec in metrics["methods"].items():
        row: dict[str, Any] = {
            "model": name,
            "ID": with_interval(rec.get("id_acc"), rec.get("id_acc_ci"), 1),
            "WRG": with_interval(rec.get("wrg"), None, 1) if "wrg" in rec else "",
        }
        for target in metrics["targets"]:
            short = target.split("/")[-1]
            row[short] = with_interval(rec.get(f"ood_acc.{target}"), None, 1)
            row[f"NTS {short}"] = with_interval(rec.get(f"nts.{target}"), None, 1) if f"nts.{target}" in rec else ""
        rows.append(row)
    return rows


def run_shift_job(
    config: ShiftConfig,
    out: str | Path,
    *,
    quick: bool = False,
    data_dir: str | Path | None = None,
    seeds: list[int] | None = None,
    progress: bool = True,
    train: bool = True,
    overwrite: bool = False,
    data: ShiftData | None = None,
    title: str | None = None,
) -> JobResult:
    """Runs (or resumes, or re-evaluates with train=False) a shift run into the run folder `out`."""
    cfg = resolve_config(config, quick=quick, data_dir=data_dir, seeds=seeds)
    torch_threads(cfg.threads)
    with open_run(out, "shift", cfg, overwrite, compare=shift_compare) as folder:
        for name in ("teacher", "cache", "plots", *[f"seed{s}" for s in cfg.seeds]):
            folder.claim(name)
        metrics, data = run_shift(cfg, folder.path, progress=progress, data=data, train=train)
        metrics["environment"] = environment_info()
        folder.write_json("metrics.json", metrics)
        shift_report(cfg, metrics, folder, title)
        folder.mark_complete()
        gap = metrics.get("gap_ceiling_minus_teacher", {}).get("id")
        summary = [
            "sizes: " + ", ".join(f"{k} {v}" for k, v in metrics["sizes"].items()),
            "teacher labels: " + f"{metrics['teacher_labels']['accuracy_on_w2s_pool']:.1f}% agree with gold, "
            f"mean confidence {metrics['teacher_labels']['mean_confidence']:.3f}",
        ]
        if gap:
            summary.append(f"ceiling minus teacher, ID: {with_interval(gap['value'], gap['ci'], 1)} points")
        removed = {k: v for k, v in metrics["target_overlap_removed"].items() if v}
        if removed:
            summary.append(
                "target pairs removed (conversation seen in training): "
                + ", ".join(f"{k} {v}" for k, v in removed.items())
            )
        summary.append(written_line(folder, ["metrics.json", "report.md", "report.html", "plots"]))
        return JobResult(
            folder.path,
            f"rewardsmith shift {cfg.name} ({metrics['seconds']:.0f} s) -> {out}",
            metrics,
            console_rows(metrics),
            summary,
        )
