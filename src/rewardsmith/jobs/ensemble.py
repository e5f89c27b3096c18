"""`rewardsmith ensemble`: makes an ensemble folder (models.ensemble) from reward models; its inference is
rewardsmith.inference.ensemble."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rewardsmith.inference import InferenceOptions, write_ensemble
from rewardsmith.jobs.common import JobResult
from rewardsmith.models.ensemble import ENSEMBLE_FILE


def make_ensemble(
    models: Sequence[str],
    out: str | Path,
    rule: str = "mean",
    lam: float = 1.0,
    reference: str | Path | None = None,
    options: InferenceOptions | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> JobResult:
    """Writes the ensemble folder `out` (inference.write_ensemble): the members, their fingerprints and scales on
    the reference texts, the rule."""
    spec, rewards, ref_label = write_ensemble(models, out, rule, lam, reference, options, overwrite, progress)
    out = Path(out)
    return JobResult(
        out,
        f"ensemble of {len(models)} -> {out}",
        spec.to_dict(),
        [
            {"member": name, "reference mean": round(float(mu), 4), "reference sd": round(float(s), 4)}
            for name, mu, s in zip(models, spec.reference.mean, spec.reference.sd, strict=True)
        ],
        [
            f"rule {rule}"
            + (f", lambda {lam:g}" if rule == "uwo" else "")
            + f"; reference {ref_label}: {rewards.shape[1]} texts",
            f"wrote {out / ENSEMBLE_FILE}",
        ],
    )
