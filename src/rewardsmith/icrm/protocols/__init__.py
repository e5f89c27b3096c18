"""ICRM evaluation protocols, one module each, registered by name. A protocol is a function of an
EvalContext returning a JSON-ready metrics dict; it computes, and the report layer draws. Its targets are data no
training saw (context.py: a training source's test part or a source outside training, without any conversation of
a training pair; `overlap_removed` counts those dropped). A `per_pair` entry, when present, holds per-target
figures for summaries over seeds; the job writes it to per_pair.json beside metrics.json.

- steerability: accuracy against flipped and helpful standards as N grows (pku-saferlhf), against BT;
- calibration: ECE and mean absolute error of mu against demonstrated mixture rates (moralchoice);
- rmbench: RM-Bench easy / normal / hard per subset and overall;
- pareto: respond-versus-refuse frontier hypervolume per N (RM-Bench safety subsets);
- math500: reference above corrupted solutions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rewardsmith.errors import ConfigError
from rewardsmith.icrm.protocols.calibration import calibration
from rewardsmith.icrm.protocols.context import UNSEEN_SOURCES, EvalContext, check_training_sources, load_context
from rewardsmith.icrm.protocols.math500 import math500
from rewardsmith.icrm.protocols.pareto import pareto
from rewardsmith.icrm.protocols.rmbench import rmbench
from rewardsmith.icrm.protocols.steerability import steerability
from rewardsmith.registry import Registry

Protocol = Callable[[EvalContext], dict[str, Any]]
PROTOCOLS: Registry[Protocol] = Registry("icrm protocol")
for _name, _fn in (("steerability", steerability), ("calibration", calibration), ("rmbench", rmbench),
                   ("pareto", pareto), ("math500", math500)):
    PROTOCOLS.add(_name, _fn)


def protocol_names(name: str) -> list[str]:
    """The protocols `name` stands for ("all" = every one); unknown names fail before any work."""
    names = PROTOCOLS.names() if name == "all" else [name]
    for n in names:
        PROTOCOLS.get(n)
    return names


def check_eval_settings(n_values: list[int]) -> None:
    if not n_values or any(v < 0 for v in n_values):
        raise ConfigError("eval.n_values must be a non-empty list of N >= 0")


__all__ = ["PROTOCOLS", "UNSEEN_SOURCES", "EvalContext", "check_eval_settings", "check_training_sources",
           "load_context", "protocol_names"]
