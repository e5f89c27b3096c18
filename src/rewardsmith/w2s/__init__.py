"""Weak-to-strong reward models under preference shift (METHODS.md section 1).

Importing registers the W2S objectives (naive, confidence, anchor, ceiling) in
rewardsmith.train.objectives.OBJECTIVES and the label refiners (none, seam) in LABEL_REFINERS; nothing
else happens at import time.
"""

from rewardsmith.w2s import objectives as objectives
from rewardsmith.w2s.config import MethodConfig, ShiftConfig
from rewardsmith.w2s.refiners import LABEL_REFINERS


def run_shift(*args, **kwargs):
    """See rewardsmith.w2s.pipeline.run_shift (imported lazily: it pulls in the trainer and transformers)."""
    from rewardsmith.w2s.pipeline import run_shift as _run_shift

    return _run_shift(*args, **kwargs)


__all__ = ["LABEL_REFINERS", "MethodConfig", "ShiftConfig", "objectives", "run_shift"]
